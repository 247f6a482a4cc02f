package tenure

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Candidate is one candidate registered for a key by an elector with
// [Config.Control].
//
// The [Store] contract cannot list keys, so registration uses a fixed set
// of [CandidateSlots] keys derived from the key: each elector holds one
// slot while Run or Do runs, with a lease of three times its TTL (at most
// the store's longest) renewed every third of that, about once per TTL (a
// leader renews it with its key, at most one renew interval late), and
// publishes its priority and start time as the slot's value. A
// candidate that dies drops out when its slot expires (on a store that
// ties leases to processes, such as the local one, at once). Each elector
// re-reads the slots with each renewal of its own slot, to learn the
// others' priorities, except while it leads without
// [Control.YieldAfter]: nothing of its own needs them then, so a leader
// re-reads them only once it campaigns again.
type Candidate struct {
	Identity string
	Priority int
	// Since is when the candidate registered, on its own clock.
	Since time.Time
	// Remaining is how long its registration lasts unless renewed.
	Remaining time.Duration
}

// candidatePrefix starts the value of a registration slot.
const candidatePrefix = "candidate"

func encodeCandidate(priority int, since time.Time) string {
	return fmt.Sprintf("%s %d %d", candidatePrefix, priority, since.UnixMilli())
}

// parseCandidate decodes r, a record of a registration slot; ok is false
// when it holds no live registration, or one no elector could have
// written: a priority outside [NeverLead, MaxPriority] (a value written
// into the store from outside would otherwise rank above every real
// candidate in the list and as a hand-over target), a registration time
// outside the years 1 to 9999, which no clock shows and which neither JSON
// nor RFC 3339 can carry, or an identity [CheckAcquire] refuses (megabytes
// long, control characters, not UTF-8).
func parseCandidate(r Record) (Candidate, bool) {
	if !r.Held() || checkName("identity", r.Holder, MaxIdentityLen) != nil {
		return Candidate{}, false
	}
	f := strings.Fields(r.Value)
	if len(f) != 3 || f[0] != candidatePrefix {
		return Candidate{}, false
	}
	p, err1 := strconv.Atoi(f[1])
	ms, err2 := strconv.ParseInt(f[2], 10, 64)
	since := time.UnixMilli(ms)
	if err1 != nil || err2 != nil || p < NeverLead || p > MaxPriority || since.Year() < 1 || since.Year() > 9999 {
		return Candidate{}, false
	}
	return Candidate{Identity: r.Holder, Priority: p, Since: since, Remaining: r.Remaining}, true
}

// Candidates returns the candidates registered for key, best first:
// highest priority, then most recently registered (in a rolling restart,
// the one restarted last, already updated, so that a hand-over to it is
// the last move), then by identity. It reads the [CandidateSlots] slots
// one by one, so the list is not a snapshot of one instant. It blocks for
// those reads and returns the first error. A derived key ([BaseKey]) has
// no candidates of its own: Candidates refuses it, before reading
// anything, with an error wrapping [ErrInvalid] that names its base key.
func Candidates(ctx context.Context, r Reader, key string) ([]Candidate, error) {
	if err := checkContext(ctx, "Candidates"); err != nil {
		return nil, err
	}
	if err := checkStore(r, "Candidates"); err != nil {
		return nil, err
	}
	if err := checkNotDerived("key", key); err != nil {
		return nil, err
	}
	var out []Candidate
	seen := map[string]bool{}
	for i := range CandidateSlots {
		rec, err := r.Get(ctx, candidateKey(key, i))
		if err != nil {
			return nil, err
		}
		if c, ok := parseCandidate(rec); ok && !seen[c.Identity] {
			seen[c.Identity] = true
			out = append(out, c)
		}
	}
	slices.SortFunc(out, func(a, b Candidate) int {
		return cmp.Or(cmp.Compare(b.Priority, a.Priority), b.Since.Compare(a.Since), cmp.Compare(a.Identity, b.Identity))
	})
	return out, nil
}

// BestCandidate returns the first candidate of cs (as [Candidates] sorts
// them) that is not except and may lead (priority above [NeverLead]).
func BestCandidate(cs []Candidate, except string) (Candidate, bool) {
	for _, c := range cs {
		if c.Identity != except && c.Priority > NeverLead {
			return c, true
		}
	}
	return Candidate{}, false
}

