package local

import (
	"net/url"
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// FuzzDirFromURL: resolving a file URL to a directory never panics, and
// with a secret planted in any secret position its error never contains
// it. (It only computes a path; nothing is created.)
func FuzzDirFromURL(f *testing.F) {
	f.Add("file:relative", uint8(0), "file", "u", "localhost", "x", "")
	f.Add("file://otherhost/x", uint8(3), "file", "", "h", "", "a=b")
	storetest.FuzzOpen(f, "file:///var/lib/tenure", []string{"file", ""}, func(raw string) ([]string, error) {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, nil // not a URL: nothing to resolve
		}
		_, _, err = dirFromURL(u)
		return nil, err
	})
}
