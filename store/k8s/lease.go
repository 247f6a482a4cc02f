package k8s

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/token"
)

// attempts bounds how often a call re-reads a Lease after a write lost a
// race (a 409 Conflict on its resourceVersion).
const attempts = 4

// durationSeconds is the leaseDurationSeconds tenure writes for ttl: whole
// seconds rounded up, plus one. client-go compares records at one-second
// resolution (renewTime is serialised in whole seconds there), so two
// renewals within one second look like one to a client-go candidate, whose
// clock then starts up to a second before the later one; the extra second
// covers that.
func durationSeconds(ttl time.Duration) int32 {
	s := int64(ttl / time.Second)
	if ttl%time.Second > 0 {
		s++
	}
	return int32(min(s+1, math.MaxInt32))
}

// newToken returns a new grant token: 12 random bytes, hex-encoded.
func newToken() string { return token.Hex(12) }

func annotate(l *coordinationv1.Lease, g grant) {
	g.Format = grantFormat
	b, _ := json.Marshal(g)
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[GrantAnnotation] = string(b)
}

// spec sets l's spec for a grant to identity, as client-go's LeaseLock
// writes one.
func spec(l *coordinationv1.Lease, identity string, ttl time.Duration, trans int32, now time.Time) {
	d := durationSeconds(ttl)
	at := metav1.NewMicroTime(now)
	l.Spec.HolderIdentity = &identity
	l.Spec.LeaseDurationSeconds = &d
	l.Spec.AcquireTime = &at
	l.Spec.RenewTime = &at
	l.Spec.LeaseTransitions = &trans
}

// Acquire implements [tenure.Store]. It takes the latest version of the
// Lease this handle knows (from its watch or its own writes; else it reads
// it) and, if it is free (no holder, or a holder this handle has seen
// unchanged for its lease duration), writes a grant conditional on that
// resourceVersion, or creates the Lease if there is none; a held one it
// reads again before it refuses. A stale version costs a 409 Conflict and
// a read. Of concurrent candidates exactly one write succeeds; the others
// read again and return a [tenure.HeldError].
//
// A held Lease this handle has not seen before is held for the whole of
// its lease duration from now: expiry is judged only from what this handle
// saw (see the package documentation).
func (s *Store) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return s.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Store.Acquire], keeping
// c.Value in the [GrantAnnotation] with the grant. A Lease held by a
// client-go candidate has no value.
func (s *Store) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := ctxerr.Claim(ctx, s.closed.Load(), key, c); err != nil {
		return tenure.Lease{}, err
	}
	name := s.LeaseName(key)
	sent := time.Now()
	var last error
	for attempt := range attempts {
		cur, fromCache, err := s.latest(ctx, name, attempt == 0)
		now := time.Now()
		if apierrors.IsNotFound(err) {
			s.obs.Forget(name)
			l, err := s.create(ctx, key, name, c, sent)
			if apierrors.IsAlreadyExists(err) {
				last = err
				continue // another candidate created it: read it
			}
			return l, err
		}
		if err != nil {
			return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
		}
		v, ok := read(key, cur)
		if !ok {
			return tenure.Lease{}, s.foreign(key, v)
		}
		r := s.seen.Record(record(key, v, s.obs.Since(name, v.version(), now)))
		if r.Held() && fromCache {
			continue // the version this handle knows may be old news: read
		}
		if r.Held() {
			return tenure.Lease{}, &tenure.HeldError{Record: r}
		}
		l, err := s.take(ctx, key, c, cur, v, sent)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			last = err
			continue // another write came first: read again
		}
		return l, err
	}
	return tenure.Lease{}, s.fail(ctx, "acquire", key, fmt.Errorf("lost %d races for the Lease in a row: %w", attempts, last))
}

// create makes the Lease for key with a first grant to identity.
func (s *Store) create(ctx context.Context, key, name string, c tenure.Claim, sent time.Time) (tenure.Lease, error) {
	identity, ttl := c.Identity, c.TTL
	prev := s.seen.Highest(key)
	term, err := s.nextTerm(key, prev.Term)
	if err != nil {
		return tenure.Lease{}, err
	}
	g := grant{Key: key, Term: term, Holder: identity, TTL: int64(ttl), Token: newToken(), Value: c.Value}
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: s.namespace}}
	spec(l, identity, ttl, 0, time.Now())
	annotate(l, g)
	created, err := s.leases.Create(ctx, l)
	if apierrors.IsAlreadyExists(err) {
		return tenure.Lease{}, err
	}
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire (create the Lease)", key, err)
	}
	s.observeWrite(key, created)
	// The Lease is gone although this handle saw it granted: deleted from
	// outside, perhaps under a live holder, who must have stopped first.
	return s.lease(key, g, seen.WaitSince(sent, prev.TTL)), nil
}

