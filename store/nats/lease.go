package nats

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/token"
)

// attempts bounds how often Acquire reads the key again after its write
// lost a race.
const attempts = 4

// Header names of the server's.
const (
	hdrTTL    = "Nats-TTL"
	hdrReason = "Nats-Marker-Reason"
	hdrOp     = "KV-Operation"
)

// entry is the value of a grant's NATS key, JSON.
type entry struct {
	Holder string `json:"holder,omitempty"`
	// Term is 0 in the write that made the grant, whose term is its own
	// stream sequence (revision), and that term in later writes.
	Term     uint64 `json:"term,omitempty"`
	Token    string `json:"token,omitempty"`
	TTL      int64  `json:"ttl_ns,omitempty"`
	Value    string `json:"value,omitempty"`
	Released bool   `json:"released,omitempty"`
}

// state is what a read of a key found.
type state int

const (
	free     state = iota // never granted, released, or expired on the server
	held                  // a live grant
	vanished              // deleted or purged from outside, its holder unknown
)

// view is the latest message on a key's subject, interpreted.
type view struct {
	rev   uint64 // the message's stream sequence; 0 when there is none
	state state
	e     entry // with Term set to the grant's term
	// noTTL: a grant written without a server TTL, or with a longer one
	// than tenure writes for its TTL (from outside); it is judged by
	// observation.
	noTTL bool
	// left is how long the server keeps the grant, as far as this
	// process can tell.
	left time.Duration
}

// ttlSeconds is the server TTL written for a grant of ttl: whole seconds,
// rounded up, since the server truncates to whole seconds and a grant
// must never end on the server before its holder's TTL.
func ttlSeconds(ttl time.Duration) time.Duration {
	return (ttl + time.Second - 1).Truncate(time.Second)
}

// read returns the latest message of key's subject, interpreted. A value
// that is not a tenure grant gives an error naming the key.
func (s *Store) read(ctx context.Context, stream jetstream.Stream, key string) (view, error) {
	msg, err := stream.GetLastMsgForSubject(ctx, s.subject(key))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return view{}, nil
	}
	if err != nil {
		return view{}, s.fail(ctx, fmt.Sprintf("read %q", key), err)
	}
	return s.decode(key, msg.Sequence, msg.Header, msg.Data, msg.Time)
}

// decode interprets a message of key's subject.
func (s *Store) decode(key string, rev uint64, h natsgo.Header, data []byte, at time.Time) (view, error) {
	v := view{rev: rev}
	if reason, op := h.Get(hdrReason), h.Get(hdrOp); reason != "" || op != "" {
		if reason == "MaxAge" {
			return v, nil // the server's marker of an expired grant
		}
		v.state = vanished // kv.Delete, kv.Purge: an operator's
		return v, nil
	}
	if err := json.Unmarshal(data, &v.e); err != nil || v.e.Term > rev || v.e.TTL <= 0 && !v.e.Released || v.e.Holder == "" && !v.e.Released {
		return view{}, s.foreign(key, rev, data)
	}
	if v.e.Term == 0 {
		v.e.Term = rev
	}
	if v.e.Released {
		return v, nil
	}
	if floor := s.seen.Highest(key).Term; v.e.Term < floor {
		return view{}, &foreignError{fmt.Sprintf("tenure/nats: key %q (NATS key %s in bucket %s, revision %d) names a live grant of term %d, below term %d this Store saw (was it written by something else?)",
			key, s.NATSKey(key), s.bucket, rev, v.e.Term, floor)}
	}
	v.state = held
	serverTTL, err := time.ParseDuration(h.Get(hdrTTL))
	if err != nil {
		if secs, err2 := strconv.ParseUint(h.Get(hdrTTL), 10, 32); err2 == nil && secs > 0 {
			serverTTL, err = time.Duration(secs)*time.Second, nil
		}
	}
	if err != nil || serverTTL <= 0 || serverTTL > ttlSeconds(time.Duration(v.e.TTL)) {
		// Not a TTL tenure writes with this grant (none, "never", or
		// longer): written from outside, and judged by observation.
		v.noTTL = true
		return v, nil
	}
	v.left = serverTTL - time.Since(at)
	if v.left <= 0 || v.left > serverTTL {
		v.left = serverTTL // the clocks disagree: the server will say
	}
	return v, nil
}

// foreign is the error about a key whose value is not a tenure grant.
func (s *Store) foreign(key string, rev uint64, data []byte) error {
	const max = 64
	shown := strconv.Quote(string(data))
	if len(data) > max {
		shown = fmt.Sprintf("%q... (%d bytes)", data[:max], len(data))
	}
	return &foreignError{fmt.Sprintf("tenure/nats: key %q (NATS key %s in bucket %s, revision %d) holds %s, not a tenure grant (was it written by something else?)",
		key, s.NATSKey(key), s.bucket, rev, shown)}
}

// foreignError reports a key whose value is not a tenure grant.
type foreignError struct{ msg string }

func (e *foreignError) Error() string { return e.msg }

