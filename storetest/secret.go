package storetest

import (
	"context"
	"net/url"
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
		"Watch":   func() error { _, err := st.Watch(ctx, "k"); return err },
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

// SecretHiddenURL opens rawURL, a URL whose credentials the server
// refuses, with [tenure.Open] (so the store's package must be imported, for
// its URL scheme), which must succeed since it is to connect nothing, then
// checks the store with [SecretHidden] and closes it.
func SecretHiddenURL(t *testing.T, rawURL, secret, name string) {
	t.Helper()
	st, err := tenure.Open(t.Context(), rawURL)
	if err != nil {
		t.Fatalf("Open connects nothing, yet failed: %v", err)
	}
	defer st.Close()
	SecretHidden(t, st, secret, name)
}

// SecretMark is the secret the fuzzers plant in store URLs: no error,
// log or output may ever contain it.
const SecretMark = "s3cr3tMARK"

// SecretForms is how many secret positions [SecretURL] knows.
const SecretForms = 12

// SecretURL builds a store URL (or a connection string) with [SecretMark]
// in the secret position form selects (modulo [SecretForms]): a password,
// a token in the user position, a password, token, sig, accountkey or
// sslpassword query parameter, a fragment, a libpq keyword string (plain
// or quoted), an Azure connection string. scheme, user, host, path and
// extra (more name=value parameters) are fuzzed parts; the characters that
// could move the mark out of its secret position are dropped from them, so
// any leak of the mark is a real one. An empty scheme gives a URL without
// one; an invalid scheme is replaced by "x".
func SecretURL(form uint8, scheme, user, host, path, extra string) string {
	scheme, user, host, path = clean(scheme, ""), clean(user, ""), clean(host, ":[]"), clean(path, "/")
	extra = clean(extra, "=&")
	if scheme != "" && !validScheme(scheme) {
		scheme = "x"
	}
	sp := ""
	if scheme != "" {
		sp = scheme + "://"
	}
	q := ""
	if extra != "" {
		q = "&" + extra
	}
	const m = SecretMark
	switch form % SecretForms {
	case 0:
		return sp + user + ":" + m + "@" + host + "/" + path + "?" + extra
	case 1:
		switch strings.ToLower(scheme) {
		case "postgres", "postgresql", "etcd", "zk", "azblob":
			// Their user is an account name, never a secret: a token in
			// the user position is a Redis habit.
			sp = "redis://"
		}
		return sp + m + "@" + host + "/" + path
	case 2:
		return sp + user + "@" + host + "/" + path + "?x=1&password=" + m + q
	case 3:
		return sp + host + "/" + path + "?token=" + m + q
	case 4:
		return sp + host + "/" + path + "?sv=1&sig=" + m + q
	case 5:
		return sp + host + "/" + path + "?AccountKey=" + m + q
	case 6:
		return sp + user + "@" + host + "/" + path + "?sslmode=verify-full&sslpassword=" + m + q
	case 7:
		return sp + user + ":@" + host + "/" + path + "#password=" + m
	case 8:
		return "host=" + host + " user=" + user + " password=" + m + " dbname=" + path + " " + strings.ReplaceAll(extra, "&", " ")
	case 9:
		return "host=" + host + " password='" + m + " x\\' y' user=" + user
	case 10:
		return "AccountName=" + user + ";AccountKey=" + m + ";BlobEndpoint=http://" + host
	default:
		return sp + ":" + m + "@" + host + "/" + path + "?" + extra
	}
}

// SecretSeed is one seed for a fuzzer built on [SecretURL]: its arguments.
type SecretSeed struct {
	Form                            uint8
	Scheme, User, Host, Path, Extra string
}

// SecretSeeds returns one seed per form, for each scheme given.
func SecretSeeds(schemes ...string) []SecretSeed {
	var seeds []SecretSeed
	for _, s := range schemes {
		for form := range uint8(SecretForms) {
			seeds = append(seeds, SecretSeed{form, s, "app", "127.0.0.1:1", "db/x", "sslmode=disable&a=b"})
		}
	}
	return seeds
}

// clean drops from s what could move a secret out of its position: URL
// delimiters other than keep, quotes, spaces, escapes, non-ASCII.
func clean(s, keep string) string {
	return strings.Map(func(r rune) rune {
		if strings.ContainsRune(keep, r) {
			return r
		}
		if r <= 0x20 || r >= 0x7f || strings.ContainsRune(":/@?#&=;%'\"\\,[]", r) {
			return -1
		}
		return r
	}, s)
}

// validScheme reports whether url.Parse takes s as a URL's scheme: a
// letter, then letters, digits, + - and '.'.
func validScheme(s string) bool {
	u, err := url.Parse(s + "://h")
	return err == nil && strings.EqualFold(u.Scheme, s)
}

// NoSecret fails t if any of texts contains [SecretMark]; what names the
// input that produced them.
func NoSecret(t testing.TB, what string, texts ...string) {
	t.Helper()
	for _, s := range texts {
		if strings.Contains(s, SecretMark) {
			t.Fatalf("%s: the secret is printed: %q", what, s)
		}
	}
}

// FuzzOpen is the body of a store's URL fuzzer. example is a valid URL of
// the store, and schemes the schemes to plant secrets under (see
// [SecretSeeds]). open opens raw without contacting any server, closes
// whatever it opened, and returns its error and any text the store would
// print of itself (its redacted description, say). For every input open
// must not panic, and for a URL with a secret planted by [SecretURL] no
// text it returns may contain the secret. Add store-specific seeds with
// f.Add before calling FuzzOpen; it calls f.Fuzz.
func FuzzOpen(f *testing.F, example string, schemes []string, open func(raw string) (texts []string, err error)) {
	for _, s := range SecretSeeds(schemes...) {
		f.Add(example, s.Form, s.Scheme, s.User, s.Host, s.Path, s.Extra)
	}
	f.Fuzz(func(t *testing.T, raw string, form uint8, scheme, user, host, path, extra string) {
		_, _ = open(raw)
		in := SecretURL(form, scheme, user, host, path, extra)
		texts, err := open(in)
		if err != nil {
			texts = append(texts, err.Error())
		}
		NoSecret(t, in, texts...)
	})
}

// HeldFailsHiding checks, on st opened with credentials (secrets among
// them), that a held key's refusal quotes none of secrets: it acquires the
// key "k", acquires it again as another identity, which must fail without
// quoting any of secrets, then releases the first grant.
func HeldFailsHiding(t testing.TB, st tenure.Store, secrets ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := st.Acquire(ctx, "k", "alpha", 5*time.Second)
	if err != nil {
		t.Fatalf("Acquire with credentials: %v", err)
	}
	_, err = st.Acquire(ctx, "k", "beta", time.Second)
	FailsHiding(t, "Acquire of a held key", err, secrets...)
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
}

// FailsHiding checks that err, the error of what (say "Open with a wrong
// password"), is not nil and contains none of secrets.
func FailsHiding(t testing.TB, what string, err error, secrets ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	for _, s := range secrets {
		if strings.Contains(err.Error(), s) {
			t.Fatalf("%s: error quotes the password: %s", what, err)
		}
	}
}

// OpenOffline adapts a store's Open function for [FuzzOpen]: it calls open
// with a cancelled context, so that nothing may dial, closes the store
// open returns, and returns what describe says of it (nil describe: no
// text) with open's error.
func OpenOffline[S tenure.Store](open func(context.Context, string) (S, error), describe func(S) []string) func(raw string) ([]string, error) {
	return func(raw string) ([]string, error) {
		ctx, cancel := context.WithCancel(context.Background())
		cancel() // nothing may dial
		st, err := open(ctx, raw)
		if err != nil {
			return nil, err
		}
		defer st.Close()
		if describe == nil {
			return nil, nil
		}
		return describe(st), nil
	}
}
