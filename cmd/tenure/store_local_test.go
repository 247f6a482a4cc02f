package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/store/local"
)

// With no per-user directory in the environment, the default store is
// refused with a message saying to pass --store, instead of falling back
// to /tmp/tenure-UID, which another user could create first.
func TestNoDefaultStoreDir(t *testing.T) {
	if _, err := os.Stat(filepath.Join("/run/user", strconv.Itoa(os.Getuid()))); err == nil {
		t.Skip("/run/user/UID exists here, so there is a default directory")
	}
	for _, v := range []string{"XDG_STATE_HOME", "HOME", "XDG_RUNTIME_DIR"} {
		t.Setenv(v, "")
	}
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"status", "--key", "k"}, &out, &errb)
	msg := strings.TrimSpace(errb.String())
	if code == 0 || !strings.Contains(msg, "--store file:///DIR") || strings.Contains(msg, "\n") {
		t.Fatalf("status with no default directory: exit %d, stderr %q; want a one-line error saying to pass --store file:///DIR", code, msg)
	}
}

// A default directory whose path holds URL syntax is used as is.
func TestDefaultStoreURLEscapes(t *testing.T) {
	state := filepath.Join(t.TempDir(), "a?b%c")
	t.Setenv("XDG_STATE_HOME", state)
	var out, errb bytes.Buffer
	run(context.Background(), []string{"status", "--key", "k"}, &out, &errb)
	if _, err := os.Stat(filepath.Join(state, "tenure")); err != nil {
		t.Fatalf("status did not use %s: %v (stderr %q)", filepath.Join(state, "tenure"), err, errb.String())
	}
}

// The local store ties its grants to open files: tenure run must find its
// LeaseFiles method, or a crash of tenure alone would end the grant while
// CMD still runs under the supervisor.
var _ leaseFiler = (*local.Store)(nil)
