package storeurl

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/tenurehq/tenure"
)

// Refused returns err, a driver's refusal of u (rawURL, the store's own
// parameters removed), as an error that wraps [tenure.ErrInvalid], names
// the store and quotes neither URL unredacted nor password.
func Refused(name, rawURL string, u *url.URL, password string, err error) error {
	err = tenure.RedactError(tenure.RedactError(err, rawURL), u.String())
	return Scrub(password, fmt.Errorf("%w: %s URL %q: %w", tenure.ErrInvalid, name, tenure.Redact(rawURL), err))
}

// Scrub hides password in err's message, in case a driver quoted it. The
// error it returns unwraps to err, so errors.Is still finds sentinels and
// context errors; err itself is returned when it has nothing to hide.
func Scrub(password string, err error) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), password, "xxxxx"), err: err}
}

// scrubbed is an error whose message had a password removed.
type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }
func (e *scrubbed) Unwrap() error { return e.err }