// record is the tenure record of v; a grant written without a server TTL
// is free once this Store has seen it unchanged for its TTL.
func (s *Store) record(key string, v view) tenure.Record {
	r := tenure.Record{Key: key, Term: v.e.Term}
	if v.state != held {
		return s.seen.Record(r)
	}
	ttl := time.Duration(v.e.TTL)
	left := v.left
	if v.noTTL {
		window := seen.AddSat(ttl, seen.Margin(ttl))
		unchanged := s.obs.Since(key, v.rev, time.Now())
		if unchanged >= window {
			return s.seen.Record(r)
		}
		left = window - unchanged
	}
	r.Holder, r.TTL, r.Remaining, r.Value = v.e.Holder, ttl, left, v.e.Value
	return s.seen.Record(r)
}

// publish writes e on key's subject if its latest message is rev (0: it
// has none), with a server TTL of ttl unless that is 0. It returns the
// new message's stream sequence, and ok false when the subject had moved
// on from rev.
func (s *Store) publish(ctx context.Context, key string, e entry, rev uint64, ttl time.Duration) (seq uint64, ok bool, err error) {
	data, _ := json.Marshal(e)
	opts := []jetstream.PublishOpt{jetstream.WithExpectLastSequencePerSubject(rev)}
	if ttl > 0 {
		opts = append(opts, jetstream.WithMsgTTL(ttlSeconds(ttl)))
	}
	ack, err := s.js.PublishMsg(ctx, &natsgo.Msg{Subject: s.subject(key), Data: data, Header: natsgo.Header{}}, opts...)
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
		apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return ack.Sequence, true, nil
}

// Acquire implements [tenure.Store]: it reads the key's latest message
// and, if the key is free, writes the grant conditional on that message
// still being the latest (the header Nats-Expected-Last-Subject-Sequence),
// with a server TTL of ttl rounded up to whole seconds. The term is the
// grant's stream sequence.
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], keeping
// c.Value in the grant's entry.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	ctx, done := s.link.bound(ctx)
	defer done()
	if err := ctxerr.Claim(ctx, s.closed.Load(), key, c); err != nil {
		return tenure.Lease{}, err
	}
	_, stream, err := s.usable(ctx)
	if err != nil {
		return tenure.Lease{}, err
	}
	sent := time.Now()
	if err := s.widen(ctx, key, c.TTL); err != nil {
		return tenure.Lease{}, err
	}
	for range attempts {
		v, err := s.read(ctx, stream, key)
		if err != nil {
			return tenure.Lease{}, err
		}
		r := s.record(key, v)
		if r.Held() {
			return tenure.Lease{}, &tenure.HeldError{Record: r}
		}
		wait, err := s.waitFor(ctx, key, v, c.TTL, sent)
		if err != nil {
			return tenure.Lease{}, err
		}
		e := entry{Holder: c.Identity, Token: token.Hex(12), TTL: int64(c.TTL), Value: c.Value}
		// Taken before the write: once it is made, a watch of this
		// Store may read the new grant and see its term at any moment.
		floor := s.seen.Highest(key).Term
		term, ok, err := s.publish(ctx, key, e, v.rev, c.TTL)
		if err != nil {
			return tenure.Lease{}, s.fail(ctx, fmt.Sprintf("acquire %q", key), err)
		}
		if !ok {
			continue // another write came first: read again
		}
		if f := afterGrant; f != nil {
			f(s, key)
		}
		if term <= floor {
			// Cannot happen while the bucket lives: sequences only grow.
			return tenure.Lease{}, fmt.Errorf("%w: tenure/nats: acquire %q: the bucket %s gave term %d, not above term %d this Store saw (was the bucket deleted and made again?)",
				tenure.ErrTermsExhausted, key, s.bucket, term, floor)
		}
		s.seen.Observe(key, term, c.TTL)
		l := tenure.Lease{Key: key, Identity: c.Identity, Term: term, TTL: c.TTL, Token: e.Token, Wait: wait, Value: c.Value}
		s.wrote(l, e, term)
		return l, nil
	}
	return tenure.Lease{}, s.fail(ctx, fmt.Sprintf("acquire %q", key), fmt.Errorf("lost %d races for the key in a row", attempts))
}

// afterGrant, if set (by tests), runs when Acquire's write succeeded, as
// a watch of the Store reading the new grant just then would.
var afterGrant func(s *Store, key string)

// waitFor is the Wait of a grant replacing v, sent at sent: what is left
// of the renew window of a grant that ended without its holder's release
// or expiry (deleted, purged or rewritten from outside), judged by the
// longest TTL ever granted for the key.
func (s *Store) waitFor(ctx context.Context, key string, v view, ttl time.Duration, sent time.Time) (time.Duration, error) {
	switch {
	case v.state == vanished, v.state == held: // held: written without a TTL, and now past it
	case v.rev == 0 && s.seen.Highest(key).Term > 0: // gone although this Store saw it
	default:
		return 0, nil
	}
	window, err := s.window(ctx, key)
	if err != nil {
		return 0, err
	}
	window = max(window, ttl, s.seen.Highest(key).TTL, time.Duration(v.e.TTL))
	return seen.WaitSince(sent, window), nil
}

