package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestStatusCandidatesOfDerivedKey: tenure status --candidates with a
// --key that is itself a key kept beside another key (its control key,
// preference key or a candidate slot) is a usage error naming the base key,
// before the store is opened (with a plain file for a store, which would
// fail with exit 1 once opened), as well as on a usable store. Before, it
// read KEY~tenure-candidate-NN of the derived key, which nobody writes,
// and said "candidates: none registered". Without --candidates the derived
// key's own record is still shown, and a key that only looks alike still
// lists its candidates.
func TestStatusCandidatesOfDerivedKey(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	notDir := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	store := "file://" + t.TempDir()
	for _, tc := range []struct{ key, what string }{
		{"job~tenure-control", "the control key"},
		{"job~tenure-prefer", "the preference key"},
		{"job~tenure-candidate-03", "candidate slot 03"},
	} {
		for _, extra := range [][]string{{"--store", "file://" + notDir}, {"--store", store}, {"--store", store, "--json"}} {
			args := append([]string{"status", "--candidates", "--key", tc.key}, extra...)
			r := runTenure(t, args...)
			want := "tenure: --candidates: --key \"" + tc.key + "\" is " + tc.what + " of \"job\", not a lease with candidates: use --key \"job\"\n"
			if r.code != exitUsage || r.stderr != want || r.stdout != "" {
				t.Errorf("tenure %s: exit %d, stdout %q, stderr %q; want exit %d and stderr %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, exitUsage, want)
			}
		}
	}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--key", "job~tenure-control"}, "job~tenure-control: no leader (never granted)\n"},
		{[]string{"--key", "job~tenure-candidate-3", "--candidates"}, "job~tenure-candidate-3: no leader (never granted)\ncandidates: none registered\n"},
	} {
		args := append([]string{"status", "--store", store}, tc.args...)
		if r := runTenure(t, args...); r.code != exitFree || r.stdout != tc.want || r.stderr != "" {
			t.Errorf("tenure %s: exit %d, stdout %q, stderr %q; want exit %d and stdout %q", strings.Join(args, " "), r.code, r.stdout, r.stderr, exitFree, tc.want)
		}
	}
	// A key from $TENURE_KEY: the message names the variable.
	t.Setenv(envKey, "job~tenure-prefer")
	want := "tenure: --candidates: $TENURE_KEY \"job~tenure-prefer\" is the preference key of \"job\", not a lease with candidates: set $TENURE_KEY to \"job\"\n"
	if r := runTenure(t, "status", "--candidates", "--store", store); r.code != exitUsage || r.stderr != want {
		t.Errorf("TENURE_KEY=job~tenure-prefer tenure status --candidates: exit %d, stderr %q; want exit %d and %q", r.code, r.stderr, exitUsage, want)
	}
}
