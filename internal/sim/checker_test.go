package sim

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
)

// doubleGrant is a broken store: every other Acquire of a held key is
// granted anyway, with the holder's term, and Renew and Release of such a
// forged grant always succeed.
type doubleGrant struct {
	tenure.Store
	mu     sync.Mutex
	held   int
	forged map[string]bool
}

func (d *doubleGrant) Acquire(ctx context.Context, key, id string, ttl time.Duration) (tenure.Lease, error) {
	l, err := d.Store.Acquire(ctx, key, id, ttl)
	var he *tenure.HeldError
	if !errors.As(err, &he) {
		return l, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.held++
	if d.held%2 == 0 {
		return l, err
	}
	tok := fmt.Sprintf("forged-%d", d.held)
	d.forged[tok] = true
	return tenure.Lease{Key: key, Identity: id, Term: he.Record.Term, TTL: ttl, Token: tok}, nil
}

func (d *doubleGrant) isForged(l tenure.Lease) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.forged[l.Token]
}

func (d *doubleGrant) Renew(ctx context.Context, l tenure.Lease) error {
	if d.isForged(l) {
		return nil
	}
	return d.Store.Renew(ctx, l)
}

func (d *doubleGrant) Release(ctx context.Context, l tenure.Lease) error {
	if d.isForged(l) {
		return nil
	}
	return d.Store.Release(ctx, l)
}

// TestCheckerCatchesDoubleGrants plants a store that grants held keys and
// requires the checker to report overlapping leaders and a repeated term in
// every seed.
func TestCheckerCatchesDoubleGrants(t *testing.T) {
	for seed := range uint64(20) {
		synctest.Test(t, func(t *testing.T) {
			s := Generate(seed)
			s.WrapStore = func(st tenure.Store) tenure.Store {
				return &doubleGrant{Store: st, forged: map[string]bool{}}
			}
			v, _ := Check(s, Run(s))
			all := strings.Join(v, "\n")
			if !strings.Contains(all, "two leaders at once") || !strings.Contains(all, "term did not increase") {
				t.Errorf("seed=%d: a store granting double leases went unnoticed; violations: %q", seed, v)
			}
		})
	}
}

// TestCheckerCatchesClockDriftBeyondTheMargin runs an elector whose clock
// runs at half speed, far outside the ρ the timings allow for: when its
// renewals fail it keeps leading past the store's expiry, and the checker
// must see two leaders at once.
func TestCheckerCatchesClockDriftBeyondTheMargin(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		ttl := time.Second
		s := &Scenario{
			Seed: 1, TTL: ttl, Rho: 0.01, FaultsEnd: 6 * ttl,
			Electors: []ElectorPlan{
				// e0 wins at once: e1 is partitioned for the first 1.5s.
				// Then e0 is partitioned; its slow clock cancels the task
				// 4/3 TTL after the last renewal, a third of a TTL after the
				// store let e1 in.
				{ID: "e0", Rate: 0.5, Windows: []Window{{Kind: PartitionFailFast, Start: 2 * ttl, End: 6 * ttl}}},
				{ID: "e1", Rate: 1, Windows: []Window{{Kind: PartitionFailFast, Start: 0, End: 3 * ttl / 2}}},
			},
		}
		s.End = s.FaultsEnd + 3*s.LivenessBound()
		v, _ := Check(s, Run(s))
		if !strings.Contains(strings.Join(v, "\n"), "two leaders at once") {
			t.Errorf("a clock at half speed went unnoticed; violations: %q", v)
		}
		// The same scenario within the drift bound is safe.
		s.Electors[0].Rate = 1 - s.Rho
		if v, _ := Check(s, Run(s)); len(v) > 0 {
			t.Errorf("the scenario within the drift bound failed: %q", v)
		}
	})
}

// TestCheckerRules feeds the checker hand-made histories.
func TestCheckerRules(t *testing.T) {
	s := &Scenario{TTL: time.Second, FaultsEnd: 10 * time.Second, End: 20 * time.Second,
		Electors: []ElectorPlan{{ID: "a"}, {ID: "b"}}}
	bound := s.LivenessBound()
	sec := func(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
	ok := map[string]error{"a": context.Canceled, "b": context.Canceled}
	lead := func(id string, term uint64, start, end time.Duration) Leadership {
		return Leadership{ID: id, Term: term, Start: start, End: end}
	}
	cases := []struct {
		name string
		ls   []Leadership
		errs map[string]error
		want string          // "" for no violation
		obs  []tenure.Record // what the observer saw; nil: every leadership
	}{
		{"safe handoffs", []Leadership{lead("a", 1, 0, sec(5)), lead("b", 2, sec(5), sec(12)), lead("a", 3, sec(12), sec(20))}, ok, "", nil},
		{"overlap", []Leadership{lead("a", 1, 0, sec(5)), lead("b", 2, sec(4.9), sec(20))}, ok, "two leaders at once", nil},
		{"overlap hidden behind a short term", []Leadership{lead("a", 1, 0, sec(15)), lead("b", 2, sec(1), sec(2)), lead("b", 3, sec(14), sec(20))}, ok, "two leaders at once", nil},
		{"same term twice", []Leadership{lead("a", 1, 0, sec(5)), lead("b", 1, sec(5), sec(20))}, ok, "term did not increase", nil},
		{"term going back", []Leadership{lead("a", 4, 0, sec(5)), lead("b", 3, sec(5), sec(20))}, ok, "term did not increase", nil},
		{"never done", []Leadership{lead("a", 1, 0, -1)}, ok, "still live", nil},
		{"no leader after heal", []Leadership{lead("a", 1, 0, sec(5))}, ok, "no leader at all", nil},
		{"slow recovery", []Leadership{lead("a", 1, 0, sec(5)), lead("b", 2, s.FaultsEnd+bound+1, sec(20))}, ok, "no leader from", nil},
		{"long gap later", []Leadership{lead("a", 1, 0, sec(12)), lead("b", 2, sec(12)+bound+1, sec(20))}, ok, "no leader from", nil},
		{"leaderless end", []Leadership{lead("a", 1, 0, sec(12))}, ok, "to the end", nil},
		{"Run did not stop", []Leadership{lead("a", 1, 0, sec(20))}, map[string]error{"a": context.Canceled}, "Run returned", nil},
		{"observer goes back", []Leadership{lead("a", 1, 0, sec(5)), lead("b", 2, sec(5), sec(20))}, ok, "observer went back",
			[]tenure.Record{{Holder: "a", Term: 1}, {Holder: "b", Term: 2}, {Holder: "a", Term: 1}}},
		{"observer misses a leader", []Leadership{lead("a", 1, 0, sec(5)), lead("b", 2, sec(5), sec(20))}, ok, "observer never reported b",
			[]tenure.Record{{Holder: "a", Term: 1}, {Holder: "", Term: 2}}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &History{RunErrs: c.errs, End: s.End, Observed: c.obs}
			for i := range c.ls {
				h.Leaderships = append(h.Leaderships, &c.ls[i])
				if c.obs == nil {
					h.Observed = append(h.Observed, tenure.Record{Holder: c.ls[i].ID, Term: c.ls[i].Term})
				}
			}
			v, _ := Check(s, h)
			got := strings.Join(v, "\n")
			switch {
			case c.want == "" && len(v) > 0:
				t.Errorf("unexpected violations: %s", got)
			case c.want != "" && !strings.Contains(got, c.want):
				t.Errorf("violations %q, want one containing %q", got, c.want)
			}
		})
	}
}
