package azblob

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"

	"github.com/tenurehq/tenure"
)

func TestBlobName(t *testing.T) {
	cases := map[string]string{
		"job":       "job",
		"a/b":       "a~2Fb",
		"..":        "~2E~2E",
		"~":         "~7E",
		"x y":       "x~20y",
		"é":         "~C3~A9",
		"Mixed-Ca_": "Mixed-Ca_",
	}
	for key, want := range cases {
		if got := blobName("", key); got != want {
			t.Errorf("blobName(%q) = %q, want %q", key, got, want)
		}
	}
	if got := blobName("app/leases", "k"); got != "app/leases/k" {
		t.Errorf("with a prefix: %q", got)
	}
	// One-to-one on keys that escape differently.
	seen := map[string]string{}
	for _, k := range []string{"a~2Fb", "a/b", "a%2Fb", "a~7E2Fb", "A/B", "a//b"} {
		n := blobName("", k)
		if other, dup := seen[n]; dup {
			t.Errorf("keys %q and %q share blob %q", k, other, n)
		}
		seen[n] = k
	}
	if n := blobName(strings.Repeat("p", 255), strings.Repeat("\xff", tenure.MaxKeyLen)); len(n) > 1024 {
		t.Errorf("longest name is %d bytes, over Azure's 1024", len(n))
	}
}

func TestCheckContainer(t *testing.T) {
	for _, ok := range []string{"abc", "a-b-c", "leases", "x12", strings.Repeat("a", 63)} {
		if err := checkContainer(ok); err != nil {
			t.Errorf("%q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "ab", "ABC", "a--b", "-ab", "ab-", "a_b", "a.b", strings.Repeat("a", 64)} {
		if err := checkContainer(bad); !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%q: got %v, want ErrInvalid", bad, err)
		}
	}
}

const testKey = "c2VjcmV0LWtleS1mb3ItdGVzdHM=" // base64 "secret-key-for-tests"

func env(vars map[string]string) func(string) string { return func(k string) string { return vars[k] } }

func mustParse(t *testing.T, raw string) *url.URL {
	t.Helper()
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestOptionsFromURL(t *testing.T) {
	cs := "DefaultEndpointsProtocol=http;AccountName=acct;AccountKey=" + testKey + ";BlobEndpoint=http://127.0.0.1:10000/acct;"
	cases := []struct {
		name, url string
		env       map[string]string
		want      Options
	}{
		{"connection string", "azblob://leases/app", map[string]string{EnvConnectionString: cs},
			Options{ServiceURL: "http://127.0.0.1:10000/acct", Container: "leases", Prefix: "app", AccountName: "acct", AccountKey: testKey}},
		{"endpoint overrides the connection string", "azblob://leases?endpoint=http://h:1/acct", map[string]string{EnvConnectionString: cs},
			Options{ServiceURL: "http://h:1/acct", Container: "leases", AccountName: "acct", AccountKey: testKey}},
		{"account and key", "azblob://leases/a/b/", map[string]string{EnvAccount: "acct", EnvKey: testKey},
			Options{ServiceURL: "https://acct.blob.core.windows.net/", Container: "leases", Prefix: "a/b", AccountName: "acct", AccountKey: testKey}},
		{"account in URL, SAS", "azblob://acct@leases?poll=1s&retries=0&try_timeout=3s", map[string]string{EnvSAS: "?sv=1&sig=abc"},
			Options{ServiceURL: "https://acct.blob.core.windows.net/", Container: "leases", AccountName: "acct", SAS: "sv=1&sig=abc",
				PollInterval: 1e9, MaxRetries: -1, TryTimeout: 3e9}},
		{"key in URL wins", "azblob://acct:" + url.QueryEscape(testKey) + "@leases", map[string]string{EnvConnectionString: "AccountName=other;AccountKey=eA=="},
			Options{ServiceURL: "https://acct.blob.core.windows.net/", Container: "leases", AccountName: "acct", AccountKey: testKey}},
	}
	for _, c := range cases {
		got, err := optionsFromURL(mustParse(t, c.url), env(c.env))
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		if got != c.want {
			t.Errorf("%s:\n got %+v\nwant %+v", c.name, got, c.want)
		}
	}
}

func TestOptionsFromURLErrors(t *testing.T) {
	cs := "AccountName=acct;AccountKey=" + testKey
	cases := []struct {
		name, url string
		env       map[string]string
	}{
		{"no credentials", "azblob://leases", nil},
		{"no account", "azblob://leases", map[string]string{EnvKey: testKey}},
		{"unknown parameter", "azblob://leases?pol=1s", map[string]string{EnvConnectionString: cs}},
		{"bad poll", "azblob://leases?poll=1ms", map[string]string{EnvConnectionString: cs}},
		{"repeated parameter", "azblob://leases?poll=1s&poll=2s", map[string]string{EnvConnectionString: cs}},
		{"bad retries", "azblob://leases?retries=-1", map[string]string{EnvConnectionString: cs}},
		{"bad connection string", "azblob://leases", map[string]string{EnvConnectionString: "AccountKey=" + testKey}},
		{"connection string without '='", "azblob://leases", map[string]string{EnvConnectionString: "AccountName=a;" + testKey}},
		{"account mismatch", "azblob://other@leases", map[string]string{EnvConnectionString: cs}},
		{"opaque", "azblob:leases", map[string]string{EnvConnectionString: cs}},
	}
	for _, c := range cases {
		_, err := optionsFromURL(mustParse(t, c.url), env(c.env))
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", c.name, err)
			continue
		}
		if strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: error %q contains the key", c.name, err)
		}
	}
}

