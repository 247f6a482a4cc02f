package tcp_test

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer/internal/peertest"
	"github.com/tenurehq/tenure/peer/tcp"
)

// TestLoadSecretPermissions: a secret file readable or writable by group or
// others is refused with one line naming the path and the fix.
func TestLoadSecretPermissions(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o620, 0o604, 0o602, 0o666} {
		p := filepath.Join(t.TempDir(), "peer.secret")
		if err := os.WriteFile(p, []byte(testSecret+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
		_, err := tcp.LoadSecret(p)
		want := "tenure: invalid argument: peer: secret file " + p + " is accessible by group or others (mode " +
			octal(mode) + "); run: chmod 600 " + p
		if err == nil || err.Error() != want || !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("mode %#o: LoadSecret = %v\nwant %s", mode, err, want)
		}
		if err != nil && (strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "\n")) {
			t.Errorf("mode %#o: the error shows the secret or spans lines: %q", mode, err)
		}
	}
	for _, mode := range []os.FileMode{0o600, 0o400} {
		p := filepath.Join(t.TempDir(), "peer.secret")
		if err := os.WriteFile(p, []byte(testSecret+"\n"), mode); err != nil {
			t.Fatal(err)
		}
		if _, err := tcp.LoadSecret(p); err != nil {
			t.Errorf("mode %#o: %v", mode, err)
		}
	}
}

func octal(m os.FileMode) string { return "0" + strconv.FormatUint(uint64(m.Perm()), 8) }

// TestLoadSecretEntropy: a long but guessable secret (one letter, a short
// repeated pattern, a short alphabet) is refused with one line naming the
// path and how to generate a good one; real random secrets pass.
func TestLoadSecretEntropy(t *testing.T) {
	for _, tc := range []struct {
		secret string
		bits   int
	}{
		{strings.Repeat("a", 32), 0},
		{strings.Repeat("abcd", 8), 10},
		{strings.Repeat("0123456789abcdef", 2), 68},
		{strings.Repeat("password", 4), 24},
		{"01101001100101101001011001101001", 11}, // binary: short alphabet
	} {
		p := writeSecret(t, tc.secret)
		_, err := tcp.LoadSecret(p)
		want := "tenure: invalid argument: peer: secret file " + p + " has too little entropy (about " +
			strconv.Itoa(tc.bits) + " bits, at least 96 needed); generate one with: head -c 48 /dev/urandom | base64 > " + p
		if err == nil || err.Error() != want || !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%q: LoadSecret = %v\nwant %s", tc.secret, err, want)
		}
	}
	for _, good := range []string{
		"aO3EWHQLsSZiTtItpQShpPwxA0uF99TRFeJLcwSXIgaRkzixOXXfvdQjJh+yHzMB", // head -c 48 /dev/urandom | base64
		"5b2342ee2c002c08c70b765c456a6820e2c0b6d6f0dbb8d1",                 // 24 random bytes in hex
		testSecret,
	} {
		if _, err := tcp.LoadSecret(writeSecret(t, good)); err != nil {
			t.Errorf("%q: %v", good, err)
		}
	}
}

// TestLoadSecretNotARegularFile: a FIFO or a directory in the secret file's
// place is refused at once, naming the path; a FIFO used to hang the open
// until some writer came.
func TestLoadSecretNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{fifo, dir} {
		done := make(chan error, 1)
		go func() { _, err := tcp.LoadSecret(p); done <- err }()
		select {
		case err := <-done:
			if err == nil || !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), p+" is not a regular file") {
				t.Errorf("LoadSecret(%s) = %v, want an invalid-argument error saying it is not a regular file", p, err)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("LoadSecret(%s) still blocked after 5s", p)
		}
	}
}

const testSecret = peertest.Secret

var writeSecret = peertest.WriteSecret
