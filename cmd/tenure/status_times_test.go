package main

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
)

// TestStatusGrantTimes: against real stores, status --json has
// renew_time between the holder's start and the read while the key is
// held, null when it is free, and acquire_time and transitions always
// present and null.
func TestStatusGrantTimes(t *testing.T) {
	for _, c := range []struct {
		name  string
		store func(t *testing.T) string
	}{
		{"local", func(t *testing.T) string { return "file://" + t.TempDir() }},
		{"redis", func(t *testing.T) string { return testserver.Redis(t, false).URL(0) }},
	} {
		t.Run(c.name, func(t *testing.T) {
			store := c.store(t)
			if m := statusFields(t, store, "free"); m["renew_time"] != nil {
				t.Errorf("a free key's renew_time = %v, want null", m["renew_time"])
			}
			began := time.Now()
			holdKey(t, store, "times", "--ttl", "3s")
			m := statusFields(t, store, "times")
			read := time.Now()
			for _, f := range []string{"acquire_time", "transitions"} {
				if v, ok := m[f]; !ok || v != nil {
					t.Errorf("%s = %v (present %v), want present and null", f, v, ok)
				}
			}
			s, _ := m["renew_time"].(string)
			renew, err := time.Parse(time.RFC3339Nano, s)
			// etcd would need a second of slack; these stores count the
			// time left in milliseconds or finer.
			slack := 5 * time.Millisecond
			if err != nil || renew.Before(began.Add(-slack)) || renew.After(read.Add(slack)) {
				t.Fatalf("renew_time %q (%v), want between the holder's start %s and the read %s",
					s, err, began.Format(time.RFC3339Nano), read.Format(time.RFC3339Nano))
			}
		})
	}
}

// statusFields runs status --json for key and returns its fields.
func statusFields(t *testing.T, store, key string) map[string]any {
	t.Helper()
	r := runTenure(t, "status", "--store", store, "--key", key, "--json")
	var m map[string]any
	if (r.code != exitOK && r.code != exitFree) || json.Unmarshal([]byte(r.stdout), &m) != nil {
		t.Fatalf("status --json: exit %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	return m
}

// TestDeriveGrantTimes: renew_time only where the store counts the time
// left itself.
func TestDeriveGrantTimes(t *testing.T) {
	at := time.Date(2026, 11, 23, 2, 0, 0, 0, time.UTC)
	held := tenure.Record{Key: "k", Holder: "a", Term: 3, TTL: 10 * time.Second, Remaining: 7 * time.Second}
	for _, c := range []struct {
		url  string
		rec  tenure.Record
		want string // "" for null
	}{
		{"", held, "2026-11-23T01:59:57Z"},
		{"redis://:pw@h:6379/0", held, "2026-11-23T01:59:57Z"},
		{"etcd://h:2379", held, "2026-11-23T01:59:57Z"},
		{"zk://h:2181", held, ""},
		{"azblob://acct/c", held, ""},
		{"k8s://ns", held, ""},
		{"peer://?members=1=h:1&self=1", held, ""},
		{"file:///x", tenure.Record{Key: "k", Term: 3}, ""},
		{"file:///x", tenure.Record{Key: "k", Holder: "a", Term: 3, TTL: time.Second, Remaining: 2 * time.Second}, ""},
	} {
		g := deriveGrantTimes(c.url, c.rec, at)
		got := ""
		if g.RenewTime != nil {
			got = *g.RenewTime
		}
		if got != c.want || g.AcquireTime != nil || g.Transitions != nil {
			t.Errorf("%s %+v: renew_time %q, acquire_time %v, transitions %v; want %q, nil, nil",
				c.url, c.rec, got, g.AcquireTime, g.Transitions, c.want)
		}
	}
}
