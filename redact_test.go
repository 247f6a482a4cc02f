package tenure

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

// mark is the secret every case hides; no output may contain it.
const mark = "s3cr3tMARK"

// secretForms are store URLs and connection strings with mark in a secret
// position, each the way a user could plausibly write it.
var secretForms = []string{
	"postgres://app:s3cr3tMARK@db:5432/app?sslmode=disable",
	"postgres://app@db/app?password=s3cr3tMARK",
	"postgres://app@db/app?sslpassword=s3cr3tMARK&sslmode=verify-full",
	"postgresql://app@db/app?PassWord=s3cr3tMARK",
	"postgres://app@db/app?pass%77ord=s3cr3tMARK",
	"postgres://app:@db/app#password=s3cr3tMARK",
	"host=db user=app password=s3cr3tMARK dbname=app",
	"host=db user=app password = 's3cr3tMARK with spaces' dbname=app",
	"host=db:5432 user=app sslpassword=s3cr3tMARK",
	"user=app password='it\\'s s3cr3tMARK'",
	"password=s3cr3tMARK",
	"redis://s3cr3tMARK@cache:6379/0",
	"redis://:s3cr3tMARK@cache:6379/0",
	"redis://s3cr3tMARK:@cache:6379/0",
	"redis://default:s3cr3tMARK@cache:6379/0",
	"rediss://s3cr3tMARK@cache:6380",
	"redis:s3cr3tMARK@cache",
	"s3cr3tMARK@cache:6379",
	"//s3cr3tMARK@cache:6379",
	"//user:s3cr3tMARK@cache/x?password=s3cr3tMARK",
	"etcd://root:s3cr3tMARK@127.0.0.1:2379/p",
	"etcd://h:2379/p?token=s3cr3tMARK",
	"zk://u:s3cr3tMARK@h:2181/x",
	"azblob://acct:s3cr3tMARK@container/prefix",
	"azblob://container?sv=2024&sig=s3cr3tMARK&se=2030",
	"azblob://container?AccountKey=s3cr3tMARK",
	"azblob://c?endpoint=https%3A%2F%2Fa.blob.core.windows.net%2F%3Fsv%3D1%26sig%3Ds3cr3tMARK",
	"azblob://c?endpoint=http://u:s3cr3tMARK@h:10000/a",
	"AccountName=a;AccountKey=s3cr3tMARK;BlobEndpoint=http://h",
	"DefaultEndpointsProtocol=https;AccountName=a;SharedAccessSignature=sv=1&sig=s3cr3tMARK",
	"peer://?id=1&peers=1=h:1&secret=s3cr3tMARK",
	"nope://h/x?api_key=s3cr3tMARK&auth_token=s3cr3tMARK",
	"nope://h/x?client_secret=s3cr3tMARK",
	"redis://:s3cr3tMARK@cache:port",
	"postgres://u:s3cr3tMARK@[::1",
	"postgres://u:s3cr3tMARK@h/%zz",
	"redis://u:s3cr3tMARK@host name/",
	"redis://s3cr3tMARK@h/\x01",
}

// TestRedactHidesEverySecretForm fails on the Redact that knew only
// passwords and query parameters: a libpq keyword string, a token in the
// user position and an opaque URL came back whole.
func TestRedactHidesEverySecretForm(t *testing.T) {
	for _, in := range secretForms {
		out := Redact(in)
		if strings.Contains(out, mark) {
			t.Errorf("Redact(%q) = %q: the secret is still there", in, out)
		}
		if !strings.Contains(out, redactMark) && out != unparseable {
			t.Errorf("Redact(%q) = %q: does not mark what it hid", in, out)
		}
	}
}

