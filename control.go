package tenure

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Leadership control: step down, hand over to a named candidate, priority
// and candidate registration, built on the ordinary [Store] contract (no
// store method of its own), so it works on every store that serves more
// than one key and publishes values. Peer stores (one key per node, no
// shared state to hold a control key in) implement [StepDowner] instead:
// the request travels to the leader's node, which serves the control key
// and the candidate slots of its key itself, from what its members know,
// so that an elector with [Config.Control] obeys unchanged.
//
// A step-down is a grant of the key's control key ([ControlKey]) whose
// published value names the term asked to step down and the candidate to
// hand over to. The grant's TTL is the hand-over window: while it is live,
// only the named candidate may take the key (any candidate but the one that
// stepped down, when none is named). It is advisory, between cooperating
// electors with [Config.Control] set: an elector without it ignores it.

// Derived keys. A key used with [Config.Control] must leave room for the
// longest suffix within [MaxKeyLen]: at most [MaxControlledKeyLen] bytes.
// The derived keys are reserved: [Config.Validate], [RequestStepDown] and
// [Prefer] refuse a key that is one of them (see [BaseKey]), and so do
// [Candidates] and [ReadPreference], which would read keys derived from
// it that nobody writes. A plain read of a derived key's own record
// ([Reader.Get], an [Observer]) stays allowed: it is a diagnostic of the
// raw record.
const (
	// ControlSuffix is appended to a key to name its control key. A key
	// ending in it (after at least one byte) is reserved.
	ControlSuffix = "~tenure-control"
	// CandidateSuffix, followed by a two-digit slot number, names the key's
	// candidate registration slots. A key ending in it and 00 to
	// [CandidateSlots]-1 (after at least one byte) is reserved.
	CandidateSuffix = "~tenure-candidate-"
	// CandidateSlots is how many candidates can be registered for one key
	// at once; candidates beyond it still campaign but are not listed, and
	// their priority is unknown to the others.
	CandidateSlots = 16
	// MaxControlledKeyLen is the longest key [Config.Control] accepts.
	MaxControlledKeyLen = MaxKeyLen - len(CandidateSuffix) - 2
)

// Priorities of [Control.Priority].
const (
	// NeverLead is the priority of a candidate that never leads: it
	// registers and observes but never asks for the key.
	NeverLead = 0
	// DefaultPriority is the priority `tenure run` uses by default.
	DefaultPriority = 1
	// MaxPriority is the highest priority.
	MaxPriority = 1000
)

// DefaultStepDownWindow is the hand-over window of a [StepDownRequest]
// that sets none.
const DefaultStepDownWindow = 10 * time.Second

// ControlKey returns the control key of key: key + [ControlSuffix].
func ControlKey(key string) string { return key + ControlSuffix }

// candidateKey returns the key of registration slot i of key.
func candidateKey(key string, i int) string {
	return fmt.Sprintf("%s%s%02d", key, CandidateSuffix, i)
}

