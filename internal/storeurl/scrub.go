package storeurl

import (
	"context"
	"errors"
	"fmt"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
)

// Scrub hides password in err's message where a driver quoted it as a
// credential ([tenure.RedactSecret]). The error it returns unwraps to err,
// so errors.Is still finds sentinels and context errors; err itself is
// returned when it has nothing to hide.
func Scrub(password string, err error) error { return tenure.RedactSecret(err, password) }

// Fail is the error of a call op that failed with err in the store called
// name (as "tenure/postgres") on the server where (its URL, redacted). It
// names the three, hides password, and when ctx is done, or past its
// deadline ([ctxerr.Err]), matches ctx's error too, whatever the driver
// returned. The store checks first whether it was closed meanwhile.
func Fail(ctx context.Context, name, where, password, op string, err error) error {
	if cerr := ctxerr.Err(ctx); cerr != nil && !errors.Is(err, cerr) {
		err = fmt.Errorf("%w (%w)", cerr, err)
	}
	return Scrub(password, fmt.Errorf("%s: %s on %s: %w", name, op, where, err))
}
