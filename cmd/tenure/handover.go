package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"syscall"

	"github.com/tenurehq/tenure"
)

// Leadership control in `tenure run`: --priority and --handover, and
// staying a candidate after a step-down. It is on for every store, and
// for the peer modes whose nodes take step-down requests (all of them:
// their nodes serve the control key and candidate slots themselves). In a
// peer mode --priority also goes into the store URL (priority=N), so the
// member announces it and the algorithm orders by it; --handover hands
// over to any other member (the algorithm picks by priority; raft: the
// follower raft picks).

const (
	priorityUsage = "campaign with priority `N`: when the key is free the highest registered priority gets a head start; 0 never leads (a standby that only observes); at most 1000"
	handoverUsage = "on SIGTERM while leading, once CMD exited, hand the key over to the best waiting candidate (highest priority; in peer modes any other member) instead of a plain release; exit once it leads (at most one TTL later)"
	yieldUsage    = "while leading, hand over to a candidate of higher --priority once this leader has seen it registered (in peer modes: live) for `DUR` without a break; on a store the leader re-reads the candidates about once per TTL, so the hand-over can come up to two TTLs after DUR (0: never)"
)

// controlFlags adds --priority and --handover to fs.
func (o *runOpts) controlFlags(fs *flag.FlagSet) {
	fs.IntVar(&o.priority, "priority", tenure.DefaultPriority, priorityUsage)
	fs.BoolVar(&o.handover, "handover", false, handoverUsage)
	fs.DurationVar(&o.yieldAfter, "yield-after", 0, yieldUsage)
}

// checkControl validates --priority and --handover; given says whether
// --priority was on the command line.
func (o *runOpts) checkControl(given bool) error {
	switch {
	case o.priority < tenure.NeverLead || o.priority > tenure.MaxPriority:
		return usageErrorf("--priority %d is out of range: want %d (never lead) to %d", o.priority, tenure.NeverLead, tenure.MaxPriority)
	case o.priority == tenure.NeverLead && (o.try || o.wait > 0):
		return usageErrorf("--priority 0 never campaigns; it cannot be combined with --try or --wait")
	case o.yieldAfter < 0 || o.yieldAfter > tenure.MaxTTL:
		return usageErrorf("--yield-after %s is out of range: want 0 to %s", o.yieldAfter, tenure.MaxTTL)
	}
	if err := checkControlledKey(o.key, o.keyFrom, "tenure run", "the control key's suffix"); err != nil {
		return err
	}
	return o.peerPriority(given)
}

// peerPriority carries --priority to a peer member: the node announces
// its priority over the peer protocol and its algorithm orders by it, so
// it goes into the store URL as priority=N. A URL that sets priority
// itself gives it to the elector too; with --priority as well, the two
// must agree. Other stores are left alone.
func (o *runOpts) peerPriority(given bool) error {
	if _, ok := peerMode(o.store.url); !ok {
		return nil
	}
	u, err := url.Parse(o.store.url)
	if err != nil {
		return nil // opening the store reports it
	}
	q, err := url.ParseQuery(u.RawQuery)
	if err != nil || !q.Has("priority") {
		if given && err == nil {
			u.RawQuery = strings.TrimPrefix(u.RawQuery+"&priority="+strconv.Itoa(o.priority), "&")
			o.store.url = u.String()
		}
		return nil
	}
	p, err := strconv.Atoi(q.Get("priority"))
	switch {
	case err != nil || p < tenure.NeverLead || p > tenure.MaxPriority:
		return usageErrorf("the peer URL's priority=%q is not an integer from %d (never lead) to %d", q.Get("priority"), tenure.NeverLead, tenure.MaxPriority)
	case given && p != o.priority:
		return usageErrorf("--priority %d and the peer URL's priority=%d disagree; give one of them", o.priority, p)
	case p == tenure.NeverLead && (o.try || o.wait > 0):
		return usageErrorf("priority 0 never campaigns; it cannot be combined with --try or --wait")
	}
	o.priority = p
	return nil
}

