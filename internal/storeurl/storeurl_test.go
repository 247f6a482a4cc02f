package storeurl

import (
	"errors"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
)

func TestServer(t *testing.T) {
	raw := "rediss://:hunter2@cache:6379/1?a=1&b=2"
	u, err := Server(raw, "redis", "rediss")
	if err != nil || u.Password != "hunter2" || u.Redacted != "rediss://:xxxxx@cache:6379/1?a=1&b=2" || u.Driver() != raw {
		t.Fatalf("Server = %+v, %v; want the password, the URL redacted, and the URL for the driver", u, err)
	}
	for raw, want := range map[string]string{
		"http://:hunter2@cache:6379":                 `is not a redis:// URL`,
		"redis:hunter2@cache":                        `has no host part (want redis://HOST...)`,
		"redis://:hunter2@cache/0?tenure_prefix=a;b": `has a query that cannot be parsed`,
		"redis://:hunter2@cache/0?tenure_prefix=%zz": `has a query that cannot be parsed`,
	} {
		_, err := Server(raw, "redis", "rediss")
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Server(%q) = %v; want ErrInvalid saying %q without the password", raw, err, want)
		}
	}
}

func TestHosts(t *testing.T) {
	u, err := Parse("etcd://a:1,b:2/x/../p", "etcd")
	if err != nil {
		t.Fatal(err)
	}
	hosts, p, err := Hosts(u, "etcd", "endpoint")
	if err != nil || !slices.Equal(hosts, []string{"a:1", "b:2"}) || p != "/p" {
		t.Fatalf("Hosts = %v, %q, %v", hosts, p, err)
	}
	if _, err := Parse("etcd://a:1/%zz", "etcd"); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "cannot be parsed") {
		t.Errorf("Parse of a bad escape = %v", err)
	}
	for raw, want := range map[string]string{
		"zk://a:1":               `must have the scheme etcd`,
		"etcd://a:1?x=y":         `query parameters are not supported`,
		"etcd://a:1?x;y":         `query parameters are not supported`,
		"etcd://u:hunter2@a,b:2": `endpoint "a" is not host:port`,
	} {
		u, _ := url.Parse(raw)
		_, _, err := Hosts(u, "etcd", "endpoint")
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Hosts(%q) = %v; want ErrInvalid saying %q without the password", raw, err, want)
		}
	}
}

func TestRefusedAndScrub(t *testing.T) {
	raw := "redis://:hunter2@cache:6379/0?tenure_prefix=p"
	u, err := Server(raw, "redis")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := u.Param("tenure_prefix", "any", func(string) bool { return true }); err != nil {
		t.Fatal(err)
	}
	cause := errors.New(`bad URL "` + u.Driver() + `" (password hunter2)`)
	err = u.Refused(cause)
	if !errors.Is(err, tenure.ErrInvalid) || !errors.Is(err, cause) || strings.Contains(err.Error(), "hunter2") ||
		!strings.Contains(err.Error(), "redis URL") {
		t.Errorf("Refused = %v; want ErrInvalid wrapping the cause, naming the store, without the password", err)
	}
	if Scrub("", cause) != cause || Scrub("absent", cause) != cause || Scrub("hunter2", nil) != nil {
		t.Error("Scrub changed an error with nothing to hide")
	}
}

func TestParam(t *testing.T) {
	yes := func(v string) bool { return v == "yes" }
	u, err := Server("redis://h/0?other=1&p=yes", "redis")
	if err != nil {
		t.Fatal(err)
	}
	if v, ok, err := u.Param("p", "want yes", yes); v != "yes" || !ok || err != nil || u.Has("p") || !u.Has("other") || u.Driver() != "redis://h/0?other=1" {
		t.Errorf("Param = %q, %v, %v, leaving %s; want yes, removed from the query", v, ok, err, u.Driver())
	}
	if v, ok, err := u.Param("p", "want yes", yes); v != "" || ok || err != nil {
		t.Errorf("Param of an absent parameter = %q, %v, %v", v, ok, err)
	}
	for _, vals := range [][]string{{"no"}, {"yes", "yes"}, {""}} {
		raw := "redis://:hunter2@h?" + url.Values{"p": vals}.Encode()
		u, err := Server(raw, "redis")
		if err != nil {
			t.Fatal(err)
		}
		_, ok, err := u.Param("p", "want yes", yes)
		want := `p="` + strings.Join(vals, ",") + `" in "` + tenure.Redact(raw) + `": want yes`
		if ok || !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Param of %q = %v, %v; want ErrInvalid saying %s", vals, ok, err, want)
		}
	}
}

func TestString(t *testing.T) {
	for raw, want := range map[string]string{
		"redis://":               "redis://",
		"redis://?db=1":          "redis://?db=1",
		"redis:?db=1":            "redis://?db=1",
		"redis://h:6379/0":       "redis://h:6379/0",
		"redis://:pw@/":          "redis://:pw@/",
		"file://":                "file://",
		"file:///var/lib/tenure": "file:///var/lib/tenure",
		"peer://?peers=a=h:1":    "peer://?peers=a=h:1",
	} {
		u, err := url.Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		if got := String(u); got != want {
			t.Errorf("String(%q) = %q, want %q", raw, got, want)
		}
	}
}
