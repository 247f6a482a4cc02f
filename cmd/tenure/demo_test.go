package main

import (
	"strings"
	"testing"
)

// TestDemo runs `tenure demo` to completion (about 6 seconds): it must pass
// its own checks (no overlap, growing terms) and print the summary.
func TestDemo(t *testing.T) {
	if testing.Short() {
		t.Skip("the demo takes about 6s; skipped with -short")
	}
	r := runTenure(t, "demo")
	if r.code != 0 {
		t.Fatalf("demo exited %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
	}
	for _, want := range []string{"graceful (SIGTERM)", "crash (SIGKILL)", "freeze (SIGSTOP)", "overlap  0 leaders at once", "strictly increasing"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("demo output lacks %q:\n%s", want, r.stdout)
		}
	}
	if strings.Contains(r.stdout, "\x1b[") {
		t.Errorf("demo printed colour codes to a pipe")
	}
}
