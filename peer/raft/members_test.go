package raft

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
)

// TestOpenRefusesChangedMembers: raft bootstraps the member list into a
// member's state on first start and, on every later start, keeps the
// stored configuration. A member restarted with another peers= list (an
// address moved, a fourth member added) started without a word and went on
// dialing and counting the old members (found restarting `tenure run`
// members with four peers instead of three). It must refuse, naming both
// lists, with ErrInvalid (exit 2).
func TestOpenRefusesChangedMembers(t *testing.T) {
	ctx := context.Background()
	u := peerURLs(t, 3, "")[0]
	s, err := tenure.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(u)
	if err != nil {
		t.Fatal(err)
	}
	old := pu.Query().Get("peers")
	moved := strings.Replace(old, "2=127.0.0.1:", "2=127.0.0.2:", 1)
	added := fmt.Sprintf("%s,4=127.0.0.1:%d", old, testserver.FreePort(t))
	for _, peers := range []string{moved, added} {
		q := pu.Query()
		q.Set("peers", peers)
		changed := *pu
		changed.RawQuery = q.Encode()
		s, err := tenure.Open(ctx, changed.String())
		if err == nil {
			s.Close()
			t.Fatalf("Open with peers=%s after bootstrapping with %s succeeded, want a refusal", peers, old)
		}
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), old) || !strings.Contains(err.Error(), peers) {
			t.Fatalf("Open with peers=%s = %v, want ErrInvalid naming both lists", peers, err)
		}
	}
	// The same list still opens: the check does not refuse a restart.
	s, err = tenure.Open(ctx, u)
	if err != nil {
		t.Fatalf("reopening with the bootstrap list: %v", err)
	}
	s.Close()
}

// TestOpenTwiceNamesTheOtherProcess: a second process started as the same
// member on the same state-dir failed with "raft: open …/raft.db: timeout"
// (found starting a duplicate `tenure run`), which names neither the cause
// nor the fix. It must say the file is locked by another process and that
// the member may already be running.
func TestOpenTwiceNamesTheOtherProcess(t *testing.T) {
	ctx := context.Background()
	u := peerURLs(t, 3, "")[0]
	s, err := tenure.Open(ctx, u)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	s2, err := tenure.Open(ctx, u)
	if err == nil {
		s2.Close()
		t.Fatal("a second Open of the same member and state-dir succeeded")
	}
	if !strings.Contains(err.Error(), "locked by another process") || !strings.Contains(err.Error(), "member 1 already running") {
		t.Fatalf("second Open = %v, want it to say the state is locked by another process, member 1 already running", err)
	}
}

// TestOpenRefusesAnotherMembersState: member 2 started on a copy of member
// 1's raft state (found by copying state-dir/raft-1 over raft-2 and
// restarting member 2: it ran without a word) would vote with member 1's
// vote and term. It must refuse, naming both members.
func TestOpenRefusesAnotherMembersState(t *testing.T) {
	ctx := context.Background()
	urls, dir := firstStarted(t)
	if err := os.CopyFS(filepath.Join(dir, "raft-2"), os.DirFS(filepath.Join(dir, "raft-1"))); err != nil {
		t.Fatal(err)
	}
	s, err := tenure.Open(ctx, urls[1])
	if err == nil {
		s.Close()
		t.Fatal("member 2 opened on a copy of member 1's state")
	}
	if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), `member "1", not of member "2"`) {
		t.Fatalf("Open of member 2 on member 1's state = %v, want ErrInvalid naming both", err)
	}
	// Member 1 itself still opens its own state.
	if s, err = tenure.Open(ctx, urls[0]); err != nil {
		t.Fatalf("reopening member 1: %v", err)
	}
	s.Close()
}

// TestOpenRefusesLostState: member 1's raft.db truncated to 0 bytes (or
// deleted) used to open as a first start: raft bootstrapped it anew, with
// term 0 and no record of its vote, and it could vote twice in a term. It
// must refuse, naming the marker to remove to start anyway; once removed,
// it opens.
func TestOpenRefusesLostState(t *testing.T) {
	for _, how := range []string{"truncated", "deleted"} {
		t.Run(how, func(t *testing.T) {
			ctx := context.Background()
			urls, stateDir := firstStarted(t)
			dir := filepath.Join(stateDir, "raft-1")
			db := filepath.Join(dir, "raft.db")
			var err error
			if how == "truncated" {
				err = os.Truncate(db, 0)
			} else {
				err = os.Remove(db)
			}
			if err != nil {
				t.Fatal(err)
			}
			s, err := tenure.Open(ctx, urls[0])
			if err == nil {
				s.Close()
				t.Fatalf("member 1 opened with its raft.db %s", how)
			}
			marker := filepath.Join(dir, "tenure-member")
			if !strings.Contains(err.Error(), "term and vote are lost") || !strings.Contains(err.Error(), "remove "+marker) {
				t.Fatalf("Open of member 1 with raft.db %s = %v; want a refusal naming %s", how, err, marker)
			}
			if err := os.Remove(marker); err != nil {
				t.Fatal(err)
			}
			if s, err = tenure.Open(ctx, urls[0]); err != nil {
				t.Fatalf("reopening member 1 after removing the marker: %v", err)
			}
			s.Close()
		})
	}
}

// firstStarted returns the URLs of a 3-member group whose member 1 was
// opened and closed once (its raft state made), and the group's
// state-dir.
func firstStarted(t *testing.T) (urls []string, stateDir string) {
	t.Helper()
	urls = peerURLs(t, 3, "")
	s, err := tenure.Open(context.Background(), urls[0])
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	pu, err := url.Parse(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	return urls, pu.Query().Get("state-dir")
}
