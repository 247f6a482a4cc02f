package storeurl

import "strings"

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
