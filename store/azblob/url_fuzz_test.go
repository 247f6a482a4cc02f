package azblob

import (
	"context"
	"net/url"
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// FuzzOptionsFromURL: parsing an azblob URL and the credentials in the
// environment never panics, and with a secret planted in any secret
// position of the URL or of the connection string in the environment, no
// error (of the parse or of New, which connects nothing) contains it.
func FuzzOptionsFromURL(f *testing.F) {
	for _, s := range storetest.SecretSeeds("azblob", "") {
		f.Add("azblob://acct:pw@container/prefix?endpoint=http://127.0.0.1:1/acct&poll=1s", s.Form, s.Scheme, s.User, s.Host, s.Path, s.Extra)
	}
	f.Add("azblob://c?retries=11&try_timeout=-1s&poll=1ms", uint8(10), "azblob", "acct", "h", "", "")
	f.Add("azblob://c?endpoint=http%3A%2F%2Fh%2F%3Fsig%3Dx", uint8(4), "azblob", "", "c", "p", "sv=1")
	f.Add("azblob:opaque", uint8(5), "azblob", "", "c", "", "endpoint=ftp")
	f.Fuzz(func(t *testing.T, raw string, form uint8, scheme, user, host, path, extra string) {
		in := storetest.SecretURL(form, scheme, user, host, path, extra)
		env := map[string]string{}
		getenv := func(k string) string { return env[k] }
		try := func(raw string, check bool) {
			u, err := url.Parse(raw)
			if err != nil {
				return
			}
			o, err := optionsFromURL(u, getenv)
			if err == nil {
				var s *Store
				if s, err = New(context.Background(), o); err == nil {
					if check {
						storetest.NoSecret(t, raw, s.endpoint)
					}
					s.Close()
				}
			}
			if err != nil && check {
				storetest.NoSecret(t, raw, err.Error())
			}
		}
		try(raw, false)
		try(in, true)
		// The same secret forms as the connection string in the
		// environment, with a plain URL.
		env[EnvConnectionString] = in
		try("azblob://container/p", true)
		env[EnvConnectionString] = ""
		env[EnvSAS] = in
		env[EnvAccount] = "acct"
		try("azblob://container/p", true)
		if _, err := parseConnString(in); err != nil {
			storetest.NoSecret(t, in, err.Error())
		}
	})
}
