package k8s

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"math"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/seen"
)

// GrantAnnotation is the Lease annotation in which tenure keeps its term
// and the identity of its last grant. client-go's LeaseLock keeps
// annotations when it updates a Lease, so the term survives grants by
// client-go candidates.
const GrantAnnotation = "tenurehq.github.io/grant"

// grant is the value of [GrantAnnotation]: the last grant tenure made on
// the Lease.
type grant struct {
	// Key is the tenure key the Lease stands for, so that two keys that
	// map to one name are told apart.
	Key  string `json:"key"`
	Term uint64 `json:"term"`
	// Transitions is the Lease's leaseTransitions as this grant wrote it:
	// every grant, tenure's or client-go's, adds one, so a higher value
	// means grants tenure did not make.
	Transitions int32  `json:"transitions"`
	Holder      string `json:"holder"`
	TTL         int64  `json:"ttlNanos"`
	// Token is random per grant: a Lease rewritten from outside, or
	// deleted and created again, does not carry it.
	Token    string `json:"token"`
	Released bool   `json:"released,omitempty"`
	// Value is the value published with the grant; absent when none was,
	// and cleared on release. A client-go candidate publishes none.
	Value string `json:"value,omitempty"`
	// Format is the annotation's format (see grantFormat); absent, 0, in
	// annotations of builds before it, which read as format 1.
	Format int `json:"format,omitempty"`
}

// grantFormat is the format of the annotations this build writes, and
// the highest it reads. A change that older builds would misread (the
// term under another name, a field given another meaning) must write a
// higher one: builds from this one on then refuse the Lease, in an error
// naming the key and the format, instead of reading it as a Lease only
// client-go wrote, at its leaseTransitions+1, which may be far below the
// key's term. Builds before it never check it, so such a change must
// still keep holderIdentity and the Lease's renewals as client-go's.
const grantFormat = 1

// leaseName is the Lease that stands for key: prefix+key when that is a
// valid object name (so a Lease a client-go candidate knows by name can be
// shared by using its name as the key), else a readable form of the key
// followed by a hash of it. The key is also kept in the annotation, and a
// Lease whose annotation names another key is an error, never a grant.
func leaseName(prefix, key string) string {
	if n := prefix + key; isSubdomain(n) {
		return n
	}
	sum := sha256.Sum256([]byte(key))
	suffix := "-" + hex.EncodeToString(sum[:5])
	var b strings.Builder
	for _, r := range strings.ToLower(key) {
		switch {
		case r < 128 && alnum(byte(r)):
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	readable := strings.Trim(b.String(), "-")
	if room := maxName - len(prefix) - len(suffix); len(readable) > room {
		readable = strings.TrimRight(readable[:room], "-")
	}
	if readable == "" {
		readable = "key"
	}
	return prefix + readable + suffix
}

// view is what tenure reads in a Lease.
type view struct {
	rv, uid string
	holder  string
	// dur is how long an observer must see the Lease unchanged before the
	// holder's grant has expired.
	dur time.Duration
	// ttl is the TTL of the current grant (its leaseDurationSeconds for a
	// grant tenure did not make).
	ttl   time.Duration
	term  uint64
	trans int32
	g     *grant // the annotation, or nil
	// own: the current holder is the grant the annotation describes.
	own bool
	// vanished: the annotation describes a tenure grant that is neither
	// held nor released: its holder was cleared from outside.
	vanished bool
	// grantTTL is the TTL of the annotation's grant, as own and vanished
	// judge it (see grantTTL).
	grantTTL time.Duration
}

// defaultForeignDuration is the lease duration assumed for a Lease held
// without a leaseDurationSeconds (nobody writes one; client-go's default).
const defaultForeignDuration = 15 * time.Second

// read interprets l. A Lease whose annotation names another key, or is
// of a format above grantFormat, gives ok false.
func read(key string, l *coordinationv1.Lease) (v view, ok bool) {
	v.rv, v.uid = l.ResourceVersion, string(l.UID)
	if h := l.Spec.HolderIdentity; h != nil {
		v.holder = *h
	}
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 {
		v.dur = time.Duration(*d) * time.Second
	} else {
		v.dur = defaultForeignDuration
	}
	v.ttl = v.dur
	if t := l.Spec.LeaseTransitions; t != nil {
		v.trans = *t
	}
	if raw, found := l.Annotations[GrantAnnotation]; found {
		var g grant
		err := json.Unmarshal([]byte(raw), &g)
		if err == nil && g.Format > grantFormat {
			v.g = &g
			return v, false
		}
		if err == nil && g.Term > 0 {
			v.g = &g
		}
	}
	if v.g == nil {
		// Only client-go (or another tool) wrote it: one term per grant
		// it counted, and the Lease's first grant is term 1.
		v.term = uint64(max(v.trans, 0)) + 1
		return v, true
	}
	if v.g.Key != key {
		return v, false
	}
	v.term = v.g.Term
	if v.trans > v.g.Transitions {
		// Saturating: a term written near the largest uint64 from outside
		// must not wrap to a small one (Acquire then refuses to grant).
		v.term += min(uint64(int64(v.trans)-int64(v.g.Transitions)), math.MaxUint64-v.term)
	}
	sameGrant := v.trans == v.g.Transitions
	v.own = sameGrant && v.holder != "" && v.holder == v.g.Holder
	v.vanished = sameGrant && v.holder == "" && !v.g.Released
	v.grantTTL = grantTTL(*v.g, l)
	if v.own {
		v.dur, v.ttl = v.grantTTL, v.grantTTL
	}
	return v, true
}

// grantTTL is the TTL by which g, the grant of l's annotation, is judged:
// g's own, unless l's leaseDurationSeconds is not the one tenure writes
// with it, so that one of the two was edited from outside; then the
// longer of the two. A TTL of 1 ns, 0 or less written into the annotation
// alone would otherwise end a live grant at once, and another candidate
// would take the key, without a Wait, while its holder still leads.
func grantTTL(g grant, l *coordinationv1.Lease) time.Duration {
	ttl := time.Duration(g.TTL)
	if d := l.Spec.LeaseDurationSeconds; d != nil && *d > 0 && *d != durationSeconds(ttl) {
		ttl = max(ttl, time.Duration(*d)*time.Second)
	}
	return ttl
}

// version is what tells one version of a Lease from another, for the
// handle's unchanged.Tracker.
type version struct{ rv, uid string }

func (v view) version() version { return version{v.rv, v.uid} }

// record is the tenure record of v, seen unchanged for unchanged: free
// once the holder's lease duration, plus a margin for the clocks' rates,
// has passed on this handle's clock.
func record(key string, v view, unchanged time.Duration) tenure.Record {
	r := tenure.Record{Key: key, Term: v.term}
	// Saturating, and never negative: the TTL of tenure's own grant comes
	// from the annotation, which anyone can edit.
	dur := max(v.dur, 0)
	window := seen.AddSat(dur, seen.Margin(dur))
	if v.holder == "" || unchanged >= window {
		return r
	}
	r.Holder, r.TTL = v.holder, max(v.ttl, 0)
	if v.own {
		r.Value = v.g.Value
	}
	r.Remaining = min(window-unchanged, r.TTL)
	return r
}
