package storetest

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

// SecretHidden checks that st, opened with credentials the server refuses
// (a wrong password), fails every call with an error that names the store
// (contains name, e.g. "tenure/postgres"), shows the redaction mark
// "xxxxx" where the URL's password was, and never quotes secret.
func SecretHidden(t *testing.T, st tenure.Store, secret, name string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	bogus := tenure.Lease{Key: "k", Identity: "alpha", Term: 1, TTL: time.Second, Token: "x"}
	calls := map[string]func() error{
		"Get":     func() error { _, err := st.Get(ctx, "k"); return err },
		"Acquire": func() error { _, err := st.Acquire(ctx, "k", "alpha", time.Second); return err },
		"Renew":   func() error { return st.Renew(ctx, bogus) },
		"Release": func() error { return st.Release(ctx, bogus) },
	}
	if w, ok := st.(tenure.Watcher); ok {
		calls["Watch"] = func() error { _, err := w.Watch(ctx, "k"); return err }
	}
	for call, do := range calls {
		err := do()
		switch {
		case err == nil:
			t.Errorf("%s with refused credentials succeeded", call)
		case strings.Contains(err.Error(), secret):
			t.Errorf("%s: the error quotes the secret: %v", call, err)
		case !strings.Contains(err.Error(), "xxxxx") || !strings.Contains(err.Error(), name):
			t.Errorf("%s: the error does not say which store failed (want %q and the redacted URL): %v", call, name, err)
		}
	}
}
