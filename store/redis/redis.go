package redis

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync"
	"sync/atomic"

	goredis "github.com/redis/go-redis/v9"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/storeurl"
)

// URL query parameters the store reads and removes before handing the URL
// to go-redis (which takes the rest: dial_timeout, read_timeout,
// pool_size...).
const (
	// PrefixParam sets the prefix of every key the store writes, default
	// [DefaultPrefix]: stores with different prefixes are separate lease
	// namespaces.
	PrefixParam = "tenure_prefix"
	// KeyspaceParam, set to "false", stops the store from enabling expiry
	// notifications on the server (see the package documentation).
	KeyspaceParam = "tenure_keyspace_events"
)

// DefaultPrefix is the key prefix used when the URL sets none.
const DefaultPrefix = "tenure"

var prefixPattern = regexp.MustCompile(`^[A-Za-z0-9_.:-]{1,64}$`)

// Store is a lease store on a Redis server. Create it with [Open] (or
// tenure.Open); it is safe for concurrent use, and every call returns when
// the server answered or its ctx is done.
type Store struct {
	client   *goredis.Client
	keeper   *goredis.Client // sessions' keep-alives and closes, apart from client's pool
	prefix   string
	db       int
	redacted string
	secret   string
	keyspace bool // try to enable expiry notifications

	keyspaceMu   sync.Mutex
	keyspaceDone bool // enabled, or refused for good

	seen    seen.Terms    // the highest term this Store saw per key
	repairs atomic.Uint64 // term counters moved past a term already handed out

	evictionMu    sync.Mutex
	evictionSkip  bool   // the URL said not to check
	evictionCheck string // what the check found, once it succeeded

	clusterMu      sync.Mutex
	clusterChecked bool // the server is not in cluster mode (or refused to say)

	hub hub // every watch's subscriptions, on one connection

	closeMu sync.Mutex
	closed  atomic.Bool
	done    chan struct{}
	watches sync.WaitGroup
}

var (
	_ tenure.Publisher = (*Store)(nil)
)

func init() {
	storeurl.RegisterString(Open, "redis", "rediss")
}

// Open returns a store for the Redis server named by rawURL,
// redis://[user:password@]host:port/db?params (rediss:// for TLS), where
// params are go-redis's plus [PrefixParam], [KeyspaceParam] and
// [EvictionCheckParam]. Before its first grant the store checks that the
// server's maxmemory-policy is noeviction (see [Store.EvictionCheck]).
//
// Open connects nothing: go-redis connects on demand, so a store opened
// while the server is down works once it is up. Unless the URL sets
// max_retries, neither failed commands nor failed dials are retried (the
// elector retries with its own backoff). Errors wrap [tenure.ErrInvalid]
// for a bad URL and never contain the password.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	u, err := storeurl.Server(rawURL, "redis", "rediss")
	if err != nil {
		return nil, err
	}
	s := &Store{prefix: DefaultPrefix, keyspace: true, redacted: u.Redacted, secret: u.Password, done: make(chan struct{})}
	prefix, ok, err := u.Param(PrefixParam, "want 1 to 64 of A-Z a-z 0-9 _ . : -", prefixPattern.MatchString)
	if err != nil {
		return nil, err
	}
	if ok {
		s.prefix = prefix
	}
	keyspace, ok, err := u.Param(KeyspaceParam, "want true or false", func(v string) bool {
		return v == "true" || v == "1" || v == "false" || v == "0"
	})
	if err != nil {
		return nil, err
	}
	if ok {
		s.keyspace = keyspace == "true" || keyspace == "1"
	}
	_, s.evictionSkip, err = u.Param(EvictionCheckParam, "the only value is skip", func(v string) bool {
		return v == "skip"
	})
	if err != nil {
		return nil, err
	}
	opt, err := goredis.ParseURL(u.Driver())
	if err != nil {
		return nil, u.Refused(err)
	}
	if !u.Has("max_retries") {
		// The elector retries with its own backoff; go-redis would
		// otherwise retry commands 3 times and dials 5 times.
		opt.MaxRetries = -1
		opt.DialerRetries = 1
	}
	// Deadlines of the caller's context bound every command.
	opt.ContextTimeoutEnabled = true
	s.db = opt.DB
	s.client = goredis.NewClient(opt)
	s.hub = hub{client: s.client, subs: map[string]map[*watcher]struct{}{}}
	// A session's keep-alive, which keeps every grant of a process, must
	// not wait for a connection behind thousands of Acquires.
	kopt := *opt
	kopt.PoolSize, kopt.MinIdleConns, kopt.MaxIdleConns = 2, 0, 2
	s.keeper = goredis.NewClient(&kopt)
	return s, nil
}

// Prefix returns the prefix of the store's keys.
func (s *Store) Prefix() string { return s.prefix }

// Close closes the client and ends watches; later calls return
// [tenure.ErrClosed]. Leases still held are not released: they expire on
// the server. It is safe to call more than once.
func (s *Store) Close() error {
	s.closeMu.Lock()
	defer s.closeMu.Unlock()
	if s.closed.Swap(true) {
		return nil
	}
	close(s.done)
	s.watches.Wait()
	s.hub.close()
	kerr := s.keeper.Close()
	return errors.Join(s.client.Close(), kerr)
}

// begin checks what every call checks before it talks to the server.
func (s *Store) begin(ctx context.Context) error { return ctxerr.Usable(ctx, s.closed.Load()) }

// checkCall is begin for a call on key, checked first: what a call on one
// key checks before it talks to the server.
func (s *Store) checkCall(ctx context.Context, key string) error {
	return ctxerr.Call(ctx, s.closed.Load(), key)
}

// call runs fn, returning when it does or when ctx is done. go-redis
// honours a context's deadline but not its cancellation in the middle of
// a read; fn is left to finish within the client's read timeout.
func (s *Store) call(ctx context.Context, fn func() error) error {
	if ctx.Done() == nil {
		return fn()
	}
	ch := make(chan error, 1)
	go func() { ch <- fn() }()
	select {
	case err := <-ch:
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}

// fail turns an error from go-redis into the store's error: ErrClosed if
// the store was closed meanwhile, the context's error if it is done or
// past its deadline, and in every case a message that names the operation
// and not the password.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if s.closed.Load() || errors.Is(err, goredis.ErrClosed) {
		return fmt.Errorf("tenure/redis: %s: %w", op, tenure.ErrClosed)
	}
	// The socket deadline go-redis set from ctx may fire a moment before
	// ctx's own timer: Fail judges ctx by its deadline too.
	return storeurl.Fail(ctx, "tenure/redis", s.redacted, s.secret, op, err)
}
