package main

import (
	"net/url"

	"github.com/tenurehq/tenure/store/local"
)

// The local store, file:///dir: the default store of every subcommand.

// defaultStoreURL names the local store in its default directory. It fails,
// saying to pass --store file:///DIR, when the environment names no
// per-user directory: there is no fallback to a shared one like /tmp.
func defaultStoreURL() (string, error) {
	dir, err := local.DefaultDir()
	if err != nil {
		return "", err
	}
	// Escaped, so that a '?' or '%' in the path is not read as a query.
	return (&url.URL{Scheme: "file", Path: dir}).String(), nil
}

// defaultDirForHelp is the default directory, for the help text.
func defaultDirForHelp() string {
	dir, err := local.DefaultDir()
	if err != nil {
		return "(none: " + err.Error() + ")"
	}
	return dir
}