func TestNewRejects(t *testing.T) {
	base := Options{ServiceURL: "http://127.0.0.1:1/acct", Container: "leases", AccountName: "acct", AccountKey: testKey}
	cases := map[string]func(*Options){
		"bad container":       func(o *Options) { o.Container = "Leases" },
		"dot prefix":          func(o *Options) { o.Prefix = "a/../b" },
		"long prefix":         func(o *Options) { o.Prefix = strings.Repeat("p", 256) },
		"service URL query":   func(o *Options) { o.ServiceURL += "?sig=" + testKey },
		"not http":            func(o *Options) { o.ServiceURL = "ftp://h/acct" },
		"key not base64":      func(o *Options) { o.AccountKey = "not base64!" + testKey },
		"no credentials":      func(o *Options) { o.AccountKey = "" },
		"key without account": func(o *Options) { o.AccountName = "" },
	}
	for name, mod := range cases {
		o := base
		mod(&o)
		_, err := New(t.Context(), o)
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%s: got %v, want ErrInvalid", name, err)
		} else if strings.Contains(err.Error(), testKey) {
			t.Errorf("%s: error %q contains the key", name, err)
		}
	}
	s, err := New(t.Context(), base)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context(), "k"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	if _, err := s.Watch(t.Context(), "k"); !errors.Is(err, tenure.ErrClosed) {
		t.Fatalf("Watch after Close: %v", err)
	}
}

// A tenurettl set with the Azure SDK to more seconds than a Duration
// holds is refused like any unreadable TTL, not read as an overflowed
// (negative or tiny) one, which would shorten the Wait after a broken
// lease.
func TestStateOfRefusesOverflowingTTL(t *testing.T) {
	for _, v := range []string{"9223372037", "99999999999", "-1"} {
		_, err := stateOf(blob.GetPropertiesResponse{Metadata: map[string]*string{metaTTL: &v}})
		if err == nil {
			t.Errorf("stateOf with %s=%s: no error", metaTTL, v)
		}
	}
	ok := "60"
	if st, err := stateOf(blob.GetPropertiesResponse{Metadata: map[string]*string{metaTTL: &ok}}); err != nil || st.ttl != time.Minute {
		t.Errorf("stateOf with %s=60 = %+v, %v", metaTTL, st, err)
	}
}
