package main

import "github.com/tenurehq/tenure/store/local"

// The local store, file:///dir: the default store of every subcommand.

// defaultStoreURL names the local store in its default directory.
func defaultStoreURL() (string, error) {
	dir, err := local.DefaultDir()
	if err != nil {
		return "", err
	}
	return "file://" + dir, nil
}

// defaultDirForHelp is the default directory, for the help text.
func defaultDirForHelp() string {
	dir, err := local.DefaultDir()
	if err != nil {
		return "(none: " + err.Error() + ")"
	}
	return dir
}
