package main

import (
	"strings"
	"testing"
)

// tenure run --advertise publishes its value with the grant: status (text
// and JSON) and watch show it while that candidate leads.
func TestAdvertise(t *testing.T) {
	c := testCluster(t, "job", []string{"--quiet", "--advertise", "10.0.0.7:8080"}, nil)
	out, err := newLineReader(t, "watch", "--store", c.storeURL, "--key", "job", "--json")
	if err != nil {
		t.Fatal(err)
	}
	if r := out.record(t, "the initial state"); r.Held || r.Value != "" {
		t.Fatalf("first watch line %+v: want no leader, no value", r)
	}
	if _, err := c.start("node-1"); err != nil {
		t.Fatal(err)
	}
	if _, _, ok := c.events.nextStart(0, wait); !ok {
		t.Fatal("no CMD started")
	}
	if r := out.record(t, "node-1's election"); r.Holder != "node-1" || r.Value != "10.0.0.7:8080" {
		t.Fatalf("watch line %+v, want node-1 with value 10.0.0.7:8080", r)
	}
	got, printed := heldStatus(t, c.storeURL, "job")
	if got.Holder != "node-1" || got.Value != "10.0.0.7:8080" || !strings.Contains(printed, `"value":"10.0.0.7:8080"`) {
		t.Fatalf("status --json = %s, want node-1 with value 10.0.0.7:8080", printed)
	}
	human := runTenure(t, "status", "--store", c.storeURL, "--key", "job")
	if human.code != exitOK || !strings.Contains(human.stdout, `value "10.0.0.7:8080"`) {
		t.Fatalf("status = %d %q, want the value", human.code, human.stdout)
	}
}

func TestAdvertiseBadValue(t *testing.T) {
	for _, v := range []string{strings.Repeat("v", 1025), "a\nb"} {
		r := runTenure(t, "run", "--store", "memory://x", "--key", "job", "--advertise", v, "--", "true")
		if r.code != exitUsage || !strings.Contains(r.stderr, "--advertise") {
			t.Errorf("run --advertise %.10q: code %d, stderr %q; want %d naming --advertise", v, r.code, r.stderr, exitUsage)
		}
	}
}
