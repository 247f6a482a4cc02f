package azblob

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/Azure/azure-sdk-for-go/sdk/azcore"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/tenurehq/tenure"
)

// requestError is a failed request to the blob service. Its message is one
// line naming the operation, the blob and the service's error code; it never
// includes the response body, a SAS or a key. It unwraps to the SDK's
// *azcore.ResponseError, to the context's error, or to a network error
// whose URL was redacted.
type requestError struct {
	op, where string
	err       error
}

func (e *requestError) Error() string {
	return fmt.Sprintf("azblob: %s %s: %s", e.op, e.where, safeText(e.err))
}

func (e *requestError) Unwrap() error { return e.err }

// safeText renders an SDK error on one line without secrets.
func safeText(err error) string {
	var re *azcore.ResponseError
	switch {
	case errors.As(err, &re):
		code := re.ErrorCode
		if code == "" {
			code = "no error code"
		}
		return fmt.Sprintf("%s (HTTP %d)", code, re.StatusCode)
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		var ue *url.Error
		if errors.As(err, &ue) {
			return ue.Err.Error()
		}
		return err.Error()
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// The request URL may carry a SAS: keep only the cause.
		return oneLine(ue.Err.Error())
	}
	return oneLine(err.Error())
}

func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// wrap turns an SDK error into a *requestError for op on blob name. The
// chain it unwraps to never contains a request URL.
func (s *Store) wrap(op, name string, err error) error {
	if err == nil {
		return nil
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		safe := *ue
		safe.URL = tenure.Redact(ue.URL)
		err = &safe
	}
	return &requestError{op: op, where: fmt.Sprintf("%q in %s", name, s.endpoint), err: err}
}

// lostCodes are the service's answers to a lease operation or leased write
// that was made with a lease that is not (or no longer) the blob's.
var lostCodes = []bloberror.Code{
	bloberror.LeaseIDMismatchWithLeaseOperation,
	bloberror.LeaseIDMismatchWithBlobOperation,
	bloberror.LeaseIDMissing,
	bloberror.LeaseLost,
	bloberror.LeaseNotPresentWithLeaseOperation,
	bloberror.LeaseNotPresentWithBlobOperation,
	bloberror.LeaseIsBrokenAndCannotBeRenewed,
	bloberror.LeaseAlreadyBroken,
	bloberror.ConditionNotMet,
	bloberror.BlobNotFound,
	bloberror.ContainerNotFound,
}

// lost wraps err with tenure.ErrLost if the service said the lease is not
// ours, and returns the wrapped request error otherwise.
func (s *Store) lost(op, name string, err error) error {
	w := s.wrap(op, name, err)
	if bloberror.HasCode(err, lostCodes...) {
		return fmt.Errorf("%w: %w", tenure.ErrLost, w)
	}
	return w
}
