package peer_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/synctest"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/internal/simtest"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// noAsker is an observer's transport that fails the test if asked.
type noAsker struct{ t *testing.T }

func (a noAsker) Ask(context.Context, uint64) (transport.Report, error) {
	a.t.Error("the observer asked a member")
	return transport.Report{}, errors.New("not asked")
}

func (noAsker) Close() error { return nil }

// TestCandidatesOfDerivedKey: a node's and an observer's Candidates refuse
// a derived key with ErrInvalid naming it and its base, before anything
// else (the observer asks no member, the node does not bind to it), as
// tenure.Candidates does. Before, a node listed the members as candidates
// of job~tenure-control, and an observer of job~tenure-candidate-03.
func TestCandidatesOfDerivedKey(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := simtest.Start(t, simtest.Options{Algorithm: "bully", Size: 3, Seed: 1})
		g, err := transport.NewGroup([]transport.Member{{ID: 1, Addr: "127.0.0.1:1"}, {ID: 2, Addr: "127.0.0.1:2"}})
		if err != nil {
			t.Fatal(err)
		}
		obs, err := peer.NewObserver(peer.Config{ID: wire.ObserverID, Group: g, Algorithm: "bully", Secret: testKey(t)}, noAsker{t})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { obs.Close() })
		for _, tc := range []struct{ key, base, what string }{
			{"job~tenure-control", "job", "the control key"},
			{"job~tenure-prefer", "job", "the preference key"},
			{"job~tenure-candidate-03", "job", "candidate slot 03"},
		} {
			want := fmt.Sprintf("%q is %s of %q", tc.key, tc.what, tc.base)
			for name, list := range map[string]func(context.Context, string) ([]tenure.Candidate, error){
				"node": c.Nodes[1].Candidates, "observer": obs.Candidates,
			} {
				cs, err := list(context.Background(), tc.key)
				if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) ||
					!strings.Contains(err.Error(), fmt.Sprintf("use %q", tc.base)) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%s Candidates(%q) = %v, %v; want ErrInvalid saying %s, use %q", name, tc.key, cs, err, want, tc.base)
				}
			}
		}
		// The node was not bound to a derived key: it still serves job.
		if _, err := c.Nodes[1].Candidates(context.Background(), "job"); err != nil {
			t.Errorf("node Candidates(job) after the refusals: %v", err)
		}
	})
}
