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
	u, pw, err := Server("rediss://:hunter2@cache:6379/1", "redis", "rediss")
	if err != nil || u.Host != "cache:6379" || pw != "hunter2" {
		t.Fatalf("Server = %v, %q, %v", u, pw, err)
	}
	for raw, want := range map[string]string{
		"http://:hunter2@cache:6379": `is not a redis:// URL`,
		"redis:hunter2@cache":        `has no host part (want redis://HOST...)`,
	} {
		_, _, err := Server(raw, "redis", "rediss")
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
	u, pw, err := Server(raw, "redis")
	if err != nil {
		t.Fatal(err)
	}
	u.RawQuery = ""
	cause := errors.New(`bad URL "` + u.String() + `" (password hunter2)`)
	err = Refused("redis", raw, u, pw, cause)
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
	q := url.Values{"p": {"yes"}, "other": {"1"}}
	if v, ok, err := Param(q, "p", "redis://h", "want yes", yes); v != "yes" || !ok || err != nil || q.Has("p") || !q.Has("other") {
		t.Errorf("Param = %q, %v, %v, leaving %v; want yes, removed from the query", v, ok, err, q)
	}
	if v, ok, err := Param(q, "p", "redis://h", "want yes", yes); v != "" || ok || err != nil {
		t.Errorf("Param of an absent parameter = %q, %v, %v", v, ok, err)
	}
	for _, vals := range [][]string{{"no"}, {"yes", "yes"}, {""}} {
		_, ok, err := Param(url.Values{"p": vals}, "p", "redis://:xxxxx@h", "want yes", yes)
		want := `p="` + strings.Join(vals, ",") + `" in "redis://:xxxxx@h": want yes`
		if ok || !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) {
			t.Errorf("Param of %q = %v, %v; want ErrInvalid saying %s", vals, ok, err, want)
		}
	}
}