// BaseKey reports whether key is one of the keys leadership control keeps
// beside another key, base: its control key ([ControlKey]), its preference
// key ([PreferKey]) or one of its candidate slots (a two-digit number below
// [CandidateSlots] after [CandidateSuffix]). what names which, for messages:
// "the control key", "the preference key" or "candidate slot NN". A key
// that is only a suffix ("~tenure-control") or only looks alike
// ("job~tenure-candidate-3") is not one: ok is false.
func BaseKey(key string) (base, what string, ok bool) {
	if b, ok := strings.CutSuffix(key, ControlSuffix); ok && b != "" {
		return b, "the control key", true
	}
	if b, ok := strings.CutSuffix(key, PreferSuffix); ok && b != "" {
		return b, "the preference key", true
	}
	if i := strings.LastIndex(key, CandidateSuffix); i > 0 {
		slot := key[i+len(CandidateSuffix):]
		if len(slot) == 2 && isDigit(slot[0]) && isDigit(slot[1]) && int(slot[0]-'0')*10+int(slot[1]-'0') < CandidateSlots {
			return key[:i], "candidate slot " + slot, true
		}
	}
	return "", "", false
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// checkNotDerived returns an error wrapping ErrInvalid, naming field, key
// and its base, if key is a derived key ([BaseKey]).
func checkNotDerived(field, key string) error {
	if base, what, ok := BaseKey(key); ok {
		return invalidf("%s %q is %s of %q, reserved by leadership control; use %q", field, key, what, base, base)
	}
	return nil
}

// Control opts an elector in to leadership control (see [Config.Control]).
// Its zero value is a candidate of priority [NeverLead]: set Priority.
//
// Costs: [Elector.Run] and [Elector.Do] first register the candidate
// (up to [CandidateSlots]+1 store requests) before campaigning; then each
// candidate renews its slot (a lease of three TTLs) and re-reads the
// slots about once per TTL, except a leader without YieldAfter, which
// reads them again only once it campaigns; each Acquire attempt is
// preceded by a read of the control key; a candidate held back by a
// step-down reads the key about once per TTL; a leader keeps a watch of
// the control key open; every candidate reads the key's preference (see
// [Prefer]) once per TTL, and a leader also reads the slots while a
// preference names another candidate.
type Control struct {
	// Priority ranks this candidate, from [NeverLead] (0: never campaigns;
	// Run and Do then only register and block until their context is
	// done; the key stays free if only such candidates are left) to
	// [MaxPriority]. When the key is free, a candidate waits Step for every
	// distinct priority above its own among the other registered
	// candidates before it asks for it, so the highest priority that is
	// alive usually wins. It is a head start, not a guarantee: a candidate
	// whose request takes longer than Step, or whose registration is not
	// yet seen (registrations are re-read about once per TTL),
	// can lose to a lower one. It never preempts a leader.
	Priority int
	// Step is the head start given per priority rank. Zero gives
	// [Config.RetryInterval], read when the head start is taken:
	// [Config.WithDefaults] and [Elector.Config] leave it zero.
	Step time.Duration
	// YieldAfter, if positive, makes this elector, while it leads, hand
	// over (as [RequestStepDown] does, with a window of one TTL) to the
	// best registered candidate of a higher priority once it has seen that
	// candidate registered for YieldAfter without a break: the way to
	// prefer a holder, with a delay so that a flapping candidate does not
	// bounce leadership. It is checked when the candidates are re-read,
	// about once per TTL, and counts from the first re-read that shows the
	// candidate, itself up to about a TTL after it registered: so the
	// hand-over comes up to about two TTLs after YieldAfter, counted from
	// the registration. Default 0: a leader keeps leading.
	YieldAfter time.Duration
}

// validateControl checks c.Control; Validate calls it.
func (c Config) validateControl() error {
	ctl := c.Control
	if ctl == nil {
		return nil
	}
	switch {
	case ctl.Priority < NeverLead || ctl.Priority > MaxPriority:
		return invalidf("Config.Control.Priority (%d) must be from %d to %d", ctl.Priority, NeverLead, MaxPriority)
	case ctl.Step < 0 || ctl.Step > c.TTL:
		return invalidf("Config.Control.Step (%s) must be from 0 to Config.TTL (%s)", ctl.Step, c.TTL)
	case ctl.YieldAfter < 0 || ctl.YieldAfter > MaxTTL:
		return invalidf("Config.Control.YieldAfter (%s) must be from 0 to %s", ctl.YieldAfter, MaxTTL)
	case len(c.Key) > MaxControlledKeyLen:
		return invalidf("Config.Key is %d bytes; with Config.Control it may be at most %d, to leave room for %q",
			len(c.Key), MaxControlledKeyLen, CandidateSuffix+"00")
	}
	if _, ok := c.Store.(Publisher); !ok {
		return invalidf("Config.Control is set but the store (%T) cannot publish values", c.Store)
	}
	return nil
}

// controlGrant is a decoded, live step-down grant.
type controlGrant struct {
	ctlTerm   uint64        // the control key's term: identifies this request
	term      uint64        // the term of the key asked to step down
	to        string        // the candidate to hand over to; "" for any
	remaining time.Duration // of the window
}

// controlPrefix starts the value of a step-down grant.
const controlPrefix = "step-down"

func encodeControl(term uint64, to string) string {
	return controlPrefix + " " + strconv.FormatUint(term, 10) + " " + to
}

// parseControl decodes r, a record of a control key; ok is false when it
// holds no live step-down grant.
func parseControl(r Record) (g controlGrant, ok bool) {
	if !r.Held() {
		return g, false
	}
	parts := strings.SplitN(r.Value, " ", 3)
	if len(parts) != 3 || parts[0] != controlPrefix {
		return g, false
	}
	term, err := strconv.ParseUint(parts[1], 10, 64)
	if err != nil {
		return g, false
	}
	return controlGrant{ctlTerm: r.Term, term: term, to: parts[2], remaining: r.Remaining}, true
}

// StepDownRequest is what [RequestStepDown] asks for.
type StepDownRequest struct {
	// To names the candidate to hand over to; "" lets any candidate but
	// the leader take over.
	To string
	// Window is how long other candidates hold back: after it, any
	// candidate may take the key, so a transfer to a candidate that is
	// dead or absent falls back by itself. It ends early for a candidate
	// that sees the key taken in a later term than the one asked to step
	// down (the hand-over is done): if the new leader then stops or dies,
	// the others need not wait for the rest of the window. Default
	// [DefaultStepDownWindow].
	Window time.Duration
	// Issuer is the identity the request is granted to, shown as the
	// control key's holder. Default "tenure-step-down".
	Issuer string
	// Term, if not zero, is the term asked to step down; default: the
	// term of the key's current holder.
	Term uint64
}

// StepDown is a granted step-down request.
type StepDown struct {
	// Leader is the key's record the request was made against.
	Leader Record
	// Grant is the control key's grant; release it (Store.Release) once
	// the hand-over is done to end the window early, or let it expire.
	Grant Lease
}

// StepDowner is an optional ability of a [Store] that cannot hold a
// control key in shared state (the peer stores: package peer): it carries
// a step-down request to the key's leader itself. [RequestStepDown] calls
// it, with req's defaults applied and checked, when s implements it.
// Wrappers of such a store must forward it.
//
// The leader's store then serves the request as the record of
// [ControlKey](key) on the leader's own node (Holder req.Issuer, Term a
// number identifying the request, TTL and Remaining the window, Value
// [StepDownValue]), so that its elector with [Config.Control] cancels the
// task with [ErrSteppedDown] and releases, as on any store. The returned
// StepDown's Grant names that record; releasing it may be a no-op.
type StepDowner interface {
	RequestStepDown(ctx context.Context, key string, req StepDownRequest) (StepDown, error)
}

// StepDownValue is the value of a control key's record that asks the
// leader of term to step down, handing over to candidate to ("" for any
// other): what [RequestStepDown] publishes, for a [StepDowner] to serve.
func StepDownValue(term uint64, to string) string { return encodeControl(term, to) }

// CandidateValue is the value of a candidate registration slot (see
// [Candidates]) for a candidate of priority registered since since: for a
// store that serves the slots itself (a [StepDowner]).
func CandidateValue(priority int, since time.Time) string { return encodeCandidate(priority, since) }

// RequestStepDown asks the current leader of key to step down, handing
// over to req.To. It returns once the request is granted in the store, not
// once the leader stepped down: follow the key (see [AwaitSuccessor]) for
// that. Electors with [Config.Control] see the request through a watch of
// the control key; the leader cancels its task with cause
// [ErrSteppedDown], waits for it to return and releases the key, so its
// task stops before the successor's starts. It keeps campaigning, holding
// back for the window.
//
// The request is a grant of s, held by req.Issuer: on a store whose grants
// end with their process or handle (the local store), the window ends
// when s is closed or the process exits, so keep both until the successor
// leads ([AwaitSuccessor]).
//
// On a [StepDowner] (a peer store) the request is the store's to carry:
// see there.
//
// It returns an error matching [ErrNoLeader] if nobody holds key (and
// req.Term is 0), a *[HeldError] wrapped with context if another step-down
// of key is under way, and an error wrapping [ErrInvalid] for bad
// arguments or a store that cannot publish values. It blocks for two store
// requests and is safe for concurrent use.
func RequestStepDown(ctx context.Context, s Store, key string, req StepDownRequest) (StepDown, error) {
	if err := checkContext(ctx, "RequestStepDown"); err != nil {
		return StepDown{}, err
	}
	if err := checkStore(s, "RequestStepDown"); err != nil {
		return StepDown{}, err
	}
	if req.Window == 0 {
		req.Window = DefaultStepDownWindow
	}
	if req.Issuer == "" {
		req.Issuer = "tenure-step-down"
	}
	if err := checkStepDown(key, req); err != nil {
		return StepDown{}, err
	}
	if sd, ok := s.(StepDowner); ok {
		return sd.RequestStepDown(ctx, key, req)
	}
	p, ok := s.(Publisher)
	if !ok {
		return StepDown{}, invalidf("step-down needs a store that publishes values; %T does not", s)
	}
	var sd StepDown
	rec, err := s.Get(ctx, key)
	if err != nil {
		return sd, err
	}
	sd.Leader = rec
	if req.Term == 0 {
		if !rec.Held() {
			return sd, fmt.Errorf("%w: nobody leads %q", ErrNoLeader, key)
		}
		req.Term = rec.Term
	}
	claim := Claim{Identity: req.Issuer, TTL: req.Window, Value: encodeControl(req.Term, req.To)}
	sd.Grant, err = p.AcquireClaim(ctx, ControlKey(key), claim)
	var held *HeldError
	if errors.As(err, &held) {
		return sd, fmt.Errorf("another step-down of %q is under way for %s: %w", key, held.Record.Remaining.Round(time.Millisecond), err)
	}
	return sd, err
}

func checkStepDown(key string, req StepDownRequest) error {
	if err := checkControlledKey(key); err != nil {
		return err
	}
	if req.To != "" {
		if err := checkName("step-down target", req.To, MaxIdentityLen); err != nil {
			return err
		}
	}
	if req.Window < MinTTL || req.Window > MaxTTL {
		return invalidf("step-down window %s must be from %s to %s", req.Window, MinTTL, MaxTTL)
	}
	return CheckAcquire(ControlKey(key), req.Issuer, req.Window)
}

// checkControlledKey checks key as a key of leadership control: a valid
// key, not itself a derived key ([BaseKey]), with room for the longest
// derived key's suffix.
func checkControlledKey(key string) error {
	if err := CheckKey(key); err != nil {
		return err
	}
	if err := checkNotDerived("key", key); err != nil {
		return err
	}
	if len(key) > MaxControlledKeyLen {
		return invalidf("key is %d bytes; leadership control needs at most %d", len(key), MaxControlledKeyLen)
	}
	return nil
}

// AwaitSuccessor follows key until a candidate holds a term later than
// term and returns its record. It blocks until then or until ctx is done
// (then it returns ctx's error); a watch that ends is set up again.
func AwaitSuccessor(ctx context.Context, r Reader, key string, term uint64) (Record, error) {
	if err := checkContext(ctx, "AwaitSuccessor"); err != nil {
		return Record{}, err
	}
	if err := checkStore(r, "AwaitSuccessor"); err != nil {
		return Record{}, err
	}
	for {
		ch, err := r.Watch(ctx, key)
		if err != nil {
			if ctx.Err() != nil {
				return Record{}, ctx.Err()
			}
			if !sleep(ctx, SystemClock, 100*time.Millisecond) {
				return Record{}, ctx.Err()
			}
			continue
		}
		for rec := range ch {
			if rec.Held() && rec.Term > term {
				return rec, nil
			}
		}
		if ctx.Err() != nil {
			return Record{}, ctx.Err()
		}
	}
}