// register keeps this elector registered in a candidate slot and, while
// something of its own needs them, its list of the other candidates fresh
// (see [Candidate]), until the returned func is called (it waits for that,
// and releases the slot). It registers and reads the list once before it
// returns, so that priorities count from the first election; that blocks
// for up to CandidateSlots+1 store requests. Without Config.Control it does
// nothing.
func (e *Elector) register(ctx context.Context) (stop func()) {
	if e.cfg.Control == nil {
		return func() {}
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	since := e.cfg.Clock.Now()
	slot := e.registerOnce(ctx, Lease{}, since)
	done := make(chan struct{})
	go func() {
		defer close(done)
		period := e.slotTTL() / slotRenewals
		t := e.cfg.Clock.NewTimer(period)
		defer t.Stop()
		for e.awaitSlot(ctx, t, e.cfg.Clock.Now().Add(period), period) {
			slot = e.registerOnce(ctx, slot, since)
		}
		if slot.Key != "" {
			e.release(ctx, slot)
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

// A registration slot is held with a lease of slotTTLs times the
// elector's TTL (at most the store's longest TTL), renewed slotRenewals
// times per slot TTL. Registration is advisory (priorities, hand-over
// targets): a longer slot lease only keeps a candidate that died without
// releasing it listed for longer, and saves two of three renewals.
const (
	slotTTLs     = 3
	slotRenewals = 3
)

// awaitSlot waits, on t, until due, when the registration goroutine
// renews its slot next, and reports false if ctx ended first. An elector
// that leads when it starts waiting renews the slot with the key instead:
// at the key's first renewal from due on, or one renew interval (jittered,
// at most half a period) after due if none came, so that the process wakes
// once for both; the slot's lease lasts three periods. In an idle leader a
// wake-up costs about as much as the renewal it serves
// (docs/measurements.md).
func (e *Elector) awaitSlot(ctx context.Context, t Timer, due time.Time, period time.Duration) bool {
	c := &e.cfg
	wait := due.Sub(c.Clock.Now())
	if e.Status().Leading {
		wait += min(c.longestRenewInterval(), period/2)
	}
	rearm(t, wait)
	for {
		select {
		case <-ctx.Done():
			return false
		case <-t.C():
			return true
		case <-e.ctl.keyRenewed:
			if !c.Clock.Now().Before(due) {
				return true
			}
		}
	}
}

// slotTTL is the TTL of this elector's registration slot.
func (e *Elector) slotTTL() time.Duration {
	_, hi := TTLBounds(e.cfg.Store)
	return max(e.cfg.TTL, min(slotTTLs*e.cfg.TTL, hi))
}

// registerOnce renews slot, or takes one if it has none or lost it, then
// re-reads the other candidates unless this elector leads without
// YieldAfter (see needList). It returns the slot held, if any.
func (e *Elector) registerOnce(ctx context.Context, slot Lease, since time.Time) Lease {
	if slot.Key != "" {
		if err := e.renewSlot(ctx, slot); errors.Is(err, ErrLost) {
			slot = Lease{}
		}
	}
	if slot.Key == "" {
		slot, _ = e.takeSlot(ctx, since)
	}
	e.readPreference(ctx)
	if e.needList() {
		e.listOthers(ctx, true)
	} else {
		e.ctl.stale.Store(true)
	}
	return slot
}

// needList reports whether the registration goroutine should re-read the
// other candidates now: while this elector campaigns (the head start of
// higher priorities counts them), leads with YieldAfter (it yields to
// them), or leads while a preference names another candidate (it hands
// over once that one is registered). Otherwise a leader marks its list
// stale, and beforeAcquire reads it again once it campaigns again.
func (e *Elector) needList() bool {
	if p, ok := e.ctl.preferred(); ok && p.Holder != e.cfg.Identity {
		return true
	}
	return e.cfg.Control.YieldAfter > 0 || !e.Status().Leading
}

// readPreference reads the key's preferred holder (see [Prefer]) and
// records it; on an error it keeps the last one read.
func (e *Elector) readPreference(ctx context.Context) {
	if _, peer := e.cfg.Store.(StepDowner); peer {
		return // no shared key to hold a preference in: priorities do it there
	}
	rctx, cancel := e.requestContext(ctx, time.Time{})
	p, ok, err := ReadPreference(rctx, e.cfg.Store, e.cfg.Key)
	cancel()
	if err != nil {
		e.controlError(err)
		return
	}
	e.ctl.setPreference(p, ok)
}

// listOthers reads the other registered candidates and records them (see
// controlState.setOthers); with yield, from the registration goroutine
// only, it also applies YieldAfter. It blocks for CandidateSlots store
// requests; on an error it keeps the last list.
func (e *Elector) listOthers(ctx context.Context, yield bool) {
	c := &e.cfg
	rctx, cancel := e.requestContext(ctx, time.Time{})
	cs, err := Candidates(rctx, c.Store, c.Key)
	cancel()
	if err != nil {
		return
	}
	others := slices.DeleteFunc(cs, func(x Candidate) bool { return x.Identity == c.Identity })
	e.ctl.setOthers(others)
	if yield {
		e.maybeYield(ctx, others)
	}
}

// maybeYield is Control.YieldAfter: called with the other candidates each
// time they are read, it asks this leader to step down in favour of the
// best one of a higher priority seen registered for YieldAfter.
func (e *Elector) maybeYield(ctx context.Context, others []Candidate) {
	c := &e.cfg
	now := c.Clock.Now()
	seen := map[string]time.Time{}
	for _, o := range others {
		first, ok := e.ctl.firstSeen[o.Identity]
		if !ok {
			first = now
		}
		seen[o.Identity] = first
	}
	e.ctl.firstSeen = seen
	st := e.Status()
	if !st.Leading {
		return
	}
	if to, why, ok := e.yieldTarget(now, others, seen); ok {
		rctx, cancel := e.requestContext(ctx, time.Time{})
		_, err := RequestStepDown(rctx, c.Store, c.Key, StepDownRequest{To: to.Identity, Window: c.TTL, Issuer: c.Identity, Term: st.Term})
		cancel()
		c.Logger.Info("tenure: yielding to "+why, "key", c.Key, "id", c.Identity,
			"term", st.Term, "to", to.Identity, "priority", to.Priority, "err", err)
	}
}

// yieldTarget picks whom a leader hands over to, among the other
// registered candidates (best first) seen registered since seen: the
// key's preferred holder once seen for the preference's delay (one TTL by
// default), unless it never leads; else, with YieldAfter, the best one of
// a higher priority seen for YieldAfter. The preferred holder never yields
// to priorities.
func (e *Elector) yieldTarget(now time.Time, others []Candidate, seen map[string]time.Time) (Candidate, string, bool) {
	c := &e.cfg
	if p, ok := e.ctl.preferred(); ok {
		if p.Holder == c.Identity {
			return Candidate{}, "", false
		}
		delay := cmp.Or(p.Delay, c.TTL)
		for _, o := range others {
			if o.Identity == p.Holder && o.Priority != NeverLead && now.Sub(seen[o.Identity]) >= delay {
				return o, "the key's preferred holder", true
			}
		}
	}
	if c.Control.YieldAfter <= 0 {
		return Candidate{}, "", false
	}
	for _, o := range others {
		if o.Priority <= c.Control.Priority {
			break
		}
		if now.Sub(seen[o.Identity]) >= c.Control.YieldAfter {
			return o, "a candidate of higher priority", true
		}
	}
	return Candidate{}, "", false
}

// takeSlot acquires a free registration slot, trying them in an order
// derived from the identity, so that candidates rarely contend.
func (e *Elector) takeSlot(ctx context.Context, since time.Time) (Lease, error) {
	c := &e.cfg
	p, ok := c.Store.(Publisher)
	if !ok {
		return Lease{}, invalidf("the store cannot publish values")
	}
	h := fnv.New32a()
	h.Write([]byte(c.Identity))
	first := int(h.Sum32() % CandidateSlots)
	claim := Claim{Identity: c.Identity, TTL: e.slotTTL(), Value: encodeCandidate(c.Control.Priority, since)}
	var err error
	for i := range CandidateSlots {
		rctx, cancel := e.requestContext(ctx, time.Time{})
		var l Lease
		l, err = p.AcquireClaim(rctx, candidateKey(c.Key, (first+i)%CandidateSlots), claim)
		cancel()
		if err == nil {
			return l, nil
		}
		if !errors.Is(err, ErrHeld) {
			e.controlError(err)
			return Lease{}, err
		}
	}
	c.Logger.Debug("tenure: every candidate slot is taken; campaigning unregistered", "key", c.Key, "id", c.Identity)
	return Lease{}, err
}

func (e *Elector) renewSlot(ctx context.Context, l Lease) error {
	rctx, cancel := e.requestContext(ctx, time.Time{})
	defer cancel()
	return e.cfg.Store.Renew(rctx, l)
}
