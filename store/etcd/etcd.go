package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/storeurl"
)

// DefaultPrefix is the etcd key prefix of a URL without a path.
const DefaultPrefix = "/tenure"

// Store is a lease store on etcd. Create it with [Open]; it is safe for
// concurrent use by many goroutines, and every method blocks at most until
// etcd answered or its context is done.
type Store struct {
	c         *clientv3.Client
	prefix    string
	endpoints string // for error messages; never holds credentials
	closed    atomic.Bool
	bg        context.Context // cancelled by Close; bounds cleanup requests
	stopBg    context.CancelFunc

	ka keeper // the keep-alive stream of Renew

	seen seen.Terms // the highest term this handle saw per key
}

var (
	_ tenure.Publisher = (*Store)(nil)
)

func init() {
	storeurl.Register(open, "etcd")
}

// Open returns a store on the etcd cluster named by rawURL,
// etcd://[user:password@]host:port[,host:port...]/prefix. Without
// credentials it does not contact etcd; with them it authenticates, bounded
// by ctx. A malformed URL gives an error matching [tenure.ErrInvalid]. No
// error quotes the password.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	return storeurl.Open(ctx, rawURL, "etcd", open)
}

func open(ctx context.Context, u *url.URL) (*Store, error) {
	endpoints, prefix, err := storeurl.Hosts(u, "etcd", "endpoint")
	if err != nil {
		return nil, err
	}
	if prefix == "/" {
		prefix = DefaultPrefix
	}
	cfg := clientv3.Config{
		Endpoints:            endpoints,
		Logger:               zap.NewNop(),
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 3 * time.Second,
	}
	if u.User != nil {
		cfg.Username = u.User.Username()
		cfg.Password, _ = u.User.Password()
		// The client authenticates in New, bounded by DialTimeout only.
		cfg.DialTimeout = 10 * time.Second
		if d, ok := ctx.Deadline(); ok {
			cfg.DialTimeout = max(time.Until(d), time.Millisecond)
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	c, err := clientv3.New(cfg)
	if err != nil {
		return nil, fmt.Errorf("etcd: connect to %s: %w", strings.Join(endpoints, ","), storeurl.Scrub(cfg.Password, err))
	}
	bg, stop := context.WithCancel(context.Background())
	return &Store{c: c, prefix: prefix, endpoints: strings.Join(endpoints, ","), bg: bg, stopBg: stop}, nil
}

// Close closes the connection to etcd; watches end and later calls return
// [tenure.ErrClosed]. Leases still held are not released: they expire
// after their TTL. Close is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stopBg()
	if err := s.c.Close(); err != nil && !errors.Is(err, context.Canceled) {
		return fmt.Errorf("etcd: close client for %s: %w", s.endpoints, err)
	}
	return nil
}

// Prefix returns the etcd key prefix under which the store keeps its keys.
func (s *Store) Prefix() string { return s.prefix }

func (s *Store) holderKey(key string) string { return s.prefix + "/holder/" + key }
func (s *Store) termKey(key string) string   { return s.prefix + "/term/" + key }

// usable returns ctx's error or ErrClosed, so that no request starts when
// it could not finish.
func (s *Store) usable(ctx context.Context) error { return ctxerr.Usable(ctx, s.closed.Load()) }

// checkCall is usable for a call on key, checked first: what a call on one
// key checks before it talks to the server.
func (s *Store) checkCall(ctx context.Context, key string) error {
	return ctxerr.Call(ctx, s.closed.Load(), key)
}

// fail wraps a request error with the operation, the key and the
// endpoints. After Close it is ErrClosed; when ctx is done, or past its
// deadline before its timer fired, the error matches ctx's error whatever
// the client returned.
func (s *Store) fail(ctx context.Context, op, key string, err error) error {
	if s.closed.Load() {
		return tenure.ErrClosed
	}
	if key != "" {
		op = fmt.Sprintf("%s %q", op, key)
	}
	if cerr := ctxerr.Err(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("etcd: %s at %s: %w (%v)", op, s.endpoints, cerr, err)
	}
	return fmt.Errorf("etcd: %s at %s: %w", op, s.endpoints, err)
}

// unknownHolder names the holder of a key whose value tenure cannot read.
const unknownHolder = "(unknown)"

// grant is what the holder key stores; the term key stores it too, with
// the fields that describe how the last grant ended.
type grant struct {
	Holder string `json:"holder"`
	TTL    int64  `json:"ttl_ns"`
	// Holder key only: the value published with the grant; absent when
	// none was, so a grant without one encodes as before values existed.
	Value string `json:"value,omitempty"`
	// Term key only: the grant's etcd lease; its term (0 while the grant
	// lives: the term key's ModRevision, written by the Acquire that made
	// it); whether it was released.
	Lease    int64 `json:"lease,omitempty"`
	Term     int64 `json:"term,omitempty"`
	Released bool  `json:"released,omitempty"`
	// Shared marks a session's etcd lease: other grants use it too.
	Shared bool `json:"shared,omitempty"`
}

// encode is the holder key's value for a grant.
func encode(identity string, ttl time.Duration, value string) string {
	b, _ := json.Marshal(grant{Holder: identity, TTL: int64(ttl), Value: value})
	return string(b)
}

// encodeLast is the term key's value for a grant.
func encodeLast(g grant) string {
	b, _ := json.Marshal(g)
	return string(b)
}

// lastTerm is the term of the last grant recorded by term key kv. A term
// is the revision of the grant's Acquire, which precedes the write that
// recorded it: a recorded term above kv's ModRevision was written by
// something else and is not believed, lest a Record show a term that the
// next grant, a revision, cannot exceed.
func lastTerm(kv *mvccpb.KeyValue) uint64 {
	if g := decode(kv.Value); g.Term > 0 && g.Term <= kv.ModRevision {
		return uint64(g.Term)
	}
	return uint64(kv.ModRevision)
}

func decode(v []byte) grant {
	var g grant
	_ = json.Unmarshal(v, &g) // a foreign value reads as a holder named ""
	return g
}

// ttlSeconds is the etcd lease TTL for ttl: whole seconds, rounded up, at
// least 1.
func ttlSeconds(ttl time.Duration) int64 {
	s := int64(ttl / time.Second) // ttl+time.Second-1 would overflow for a huge ttl
	if ttl%time.Second > 0 {
		s++
	}
	return max(1, s)
}