// control is the elector's Config.Control for store s: nil in a peer
// mode that takes no step-down, or on a store that cannot publish values
// (only test wrappers).
func (o *runOpts) control(s tenure.Store) *tenure.Control {
	if mode, peer := peerMode(o.store.url); peer && !peerStepDown[mode] {
		return nil
	}
	if _, ok := s.(tenure.Publisher); !ok {
		return nil
	}
	return &tenure.Control{Priority: o.priority, YieldAfter: o.yieldAfter}
}

// campaignAgain reports whether Do's result err, with no signal to tenure,
// means leadership ended before or while CMD ran and tenure should
// campaign again: CMD never started, or the leader stepped down on request
// (tenure step-down). It logs why.
func (r *runner) campaignAgain(ctx context.Context, err error) bool {
	if r.signalled() != 0 || ctx.Err() != nil {
		return false
	}
	switch {
	case errors.Is(err, tenure.ErrSteppedDown):
		r.logger.Info("tenure: stepped down on request; campaigning again", "key", r.opts.key, "id", r.opts.id, "err", err)
	case errors.Is(err, errNotStarted):
		r.logger.Info("tenure: leadership ended before the command could start; campaigning again",
			"key", r.opts.key, "id", r.opts.id, "err", err)
	default:
		return false
	}
	return true
}

// handOver is --handover: once CMD exited after a SIGTERM to tenure, and
// while the lease is still held, it asks for a step-down of term naming
// the best waiting candidate, so that when the elector releases the key
// only that candidate may take it for one TTL. Failing that (no candidate
// registered, a store error) the release is a plain one. In a peer mode
// the request names nobody: every member has the same priority, and the
// algorithm (raft: its leadership transfer) picks the next among the
// others while this one holds back.
func (r *runner) handOver(term *tenure.Term, log *slog.Logger) {
	if !r.opts.handover || r.signalled() != syscall.SIGTERM {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.ttl/3)
	defer cancel()
	best := tenure.Candidate{Priority: tenure.DefaultPriority} // in a peer mode: nobody named
	if _, peer := peerMode(r.opts.store.url); !peer {
		cs, err := tenure.Candidates(ctx, r.store, r.opts.key)
		var ok bool
		if best, ok = tenure.BestCandidate(cs, r.opts.id); err != nil || !ok {
			log.Info("tenure: no candidate to hand over to; releasing", "err", errString(err))
			return
		}
	}
	to := cmp.Or(best.Identity, "any other member")
	sd, err := tenure.RequestStepDown(ctx, r.store, r.opts.key, tenure.StepDownRequest{
		To: best.Identity, Window: r.opts.ttl, Issuer: r.opts.id, Term: term.Lease().Term})
	if err != nil {
		log.Info("tenure: hand-over failed; releasing", "to", to, "err", err)
		return
	}
	log.Info("tenure: handing over", "to", to, "priority", best.Priority, "window", r.opts.ttl)
	r.mu.Lock()
	r.handed = &sd
	r.mu.Unlock()
}

// awaitHandedOver is the end of --handover, once the elector released the
// key: it waits, at most the window, until another candidate leads, then
// ends the window early. tenure must not exit sooner: on a store where a
// grant ends with its process (the local store), the request would vanish
// with it, and any candidate could take the key.
func (r *runner) awaitHandedOver() {
	r.mu.Lock()
	sd := r.handed
	r.mu.Unlock()
	if sd == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), r.opts.ttl)
	defer cancel()
	rec, err := tenure.AwaitSuccessor(ctx, r.store, r.opts.key, sd.Leader.Term)
	log := r.logger.With("key", r.opts.key, "id", r.opts.id)
	if err != nil {
		log.Info("tenure: nobody took over within the hand-over window; any candidate may now", "window", r.opts.ttl)
		return
	}
	log.Info("tenure: handed over", "to", rec.Holder, "term", rec.Term)
	rctx, rcancel := context.WithTimeout(context.Background(), r.opts.ttl/3)
	defer rcancel()
	_ = r.store.Release(rctx, sd.Grant) // it may have expired already
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return fmt.Sprint(err)
}