// TestRedactKeepsTheRest: what is not a secret stays readable.
func TestRedactKeepsTheRest(t *testing.T) {
	for in, want := range map[string]string{
		"file:///var/lib/tenure": "file:///var/lib/tenure",
		"memory://x":             "memory://x",
		"postgres://app:pw@db:5432/app?sslmode=disable":    "postgres://app:xxxxx@db:5432/app?sslmode=disable",
		"postgres://app@db/app":                            "postgres://app@db/app",
		"redis://TOKEN@cache:6379/0":                       "redis://xxxxx@cache:6379/0",
		"redis://default:pw@cache:6379/0?tenure_prefix=a":  "redis://default:xxxxx@cache:6379/0?tenure_prefix=a",
		"host=db user=app password=hunter2 dbname=app":     "host=db user=app password=xxxxx dbname=app",
		"azblob://c/p?sv=2024&sig=abc&se=2030":             "azblob://c/p?sv=2024&sig=xxxxx&se=2030",
		"AccountName=a;AccountKey=k;BlobEndpoint=http://h": "AccountName=a;AccountKey=xxxxx;BlobEndpoint=http://h",
		"peer://?id=1&peers=1=h:1,2=h:2":                   "peer://?id=1&peers=1=h:1,2=h:2",
		"file:relative":                                    "file:relative",
		"no-scheme-here":                                   "no-scheme-here",
		"":                                                 "",
	} {
		if got := Redact(in); got != want {
			t.Errorf("Redact(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestOpenNeverEchoesUnparsedInput fails on the Open that quoted a string
// with no scheme whole ("host=db ... password=hunter2 ...") and quoted
// url.Parse's message, which can hold the password ("invalid port").
func TestOpenNeverEchoesUnparsedInput(t *testing.T) {
	for _, in := range secretForms {
		_, err := Open(context.Background(), in)
		if err == nil {
			continue // a registered scheme; not in this package's tests
		}
		if strings.Contains(err.Error(), mark) {
			t.Errorf("Open(%q): %v", in, err)
		}
		if !errors.Is(err, ErrInvalid) && !errors.Is(err, ErrUnknownScheme) {
			t.Errorf("Open(%q) = %v, want ErrInvalid or ErrUnknownScheme", in, err)
		}
	}
	_, err := Open(context.Background(), "host=db user=app password=hunter2 dbname=app")
	if err == nil || !strings.Contains(err.Error(), "keyword=value") {
		t.Errorf("a libpq keyword string: %v, want an error that says what it is", err)
	}
	_, err = Open(context.Background(), "redis://:hunter2@cache:port")
	if err == nil || !strings.Contains(err.Error(), "invalid port") || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("a bad port: %v, want the problem named without the input", err)
	}
}

// TestOpenScrubsOpenerErrors: an opener that quotes the URL it was given
// cannot leak its secrets through Open.
func TestOpenScrubsOpenerErrors(t *testing.T) {
	registerOnce(t, "leaky-test", func(_ context.Context, u *url.URL) (Store, error) {
		return nil, fmt.Errorf("%w: cannot use %s (user %s)", ErrInvalid, u.String(), u.User.Username())
	})
	for _, in := range []string{
		"leaky-test://user:s3cr3tMARK@h/x",
		"leaky-test://s3cr3tMARK@h/x",
		"leaky-test://h/x?token=s3cr3tMARK&a=b",
	} {
		_, err := Open(context.Background(), in)
		if err == nil || strings.Contains(err.Error(), mark) || !errors.Is(err, ErrInvalid) {
			t.Errorf("Open(%q) = %v: want ErrInvalid without the secret", in, err)
		}
	}
}

// FuzzRedact builds URLs and keyword lists with a secret in every secret
// position, from fuzzed parts that cannot move it elsewhere, and checks
// that neither Redact nor Open ever returns it, and that Redact never
// panics on anything.
func FuzzRedact(f *testing.F) {
	for _, s := range secretForms {
		f.Add(s, "redis", "app", "db:5432", "path", "sslmode=disable", uint8(0))
	}
	f.Add("", "postgres", "", "", "", "", uint8(1))
	f.Add("x", "", "u", "h", "", "a=b&c=d", uint8(5))
	f.Add("%zz", "azblob", "acct", "container", "p/q", "sv=1&se=2", uint8(7))
	f.Fuzz(func(t *testing.T, raw, scheme, user, host, path, query string, form uint8) {
		// Any input: no panic, and Open's errors quote nothing Redact would
		// hide.
		red := Redact(raw)
		if _, err := Open(context.Background(), raw); err != nil {
			for _, s := range secretsOf(raw) {
				if len(s) >= 8 && strings.Contains(err.Error(), s) && !strings.Contains(red, s) {
					t.Fatalf("Open(%q): %v quotes %q, which Redact hides", raw, err, s)
				}
			}
		}
		// Built inputs: mark in a secret position.
		clean := func(s string) string {
			return strings.Map(func(r rune) rune {
				if strings.ContainsRune(":/@?#&=;%'\"\\ ,", r) || r < 0x20 || r == 0x7f || r > 0x7e {
					return -1
				}
				return r
			}, s)
		}
		scheme, user, host, path = clean(scheme), clean(user), clean(host), clean(path)
		if scheme != "" && !isScheme(scheme) {
			scheme = "x"
		}
		sp := ""
		if scheme != "" {
			sp = scheme + "://"
		}
		q := ""
		if query != "" {
			q = "&" + clean(strings.ReplaceAll(query, "&", "_")) + "=v"
		}
		var in string
		switch form % 8 {
		case 0:
			in = sp + user + ":" + mark + "@" + host + "/" + path
		case 1:
			in = sp + host + "/" + path + "?x=1&password=" + mark + q
		case 2:
			in = "redis://" + mark + "@" + host + "/" + path
		case 3:
			in = "host=" + host + " user=" + user + " password=" + mark + " dbname=" + path
		case 4:
			in = sp + host + "/" + path + "?sv=1&sig=" + mark + q
		case 5:
			in = "AccountName=" + user + ";AccountKey=" + mark + ";BlobEndpoint=http://" + host
		case 6:
			in = sp + host + "/" + path + "?token=" + mark + q + "#" + path
		case 7:
			in = "host=" + host + " password='" + mark + " " + path + "' user=" + user
		}
		if out := Redact(in); strings.Contains(out, mark) {
			t.Fatalf("Redact(%q) = %q", in, out)
		}
		if _, err := Open(context.Background(), in); err != nil && strings.Contains(err.Error(), mark) {
			t.Fatalf("Open(%q): %v", in, err)
		}
	})
}

func TestRedactError(t *testing.T) {
	base := fmt.Errorf("%w: cannot parse `postgres://u@h/db?sslpassword=s3cr3tMARK&token=s3cr3t%%21MARK`", ErrInvalid)
	err := RedactError(base, "postgres://u@h/db?sslpassword=s3cr3tMARK&token=s3cr3t%21MARK")
	if strings.Contains(err.Error(), "s3cr3t") || !errors.Is(err, ErrInvalid) {
		t.Errorf("RedactError = %v", err)
	}
	if RedactError(nil, "x://u:pw@h") != nil || RedactError(base, "file:///x") != base {
		t.Error("RedactError changed what had nothing to hide")
	}
}

// registerOnce registers open under scheme for t and unregisters it when
// t ends, so that the test can run again in the same process (-count).
func registerOnce(t *testing.T, scheme string, open Opener) {
	t.Helper()
	Register(scheme, open)
	t.Cleanup(func() {
		registryMu.Lock()
		defer registryMu.Unlock()
		delete(registry, scheme)
	})
}

// TestRedactErrorHidesOnlyCredentials: a secret is hidden where a message
// quotes it as a credential (a URL's password or token, the value of a
// parameter whose name looks secret), and nowhere else. Hiding every
// occurrence of a password such as "postgres" turned "tenure/postgres:
// ... on postgres://postgres:xxxxx@db" into "tenure/xxxxx: ... on
// xxxxx://xxxxx:xxxxx@db", which tells the reader the password, and a
// password "b" turned "table" into "taxxxxxle".
func TestRedactErrorHidesOnlyCredentials(t *testing.T) {
	for _, tc := range []struct{ raw, msg, want string }{
		{"postgres://postgres:postgres@db/app",
			"tenure/postgres: get on postgres://postgres:xxxxx@db/app: failed to connect to `user=postgres database=app`: refused",
			""},
		{"postgres://postgres:postgres@db/app",
			"cannot parse `postgres://postgres:postgres@db/app`: bad",
			"cannot parse `postgres://postgres:xxxxx@db/app`: bad"},
		{"postgres://u:b@db/app",
			"creating table on postgres://u:xxxxx@db/app: failed to connect to `user=u database=app`: refused",
			""},
		{"postgres://postgres:postgres@db/app",
			"connect: host=db user=postgres password=postgres dbname=app",
			"connect: host=db user=postgres password=xxxxx dbname=app"},
		{"postgres://u:b@db/app",
			`auth {"Password": "b", "user": "u"} (password b) PASSWD:'b' b`,
			`auth {"Password": "xxxxx", "user": "u"} (password xxxxx) PASSWD:'xxxxx' b`},
		{"redis://:redis@cache:6379/0",
			"tenure/redis: dial redis://:redis@cache:6379/0: refused",
			"tenure/redis: dial redis://:xxxxx@cache:6379/0: refused"},
		// A token in the user position is hidden wherever it stands.
		{"redis://t0k3n@cache:6379/0",
			"dial redis://t0k3n@cache:6379/0 as user t0k3n",
			"dial redis://xxxxx@cache:6379/0 as user xxxxx"},
		{"postgres://u:p%40ss@db/app",
			"bad URL postgres://u:p%40ss@db/app; password=p@ss; token=p%40ss",
			"bad URL postgres://u:xxxxx@db/app; password=xxxxx; token=xxxxx"},
		{"azblob://c?sig=abc&sv=1",
			"GET https://a.blob/c?sv=1&sig=abc: 403 (abc)",
			"GET https://a.blob/c?sv=1&sig=xxxxx: 403 (abc)"},
		{"zk://u:b@h:2181/x", "auth with digest u:b: failed (b)", "auth with digest u:xxxxx: failed (b)"},
		// A value that merely begins with the secret is another value.
		{"postgres://u:b@db/app", "password=bad", ""},
	} {
		base := errors.New(tc.msg)
		want := tc.want
		if want == "" {
			want = tc.msg
		}
		if got := RedactError(base, tc.raw).Error(); got != want {
			t.Errorf("RedactError(%q, %s)\n = %q\nwant %q", tc.msg, Redact(tc.raw), got, want)
		}
	}
}
