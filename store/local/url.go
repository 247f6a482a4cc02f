package local

import (
	"context"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strconv"

	"github.com/tenurehq/tenure"
)

func init() {
	tenure.Register("file", openURL)
}

// openURL opens file:///abs/dir, or DefaultDir for file:// with no path.
func openURL(_ context.Context, u *url.URL) (tenure.Store, error) {
	dir, err := dirFromURL(u)
	if err != nil {
		return nil, err
	}
	s, err := Open(dir)
	if err != nil {
		return nil, err
	}
	return s, nil
}

// dirFromURL returns the state directory a file URL names.
func dirFromURL(u *url.URL) (string, error) {
	shown := tenure.Redact(u.String())
	switch {
	case u.Opaque != "":
		return "", fmt.Errorf("%w: store URL %q has a relative path; use file:///absolute/path", tenure.ErrInvalid, shown)
	case u.Host != "" && u.Host != "localhost":
		return "", fmt.Errorf("%w: store URL %q names host %q; the local store only uses this host's files (file:///path)", tenure.ErrInvalid, shown, u.Host)
	case u.User != nil || u.RawQuery != "" || u.Fragment != "":
		return "", fmt.Errorf("%w: store URL %q has a user, query or fragment; the local store takes only a path", tenure.ErrInvalid, shown)
	case u.Path == "":
		return DefaultDir()
	case !filepath.IsAbs(u.Path):
		return "", fmt.Errorf("%w: store URL %q has a relative path; use file:///absolute/path", tenure.ErrInvalid, shown)
	}
	return filepath.Clean(u.Path), nil
}

// DefaultDir returns the per-user state directory: $XDG_STATE_HOME/tenure,
// else $HOME/.local/state/tenure, else tenure-<uid> in [os.TempDir]. It
// does not create it; [Open] does.
func DefaultDir() (string, error) {
	if d := os.Getenv("XDG_STATE_HOME"); d != "" && filepath.IsAbs(d) {
		return filepath.Join(d, "tenure"), nil
	}
	if h := os.Getenv("HOME"); h != "" && filepath.IsAbs(h) {
		return filepath.Join(h, ".local", "state", "tenure"), nil
	}
	return filepath.Join(os.TempDir(), "tenure-"+strconv.Itoa(os.Getuid())), nil
}
