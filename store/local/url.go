package local

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/storeurl"
)

func init() {
	tenure.Register("file", openURL)
}

// openURL opens file:///abs/dir, or DefaultDir for file:// with no path;
// the query parameter shared=group opens it with [GroupShared].
func openURL(_ context.Context, u *url.URL) (tenure.Store, error) {
	dir, opts, err := dirFromURL(u)
	if err != nil {
		return nil, err
	}
	s, err := Open(dir, opts...)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// dirFromURL returns the state directory a file URL names and the options
// its query asks for. Errors name parameters, never their values.
func dirFromURL(u *url.URL) (string, []Option, error) {
	shown := tenure.Redact(storeurl.String(u))
	switch {
	case u.Opaque != "":
		return "", nil, fmt.Errorf("%w: store URL %q has a relative path; use file:///absolute/path", tenure.ErrInvalid, shown)
	case u.Host != "" && u.Host != "localhost":
		return "", nil, fmt.Errorf("%w: store URL %q names host %q; the local store only uses this host's files (file:///path)", tenure.ErrInvalid, shown, u.Host)
	case u.User != nil || u.Fragment != "":
		return "", nil, fmt.Errorf("%w: store URL %q has a user or fragment; the local store takes only a path and ?shared=group", tenure.ErrInvalid, shown)
	}
	var opts []Option
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil {
		return "", nil, fmt.Errorf("%w: store URL %q has a malformed query; the local store takes only ?shared=group", tenure.ErrInvalid, shown)
	}
	for name, vals := range q {
		if name != "shared" {
			return "", nil, fmt.Errorf("%w: store URL %q has the unknown parameter %q; the local store takes only ?shared=group", tenure.ErrInvalid, shown, name)
		}
		if len(vals) != 1 || vals[0] != "group" {
			return "", nil, fmt.Errorf("%w: store URL %q: shared must be given once, as shared=group", tenure.ErrInvalid, shown)
		}
		opts = append(opts, GroupShared())
	}
	switch {
	case u.Path == "":
		dir, err := DefaultDir()
		return dir, opts, err
	case !filepath.IsAbs(u.Path):
		return "", nil, fmt.Errorf("%w: store URL %q has a relative path; use file:///absolute/path", tenure.ErrInvalid, shown)
	}
	return filepath.Clean(u.Path), opts, nil
}

// ErrNoDefaultDir is wrapped by the error of [DefaultDir] when the
// environment names no per-user directory.
var ErrNoDefaultDir = errors.New("local: no per-user state directory")

// DefaultDir returns the per-user state directory, the first of
// $XDG_STATE_HOME/tenure, $HOME/.local/state/tenure,
// $XDG_RUNTIME_DIR/tenure and /run/user/UID/tenure (if /run/user/UID
// exists) whose base is set and absolute. It never falls back to a shared
// directory such as /tmp, where another user could create it first; with
// none of these it returns an error wrapping [ErrNoDefaultDir] that says to
// pass --store file:///DIR. It does not create the directory; [Open] does,
// and checks it.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tenure"), nil
	}
	if h := os.Getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "tenure"), nil
	}
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tenure"), nil
	}
	run := filepath.Join(runUserDir, strconv.Itoa(os.Getuid()))
	if fi, err := os.Stat(run); err == nil && fi.IsDir() {
		return filepath.Join(run, "tenure"), nil
	}
	return "", fmt.Errorf("%w: none of XDG_STATE_HOME, HOME and XDG_RUNTIME_DIR is set to an absolute path and %s does not exist; pass --store file:///DIR with a directory you own", ErrNoDefaultDir, run)
}

// runUserDir holds the per-user runtime directories (pam_systemd); a
// variable so that tests can point it elsewhere.
var runUserDir = "/run/user"
