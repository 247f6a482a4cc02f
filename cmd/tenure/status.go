package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/termsafe"
	"github.com/tenurehq/tenure/peer"
)

const statusHelp = `Usage: tenure status [flags] --key KEY

Prints who holds KEY: holder, term (the fencing token), TTL and time left.
Exit codes: 0 held, 3 free (never granted, released or expired), 1 the store
could not be read, 2 bad command line.

With --json it prints one object:
  {"key":"jobs","held":true,"holder":"node-1","term":7,"ttl_ms":10000,"remaining_ms":8312,"value":"10.0.0.7:8080"}
held is false and holder "" when the key is free; term is then the last
term granted (0 if never). value is what the holder published with
tenure run --advertise; "" when free or when it published nothing.
renew_time (RFC 3339) is when the store last extended the grant, derived
from the time left where the store counts it (file, memory, Redis,
PostgreSQL; etcd to the second), null elsewhere and when free.
acquire_time and transitions are always null: no store reports when a
grant began or how often the key changed hands (tenure watch --http shows
what it sees). Fields are only ever added, never renamed.
On a Redis store a line "store check: ..." (JSON: "store_checks") says what
was checked of the server's maxmemory-policy.
With --candidates it also lists the candidates tenure run registered for
KEY, best first, with priority and since when (JSON: "candidates", each
{"id","priority","since","leading","preferred"}, preferred marking the
holder named by tenure prefer); in peer modes, with the group's observer
URL, the live members.

Flags:
`

// recordJSON is the stable JSON form of a record, for status and watch.
type recordJSON struct {
	Time        string `json:"time,omitempty"` // watch only: when the change was seen (RFC 3339)
	Key         string `json:"key"`
	Held        bool   `json:"held"`
	Holder      string `json:"holder"`
	Term        uint64 `json:"term"`
	TTLMs       int64  `json:"ttl_ms"`
	RemainingMs int64  `json:"remaining_ms"`
	// Value is what the holder published (tenure run --advertise); "" when
	// free or none.
	Value string `json:"value"`
}

// statusJSON is status's JSON: the record, plus what the store checked.
type statusJSON struct {
	recordJSON
	grantTimes
	StoreChecks []string `json:"store_checks,omitempty"`
	// Candidates is --candidates: the registered candidates, best first;
	// [] when none is (listCandidates returns a non-nil slice), absent
	// without --candidates (nil), so that a script asking for the list
	// always finds one.
	Candidates []candidateJSON `json:"candidates,omitzero"`
}

func toJSON(r tenure.Record) recordJSON {
	return recordJSON{Key: r.Key, Held: r.Held(), Holder: r.Holder, Term: r.Term,
		TTLMs: r.TTL.Milliseconds(), RemainingMs: r.Remaining.Milliseconds(), Value: r.Value}
}

// shown returns s as a terminal can safely show it: s itself if it is
// valid UTF-8 of printable characters and spaces, else s quoted with Go
// escapes. Identities come from the store, where anyone with its own
// client can write any bytes, and an escape sequence printed raw would
// drive the operator's terminal (rewrite the screen or the title, set
// the clipboard). tenure itself grants no such identity ([tenure.CheckAcquire]).
// One longer than [tenure.MaxIdentityLen] is cut there, with its size.
func shown(s string) string {
	s, more := termsafe.Cut(s, tenure.MaxIdentityLen)
	if !terminalSafe(s) {
		s = strconv.Quote(s)
	}
	return s + more
}

// describe renders a record for people.
func describe(r tenure.Record) string {
	if !r.Held() {
		if r.Term == 0 {
			return fmt.Sprintf("%s: no leader (never granted)", r.Key)
		}
		return fmt.Sprintf("%s: no leader (last term %d)", r.Key, r.Term)
	}
	s := fmt.Sprintf("%s: %s leads, term %d", r.Key, shown(r.Holder), r.Term)
	if r.TTL > 0 {
		s += fmt.Sprintf(", ttl %s, %s left", r.TTL, r.Remaining.Round(time.Millisecond))
	} // else a store with no lease time (peer raft): "ttl 0s, 0s left" would read as expired
	if r.Value != "" {
		v, more := termsafe.Cut(r.Value, tenure.MaxValueLen)
		s += fmt.Sprintf(", value %q%s", v, more)
	}
	return s
}

// statusCmd is `tenure status`.
func statusCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, done := parseKeyCmd("status", statusHelp, "print JSON (see above)", args, stdout, stderr)
	if done {
		return code
	}
	ctx, cancel := context.WithTimeout(ctx, oneShotWait)
	defer cancel()
	store, err := openStore(peer.WithLogger(ctx, quietLogger(stderr)), o.store)
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	rec, err := store.Get(ctx, o.key)
	readAt := time.Now()
	if err != nil {
		return fail(stderr, fmt.Errorf("cannot read key %q: %w", o.key, unanswered(ctx, err)))
	}
	checks := storeChecks(ctx, store) // what the store verified of its server (Redis: eviction)
	cands, err := listCandidates(ctx, store, o, rec)
	if err != nil {
		return fail(stderr, err)
	}
	if o.json {
		j := statusJSON{recordJSON: toJSON(rec), grantTimes: deriveGrantTimes(o.store.url, rec, readAt), StoreChecks: checks, Candidates: cands}
		_ = json.NewEncoder(termsafe.Writer{W: stdout}).Encode(j)
	} else {
		fmt.Fprintln(stdout, describe(rec))
		printChecks(stdout, checks)
		printCandidates(stdout, o, cands)
	}
	if !rec.Held() {
		return exitFree
	}
	return exitOK
}
