package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/termsafe"
	"github.com/tenurehq/tenure/shard"
)

// shardStatusJSON is `tenure shard --status --json`'s answer; fields are
// only ever added.
type shardStatusJSON struct {
	Group   string            `json:"group"`
	Live    []string          `json:"live"`
	Members []shardMemberJSON `json:"members"`
	Keys    []shardKeyJSON    `json:"keys"`
}

type shardMemberJSON struct {
	ID    string `json:"id"`
	Live  bool   `json:"live"`
	Leads int    `json:"leads"`
}

type shardKeyJSON struct {
	Key    string `json:"key"`
	Holder string `json:"holder"`
	Term   uint64 `json:"term"`
	Owner  string `json:"owner"`
}

// shardReaders bounds the store reads `tenure shard --status` has under
// way at once.
const shardReaders = 8

// shardStatusCmd is `tenure shard --status`: it reads every member's liveness
// key and every key of the group, and prints who is live, who leads each
// key and each key's owner among the live members (shard.Assign).
func shardStatusCmd(ctx context.Context, o shardOpts, stdout, stderr io.Writer) int {
	ctx, cancel := context.WithTimeout(ctx, oneShotWait)
	defer cancel()
	store, err := openStore(ctx, o.store)
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	leases := make([]string, 0, len(o.members)+len(o.keys))
	for _, m := range o.members {
		leases = append(leases, shard.MemberLease(o.group, m))
	}
	for _, k := range o.keys {
		leases = append(leases, shard.KeyLease(o.group, k))
	}
	recs, err := readAll(ctx, store, leases)
	if err != nil {
		return fail(stderr, err)
	}
	st := shardStatusJSON{Group: o.group, Live: []string{}}
	live := make([]bool, len(o.members))
	for i, m := range o.members {
		if live[i] = recs[i].Held() && recs[i].Holder == m; live[i] {
			st.Live = append(st.Live, m)
		}
	}
	owners := shard.Assign(o.keys, st.Live)
	leads, unled := map[string]int{}, 0
	for i, k := range o.keys {
		r := recs[len(o.members)+i]
		kj := shardKeyJSON{Key: k, Term: r.Term, Owner: owners[k]}
		if r.Held() {
			kj.Holder = r.Holder
			leads[r.Holder]++
		} else {
			unled++
		}
		st.Keys = append(st.Keys, kj)
	}
	for i, m := range o.members {
		st.Members = append(st.Members, shardMemberJSON{ID: m, Live: live[i], Leads: leads[m]})
	}
	if o.json {
		_ = json.NewEncoder(termsafe.Writer{W: stdout}).Encode(st)
	} else {
		printShardStatus(stdout, st, unled)
	}
	if unled > 0 {
		return exitFree
	}
	return exitOK
}

// readAll reads every lease of leases, shardReaders at a time, and
// returns their records in order, or the first error.
func readAll(ctx context.Context, store tenure.Store, leases []string) ([]tenure.Record, error) {
	recs := make([]tenure.Record, len(leases))
	errs := make([]error, len(leases))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(shardReaders, len(leases)) {
		wg.Go(func() {
			for i := range next {
				recs[i], errs[i] = store.Get(ctx, leases[i])
			}
		})
	}
	for i := range leases {
		next <- i
	}
	close(next)
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			return nil, fmt.Errorf("cannot read key %q: %w", leases[i], unanswered(ctx, err))
		}
	}
	return recs, nil
}

// printShardStatus prints st as text: a summary line, then a line a key.
func printShardStatus(w io.Writer, st shardStatusJSON, unled int) {
	w = termsafe.Writer{W: w}
	var per []string
	for _, m := range st.Members {
		if m.Live || m.Leads > 0 {
			per = append(per, fmt.Sprintf("%s %d", m.ID, m.Leads))
		}
	}
	fmt.Fprintf(w, "group %s: %d of %d members live (%s); %d of %d keys led (%s)\n", st.Group, len(st.Live), len(st.Members),
		strings.Join(st.Live, ", "), len(st.Keys)-unled, len(st.Keys), strings.Join(per, ", "))
	for _, k := range st.Keys {
		switch {
		case k.Holder == "":
			fmt.Fprintf(w, "key %s: nobody leads (last term %d); owner %s\n", k.Key, k.Term, orNobody(k.Owner))
		case k.Holder != k.Owner:
			fmt.Fprintf(w, "key %s: %s, term %d; owner %s (moving, or held by the fallback rule)\n", k.Key, k.Holder, k.Term, orNobody(k.Owner))
		default:
			fmt.Fprintf(w, "key %s: %s, term %d\n", k.Key, k.Holder, k.Term)
		}
	}
}

// orNobody is s, or "nobody" for "".
func orNobody(s string) string {
	if s == "" {
		return "nobody"
	}
	return s
}
