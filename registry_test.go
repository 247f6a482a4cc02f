package tenure_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	_ "github.com/tenurehq/tenure/store/memory"
)

func TestOpenUnknownScheme(t *testing.T) {
	_, err := tenure.Open(context.Background(), "nosuch://user:hunter2@host/x")
	if !errors.Is(err, tenure.ErrUnknownScheme) {
		t.Fatalf("got %v, want ErrUnknownScheme", err)
	}
	if strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("error leaks the password: %v", err)
	}
	if !strings.Contains(err.Error(), "memory") {
		t.Fatalf("error does not list the registered schemes: %v", err)
	}
}

func TestOpenBadURL(t *testing.T) {
	for _, u := range []string{"", "no-scheme-here", "://x", "%zz"} {
		if _, err := tenure.Open(context.Background(), u); !errors.Is(err, tenure.ErrInvalid) && !errors.Is(err, tenure.ErrUnknownScheme) {
			t.Errorf("Open(%q) = %v, want ErrInvalid", u, err)
		}
	}
}

func TestOpenMemorySharesByName(t *testing.T) {
	ctx := context.Background()
	name := "memory://shared-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	a, err := tenure.Open(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := tenure.Open(ctx, name)
	l, err := a.Acquire(ctx, "k", "a", 1e9)
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := b.Get(ctx, "k"); r.Holder != "a" || r.Term != l.Term {
		t.Fatalf("second handle sees %+v", r)
	}
}

func TestRedact(t *testing.T) {
	cases := map[string]string{
		"postgres://bob:s3cret@db:5432/x?sslmode=disable":     "s3cret",
		"redis://:pw123@127.0.0.1:6379/0":                     "pw123",
		"azblob://c/p?AccountKey=abcd%2Bef&endpoint=http://h": "abcd",
		"etcd://h:2379/p?password=zzz&user=u":                 "zzz",
	}
	for in, secret := range cases {
		out := tenure.Redact(in)
		if strings.Contains(out, secret) {
			t.Errorf("Redact(%q) = %q still contains the secret", in, out)
		}
		if !strings.Contains(out, "xxxxx") {
			t.Errorf("Redact(%q) = %q does not mark what it hid", in, out)
		}
	}
	if got := tenure.Redact("file:///var/lib/tenure"); got != "file:///var/lib/tenure" {
		t.Errorf("Redact changed a URL without secrets: %q", got)
	}
}