// Renew implements [tenure.Store]: if the key's latest message is l's
// grant, it writes it again, conditional on that message still being the
// latest, with a new server TTL. When this Store wrote that message
// itself it knows its sequence, and Renew is one request; otherwise (or
// when the write finds another message there) it reads the key first.
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	return s.rewrite(ctx, "renew", l, entry{Holder: l.Identity, Term: l.Term, Token: l.Token, TTL: int64(l.TTL)}, l.TTL)
}

// Release implements [tenure.Store]: if the key's latest message is l's
// grant, it writes a released entry without a TTL in its place,
// conditional on that message still being the latest. Watchers hear of
// it at once.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	return s.rewrite(ctx, "release", l, entry{Term: l.Term, Released: true}, 0)
}

// rewrite writes e over l's grant with a server TTL of ttl (0: none) if
// the key's latest message is l's grant; anything else is ErrLost.
func (s *Store) rewrite(ctx context.Context, op string, l tenure.Lease, e entry, ttl time.Duration) error {
	ctx, done := s.link.bound(ctx)
	defer done()
	if err := ctxerr.Call(ctx, s.closed.Load(), l.Key); err != nil {
		return err
	}
	_, stream, err := s.usable(ctx)
	if err != nil {
		return err
	}
	if done, err := s.rewriteOwn(ctx, op, l, e, ttl); done || err != nil {
		return err
	}
	v, err := s.read(ctx, stream, l.Key)
	if err != nil {
		if errors.Is(err, tenure.ErrClosed) || ctxerr.Err(ctx) != nil {
			return err
		}
		var fe *foreignError
		if errors.As(err, &fe) {
			return fmt.Errorf("%w: %w", tenure.ErrLost, err)
		}
		return err
	}
	if v.state != held || v.noTTL || v.e.Holder != l.Identity || v.e.Term != l.Term || v.e.Token != l.Token || time.Duration(v.e.TTL) != l.TTL {
		return fmt.Errorf("%w: key %q term %d expired, was released, deleted or taken over", tenure.ErrLost, l.Key, l.Term)
	}
	if !e.Released {
		e.Value = v.e.Value
	}
	seq, ok, err := s.publish(ctx, l.Key, e, v.rev, ttl)
	if err != nil {
		return s.fail(ctx, fmt.Sprintf("%s %q", op, l.Key), err)
	}
	if !ok {
		return fmt.Errorf("%w: key %q term %d was written by another while this %s was under way", tenure.ErrLost, l.Key, l.Term, op)
	}
	s.wrote(l, e, seq)
	return nil
}

// own is the last write of a grant by this Store.
type own struct {
	identity, token, value string
	term                   uint64
	ttl                    time.Duration
	rev                    uint64 // its stream sequence
}

// wrote records that this Store wrote e, a write of l's grant, at seq.
func (s *Store) wrote(l tenure.Lease, e entry, seq uint64) {
	if e.Released {
		s.mine.Delete(l.Key)
		return
	}
	s.mine.Store(l.Key, own{identity: l.Identity, token: l.Token, value: e.Value, term: l.Term, ttl: l.TTL, rev: seq})
}

// rewriteOwn writes e over l's grant in one request if this Store made
// the key's latest message itself, as l's grant: the write is then
// conditional on that message's sequence, which no one else's write can
// have. It reports done false (and no error) when it did not write; the
// caller then reads the key.
func (s *Store) rewriteOwn(ctx context.Context, op string, l tenure.Lease, e entry, ttl time.Duration) (bool, error) {
	v, found := s.mine.Load(l.Key)
	if !found {
		return false, nil
	}
	w := v.(own)
	if w.identity != l.Identity || w.token != l.Token || w.term != l.Term || w.ttl != l.TTL {
		return false, nil
	}
	if !e.Released {
		e.Value = w.value
	}
	seq, ok, err := s.publish(ctx, l.Key, e, w.rev, ttl)
	if err != nil {
		return false, s.fail(ctx, fmt.Sprintf("%s %q", op, l.Key), err)
	}
	if !ok {
		return false, nil // not the latest any more: read what is
	}
	s.wrote(l, e, seq)
	return true, nil
}

// Get implements [tenure.Store] with one read of the key's latest
// message. Remaining is the server TTL of the grant's latest write less
// the time since the server stamped it, by this process's clock (the
// whole server TTL when the clocks disagree).
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	ctx, done := s.link.bound(ctx)
	defer done()
	if err := ctxerr.Call(ctx, s.closed.Load(), key); err != nil {
		return tenure.Record{}, err
	}
	_, stream, err := s.usable(ctx)
	if err != nil {
		return tenure.Record{}, err
	}
	v, err := s.read(ctx, stream, key)
	if err != nil {
		return tenure.Record{}, err
	}
	return s.record(key, v), nil
}
