//go:build unix

package raft

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
)

// TestOpenRefusesUnsafeStateDir: the README promises that a peer member
// refuses a state-dir that group or others may write, naming it and the
// chmod. The raft mode keeps its term and vote there (raft-<id>/raft.db),
// and started on a 0777 state-dir without a word (found by starting
// `tenure run` on one); whoever may write it can delete raft-<id> and the
// member votes again in terms it already voted in, with its term back at 0.
func TestOpenRefusesUnsafeStateDir(t *testing.T) {
	for _, tc := range []struct {
		name string
		prep func(t *testing.T, dir string) string // returns the directory the error must name
	}{
		{"state-dir 0777", func(t *testing.T, dir string) string {
			chmod(t, dir, 0o777)
			return dir
		}},
		{"state-dir 0770", func(t *testing.T, dir string) string {
			chmod(t, dir, 0o770)
			return dir
		}},
		{"raft-1 0777", func(t *testing.T, dir string) string {
			sub := filepath.Join(dir, "raft-1")
			if err := os.Mkdir(sub, 0o700); err != nil {
				t.Fatal(err)
			}
			chmod(t, sub, 0o777)
			return sub
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := peerURLs(t, 3, "")[0]
			dir := stateDirOf(t, u)
			want := tc.prep(t, dir)
			s, err := tenure.Open(context.Background(), u)
			if err == nil {
				s.Close()
				t.Fatalf("Open with %s succeeded, want a refusal", tc.name)
			}
			if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "chmod go-w") {
				t.Fatalf("Open with %s = %v, want ErrInvalid naming %s and chmod go-w", tc.name, err, want)
			}
		})
	}
}

func chmod(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
}

// stateDirOf is the state-dir parameter of a peer:// URL.
func stateDirOf(t *testing.T, u string) string {
	t.Helper()
	pu, err := url.Parse(u)
	if err != nil || pu.Query().Get("state-dir") == "" {
		t.Fatalf("no state-dir in %s (%v)", u, err)
	}
	return pu.Query().Get("state-dir")
}
