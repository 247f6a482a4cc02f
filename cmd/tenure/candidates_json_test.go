package main

import (
	"encoding/json"
	"testing"
)

// TestStatusCandidatesJSONWhenNoneRegistered: tenure status --json
// --candidates prints "candidates": [] when no candidate is registered,
// as the text form says "candidates: none registered", and leaves the
// field out without --candidates. It used to leave it out in both cases,
// so that a script reading .candidates found null or no key at all.
func TestStatusCandidatesJSONWhenNoneRegistered(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	store := "file://" + t.TempDir()
	for _, tc := range []struct {
		flags []string
		want  string // the "candidates" field as printed; "" for none
	}{
		{[]string{"--candidates"}, "[]"},
		{nil, ""},
	} {
		args := append([]string{"status", "--store", store, "--key", "job", "--json"}, tc.flags...)
		r := runTenure(t, args...)
		var got map[string]json.RawMessage
		if err := json.Unmarshal([]byte(r.stdout), &got); err != nil || r.code != exitFree {
			t.Fatalf("tenure %v: exit %d, stdout %q (%v); want %d and a JSON object", args, r.code, r.stdout, err, exitFree)
		}
		if c, ok := got["candidates"]; string(c) != tc.want || ok != (tc.want != "") {
			t.Errorf("tenure %v: \"candidates\" is %q (present %v); want %q", args, c, ok, tc.want)
		}
	}
}
