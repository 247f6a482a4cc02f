package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// An upgrade in place (a package manager or install(1) renames a new build
// over the tenure binary) while `tenure run --restart` runs must not
// start CMD's next supervisor from the new file: tenure and its supervisor
// speak a control protocol (deadlines, lease files, exit code) of their
// build, with no version of its own. Found in the rolling-upgrade audit:
// the next supervisor was whatever the path then held (here a stand-in
// that logs "impostor"), so CMD ran, if at all, under another build's
// idea of the deadlines. The supervisor is now started from
// /proc/self/exe, the running build, whatever is at its path.
func TestUpgradeInPlaceKeepsTheSupervisorsBuild(t *testing.T) {
	dir := t.TempDir()
	bin, log := filepath.Join(dir, "tenure"), filepath.Join(dir, "log")
	data, err := os.ReadFile(tenureBin)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	store := filepath.Join(dir, "store")
	if err := os.Mkdir(store, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "run", "--quiet", "--restart", "--store", "file://"+store, "--key", "k", "--ttl", "3s",
		"--", "sh", "-c", `echo run >> "$0"`, log)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := reapAtEnd(t, cmd)
	lines := func(word string) int {
		b, _ := os.ReadFile(log)
		return strings.Count(string(b), word+"\n")
	}
	waitFor(t, func() bool { return lines("run") > 0 })
	impostor := filepath.Join(dir, "impostor")
	if err := os.WriteFile(impostor, []byte("#!/bin/sh\necho impostor >> "+log+"\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(impostor, bin); err != nil {
		t.Fatal(err)
	}
	before := lines("run")
	// The supervisor started before the rename (one is made ready while
	// tenure campaigns) may run CMD once more; those after it must too.
	waitFor(t, func() bool { return lines("run") >= before+3 || lines("impostor") > 0 })
	if n := lines("impostor"); n > 0 {
		t.Fatalf("after the binary was replaced, its replacement was started %d times as the supervisor", n)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	<-done
}