// take writes a grant to identity over cur, the free Lease read as v.
func (s *Store) take(ctx context.Context, key string, c tenure.Claim, cur *coordinationv1.Lease, v view, sent time.Time) (tenure.Lease, error) {
	identity, ttl := c.Identity, c.TTL
	term, err := s.nextTerm(key, v.term, s.seen.Highest(key).Term)
	if err != nil {
		return tenure.Lease{}, err
	}
	g := grant{
		Key:         key,
		Term:        term,
		Transitions: v.trans + 1,
		Holder:      identity,
		TTL:         int64(ttl),
		Token:       newToken(),
		Value:       c.Value,
	}
	upd := cur.DeepCopy()
	spec(upd, identity, ttl, g.Transitions, time.Now())
	upd.Spec.PreferredHolder, upd.Spec.Strategy = nil, nil
	annotate(upd, g)
	written, err := s.leases.Update(ctx, upd)
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		s.last.Delete(cur.Name)
		return tenure.Lease{}, err
	}
	if err != nil {
		return tenure.Lease{}, s.fail(ctx, "acquire", key, err)
	}
	s.observeWrite(key, written)
	var wait time.Duration
	if v.vanished {
		// tenure's last grant lost its holder without a release: cleared
		// from outside, perhaps while its holder still leads.
		wait = seen.WaitSince(sent, v.grantTTL)
	}
	return s.lease(key, g, wait), nil
}

// nextTerm is the term after the highest of terms, or an error when that
// is the largest uint64 (written from outside): no greater term exists,
// and the wrapped term 0 would go back.
func (s *Store) nextTerm(key string, terms ...uint64) (uint64, error) {
	term, ok := seen.Next(terms...)
	if !ok {
		return 0, fmt.Errorf("%w: k8s: key %q (Lease %s, %s): term %d is the largest there is (was the %s annotation written by something else?)",
			tenure.ErrTermsExhausted, key, s.LeaseName(key), s.where, uint64(math.MaxUint64), GrantAnnotation)
	}
	return term, nil
}

func (s *Store) lease(key string, g grant, wait time.Duration) tenure.Lease {
	return tenure.Lease{Key: key, Identity: g.Holder, Term: g.Term, TTL: time.Duration(g.TTL), Token: g.Token, Wait: wait, Value: g.Value}
}

// observeWrite records a Lease version this handle wrote.
func (s *Store) observeWrite(key string, l *coordinationv1.Lease) {
	s.last.Store(l.Name, l)
	if v, ok := read(key, l); ok {
		s.seen.Record(record(key, v, s.obs.Since(l.Name, v.version(), time.Now())))
	}
}

// foreign is the error about a Lease whose annotation names another key,
// or none: an annotation with a term but no key was not written by tenure;
// or is of a format this build cannot read.
func (s *Store) foreign(key string, v view) error {
	if v.g.Format > grantFormat {
		return fmt.Errorf("k8s: key %q: Lease %s (%s): its annotation %s is of format %d, this build reads format %d (written by a newer tenure?): not taken for a free key",
			key, s.LeaseName(key), s.where, GrantAnnotation, v.g.Format, grantFormat)
	}
	if v.g.Key == "" {
		return fmt.Errorf("k8s: key %q: Lease %s (%s): its annotation %s names no key (was it written by something else?)",
			key, s.LeaseName(key), s.where, GrantAnnotation)
	}
	return fmt.Errorf("k8s: key %q: Lease %s (%s) is tenure's Lease for key %q: %w; use another key or URL prefix",
		key, s.LeaseName(key), s.where, v.g.Key, errForeignKey)
}

// holds reports whether v is the grant l.
func holds(v view, l tenure.Lease) bool {
	return v.own && v.g.Term == l.Term && v.g.Token == l.Token && v.holder == l.Identity && time.Duration(v.g.TTL) == l.TTL
}

// rewrite takes the latest version of l's Lease this handle knows (else
// reads it) and, if it still is l's grant, writes change(it) conditional
// on its resourceVersion, reading again after a lost race. Anything but
// l's grant gives an error matching ErrLost.
func (s *Store) rewrite(ctx context.Context, op string, l tenure.Lease, change func(*coordinationv1.Lease, grant)) error {
	if err := tenure.CheckKey(l.Key); err != nil {
		return err
	}
	if err := s.usable(ctx); err != nil {
		return err
	}
	name := s.LeaseName(l.Key)
	var last error
	for attempt := range attempts {
		cur, fromCache, err := s.latest(ctx, name, attempt == 0)
		if apierrors.IsNotFound(err) {
			return fmt.Errorf("%w: key %q term %d: Lease %s is gone (deleted from outside)", tenure.ErrLost, l.Key, l.Term, name)
		}
		if err != nil {
			return s.fail(ctx, op, l.Key, err)
		}
		v, ok := read(l.Key, cur)
		if (!ok || !holds(v, l)) && fromCache {
			s.last.Delete(name) // the cached version may be old news: read
			continue
		}
		if !ok || !holds(v, l) {
			return fmt.Errorf("%w: key %q term %d: Lease %s is not this grant (released, taken over after expiry, or rewritten from outside)", tenure.ErrLost, l.Key, l.Term, name)
		}
		upd := cur.DeepCopy()
		change(upd, *v.g)
		written, err := s.leases.Update(ctx, upd)
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			s.last.Delete(name)
			last = err
			continue // read again: not ours any more, or gone
		}
		if err != nil {
			return s.fail(ctx, op, l.Key, err)
		}
		s.observeWrite(l.Key, written)
		return nil
	}
	return s.fail(ctx, op, l.Key, fmt.Errorf("lost %d races for the Lease in a row: %w", attempts, last))
}

