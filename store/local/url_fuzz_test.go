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
	for _, s := range storetest.SecretSeeds("file", "") {
		f.Add("file:///var/lib/tenure", s.Form, s.Scheme, s.User, s.Host, s.Path, s.Extra)
	}
	f.Add("file:relative", uint8(0), "file", "u", "localhost", "x", "")
	f.Add("file://otherhost/x", uint8(3), "file", "", "h", "", "a=b")
	f.Fuzz(func(t *testing.T, raw string, form uint8, scheme, user, host, path, extra string) {
		if u, err := url.Parse(raw); err == nil {
			_, _, _ = dirFromURL(u)
		}
		in := storetest.SecretURL(form, scheme, user, host, path, extra)
		u, err := url.Parse(in)
		if err != nil {
			return
		}
		if _, _, err := dirFromURL(u); err != nil {
			storetest.NoSecret(t, in, err.Error())
		}
	})
}
