package main

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/tenurehq/tenure"
)

// tenure status --candidates.

const candidatesUsage = "also list the candidates registered by tenure run (in peer modes: the members that answer), best first, with priority and since when (JSON: \"candidates\")"

// candidateJSON is the stable JSON form of a registered candidate.
type candidateJSON struct {
	ID       string `json:"id"`
	Priority int    `json:"priority"`
	Since    string `json:"since"` // RFC 3339, on the candidate's clock
	Leading  bool   `json:"leading"`
	// Preferred marks the key's preferred holder (tenure prefer).
	Preferred bool `json:"preferred"`
}

// listCandidates reads the registered candidates if --candidates was
// given; rec is the key's record, to mark the leader.
func listCandidates(ctx context.Context, store tenure.Store, o keyCmdOpts, rec tenure.Record) ([]candidateJSON, error) {
	if !o.candidates {
		return nil, nil
	}
	if mode, ok := peerMode(o.store.url); ok && !peerStepDown[mode] {
		return nil, usageErrorf("status --candidates is not supported in peer mode (algorithm %s)", mode)
	}
	cs, err := candidatesOf(ctx, store, o.key)
	if err != nil {
		return nil, fmt.Errorf("cannot read the candidates of %q: %w", o.key, err)
	}
	var pref tenure.Preference
	if _, peer := peerMode(o.store.url); !peer {
		pref, _, _ = tenure.ReadPreference(ctx, store, o.key) // advisory: none if unreadable
	}
	out := make([]candidateJSON, 0, len(cs))
	for _, c := range cs {
		out = append(out, candidateJSON{ID: c.Identity, Priority: c.Priority,
			Since: c.Since.UTC().Format(time.RFC3339), Leading: rec.Held() && rec.Holder == c.Identity,
			Preferred: pref.Holder == c.Identity})
	}
	return out, nil
}

// printCandidates prints the candidates for people, one a line.
func printCandidates(w io.Writer, o keyCmdOpts, cs []candidateJSON) {
	if !o.candidates {
		return
	}
	if len(cs) == 0 {
		fmt.Fprintln(w, "candidates: none registered")
		return
	}
	fmt.Fprintf(w, "candidates (%d, best first):\n", len(cs))
	for _, c := range cs {
		note := ""
		switch {
		case c.Leading:
			note = ", leading"
		case c.Priority == tenure.NeverLead:
			note = ", never leads"
		}
		if c.Preferred {
			note += ", preferred"
		}
		fmt.Fprintf(w, "  %s priority %d, since %s%s\n", shown(c.ID), c.Priority, c.Since, note)
	}
}

// candidateLister is a store that lists the candidates of a key itself: a
// peer observer (the members that answer) or member node.
type candidateLister interface {
	Candidates(ctx context.Context, key string) ([]tenure.Candidate, error)
}

// candidatesOf lists key's candidates: the store's own list if it keeps
// one (peer modes), else the registered ones ([tenure.Candidates]).
func candidatesOf(ctx context.Context, store tenure.Store, key string) ([]tenure.Candidate, error) {
	if l, ok := store.(candidateLister); ok {
		return l.Candidates(ctx, key)
	}
	return tenure.Candidates(ctx, store, key)
}