// Renew implements [tenure.Store]: if the Lease, as this handle last wrote
// or saw it, is still l's grant, it writes a new renewTime conditional on
// that resourceVersion (one request); after a 409 Conflict it reads the
// Lease and tries again if it still is l's grant. The new version restarts every observer's count of
// l's lease duration. A Lease that is gone, held by someone else, or
// rewritten from outside gives an error matching [tenure.ErrLost].
func (s *Store) Renew(ctx context.Context, l tenure.Lease) error {
	return s.rewrite(ctx, "renew", l, func(upd *coordinationv1.Lease, _ grant) {
		now := metav1.NewMicroTime(time.Now())
		d := durationSeconds(l.TTL)
		upd.Spec.RenewTime, upd.Spec.LeaseDurationSeconds = &now, &d
	})
}

// Release implements [tenure.Store]: if the Lease (as in Renew) is still
// l's grant, it clears its holder as client-go does on release (an empty
// holderIdentity, leaseDurationSeconds 1) and marks the grant released in
// the annotation, conditional on its resourceVersion.
// Candidates of either kind may take the Lease at once.
func (s *Store) Release(ctx context.Context, l tenure.Lease) error {
	return s.rewrite(ctx, "release", l, func(upd *coordinationv1.Lease, g grant) {
		empty, one := "", int32(1)
		now := metav1.NewMicroTime(time.Now())
		upd.Spec.HolderIdentity, upd.Spec.LeaseDurationSeconds, upd.Spec.RenewTime = &empty, &one, &now
		g.Released, g.Value = true, ""
		annotate(upd, g)
	})
}

// Get implements [tenure.Store] with one read of the Lease. A held Lease
// this handle has not seen before reads as held for its whole lease
// duration.
func (s *Store) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return tenure.Record{}, err
	}
	if err := s.usable(ctx); err != nil {
		return tenure.Record{}, err
	}
	name := s.LeaseName(key)
	cur, err := s.read(ctx, name)
	now := time.Now()
	if apierrors.IsNotFound(err) {
		return s.seen.Record(tenure.Record{Key: key}), nil
	}
	if err != nil {
		return tenure.Record{}, s.fail(ctx, "get", key, err)
	}
	return s.recordOf(key, cur, now)
}

// recordOf is the record of Lease cur, read at now.
func (s *Store) recordOf(key string, cur *coordinationv1.Lease, now time.Time) (tenure.Record, error) {
	v, ok := read(key, cur)
	if !ok {
		return tenure.Record{}, s.foreign(key, v)
	}
	return s.seen.Record(record(key, v, s.obs.Since(cur.Name, v.version(), now))), nil
}

// read GETs the Lease and remembers it as the latest version (or forgets
// it when it is gone).
func (s *Store) read(ctx context.Context, name string) (*coordinationv1.Lease, error) {
	cur, err := s.leases.Get(ctx, name)
	switch {
	case apierrors.IsNotFound(err):
		s.obs.Forget(name)
		s.last.Delete(name)
	case err == nil:
		s.last.Store(name, cur)
	}
	return cur, err
}

// latest returns the latest version of the Lease this handle knows if
// cached is set and it knows one (fromCache then true), else reads it.
// Writes based on it are conditional on its resourceVersion, so a stale
// version only costs a 409 Conflict and a read. Whether the version came
// from the cache is returned rather than found again by comparing with
// the cache afterwards: a watch event stores another version there at
// any moment, and a stale cached version then passed for a fresh read.
func (s *Store) latest(ctx context.Context, name string, cached bool) (l *coordinationv1.Lease, fromCache bool, err error) {
	if l := s.cached(name); cached && l != nil {
		if f := afterCachedRead; f != nil {
			f(s, name)
		}
		return l, true, nil
	}
	l, err = s.read(ctx, name)
	return l, false, err
}

// afterCachedRead, if set (by tests), runs when latest returns a cached
// version, as a watch event arriving just then would.
var afterCachedRead func(s *Store, name string)

func (s *Store) cached(name string) *coordinationv1.Lease {
	if v, ok := s.last.Load(name); ok {
		return v.(*coordinationv1.Lease)
	}
	return nil
}
