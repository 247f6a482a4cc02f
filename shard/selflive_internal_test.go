package shard

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// TestOwnLivenessIsOwnGrant: a member is live in its own view only while
// its own liveness elector leads under the grant the store shows. A grant
// of its identity made by another process (a second member started with
// the same identity) made it count itself live, so it campaigned for the
// keys it owned and could take one the other released (helper 65 saw key
// 1 led twice by the duplicate before its own liveness was granted), and
// its /readyz said ready.
func TestOwnLivenessIsOwnGrant(t *testing.T) {
	st := memory.New(nil)
	defer st.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	cfg := Config{Store: st, Group: "g", Identity: "a", Members: []string{"a", "b"}, Keys: Numbered(2),
		TTL: time.Minute, Logger: slog.New(slog.DiscardHandler)}.WithDefaults()
	// Another process holds a's liveness key under identity a.
	other, err := st.Acquire(ctx, MemberLease("g", "a"), "a", time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	m := newMembership(2, "a", []string{"k"})
	first := m.view()
	for _, member := range cfg.Members {
		go m.follow(ctx, &cfg, member, "")
	}
	<-first.changed // both liveness keys read: the first view
	if v := m.view(); v.has("a") {
		t.Fatalf("live set %v: this member counts another process's grant of its identity as its own", v.live)
	}
	// This Run's elector leads under its own grant: live. Here the store's
	// grant stands in for it (its term is what the elector would report).
	seen := m.view()
	m.ownLiveness(nil)(tenure.Event{Kind: tenure.EventElected, Key: MemberLease("g", "a"), Identity: "a", Term: other.Term})
	<-seen.changed
	if v := m.view(); !v.has("a") {
		t.Fatalf("live set %v after its own election: want a live", v.live)
	}
	seen = m.view()
	m.ownLiveness(nil)(tenure.Event{Kind: tenure.EventLost, Key: MemberLease("g", "a"), Identity: "a", Term: other.Term})
	<-seen.changed
	if v := m.view(); v.has("a") {
		t.Fatalf("live set %v after its loss: want a not live", v.live)
	}
}
