package nats

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/storeurl"
	"github.com/tenurehq/tenure/internal/unchanged"
)

// DefaultPrefix is the prefix of every NATS key the store writes when the
// URL names none.
const DefaultPrefix = "tenure"

// MarkerTTL is how long the bucket the store creates keeps the marker the
// server leaves when a grant expires (the KV option LimitMarkerTTL).
const MarkerTTL = time.Hour

var namePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Store is a lease store on a NATS JetStream key-value bucket. Create it
// with [Open] (or tenure.Open); it is safe for concurrent use, and every
// call returns when the server answered or its ctx is done.
type Store struct {
	nc       *natsgo.Conn
	js       jetstream.JetStream
	bucket   string
	prefix   string
	redacted string // the URL, password hidden
	secret   string

	setupMu sync.Mutex
	kv      jetstream.KeyValue // nil until the bucket was found or made
	stream  jetstream.Stream

	seen seen.Terms                // the highest term this Store saw per key
	obs  unchanged.Tracker[uint64] // when this Store first saw each revision of entries written without a TTL

	mine sync.Map // key -> own: this Store's last write of its grant

	winMu sync.Mutex
	win   map[string]time.Duration // the window entry per key, as far as known

	link *link // ends the calls under way when the connection is lost

	closed atomic.Bool
	bg     context.Context // cancelled by Close; ends watches
	stopBg context.CancelFunc
}

var _ tenure.Publisher = (*Store)(nil)

func init() {
	storeurl.Register(open, "nats")
}

// Open returns a store on the JetStream key-value bucket rawURL names,
// nats://[user:password@]host:port[,host:port...]/BUCKET[/PREFIX]. The
// bucket is made on first use if it does not exist (see the package
// documentation for its options, and for the refusal of a bucket made
// without them).
//
// Open does not wait for a server: the client connects in the
// background and keeps reconnecting, so a store opened while the server
// is down works once it is up. Errors wrap [tenure.ErrInvalid] for a bad
// URL and never contain the password.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	return storeurl.Open(ctx, rawURL, "nats", open)
}

// target is what a URL names.
type target struct {
	servers        []string
	user, password string
	bucket, prefix string
	redacted       string
}

func parseURL(u *url.URL) (target, error) {
	red := tenure.Redact(storeurl.String(u))
	bad := func(format string, args ...any) (target, error) {
		return target{}, fmt.Errorf("%w: nats URL %q: %s", tenure.ErrInvalid, red, fmt.Sprintf(format, args...))
	}
	if u.Scheme != "nats" {
		return bad("the scheme must be nats")
	}
	if u.Opaque != "" || u.Host == "" {
		return bad("no host:port (want nats://host:port/BUCKET)")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return bad("query parameters are not supported")
	}
	t := target{redacted: red}
	for _, hp := range strings.Split(u.Host, ",") {
		if _, port, err := net.SplitHostPort(hp); err != nil || port == "" {
			return bad("server %q is not host:port", hp)
		}
		t.servers = append(t.servers, "nats://"+hp)
	}
	if u.User != nil {
		t.user = u.User.Username()
		t.password, _ = u.User.Password()
	}
	parts := strings.Split(strings.Trim(u.Path, "/"), "/")
	if len(parts) > 2 || parts[0] == "" {
		return bad("the path must be /BUCKET or /BUCKET/PREFIX")
	}
	t.bucket, t.prefix = parts[0], DefaultPrefix
	if len(parts) == 2 {
		t.prefix = parts[1]
	}
	if !namePattern.MatchString(t.bucket) {
		return bad("bucket %q: want 1 to 64 of A-Z a-z 0-9 _ -", t.bucket)
	}
	if !namePattern.MatchString(t.prefix) {
		return bad("prefix %q: want 1 to 64 of A-Z a-z 0-9 _ -", t.prefix)
	}
	return t, nil
}

func open(ctx context.Context, u *url.URL) (*Store, error) {
	t, err := parseURL(u)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	lk := newLink()
	opts := []natsgo.Option{
		natsgo.Name("tenure"),
		natsgo.RetryOnFailedConnect(true),
		natsgo.MaxReconnects(-1),
		natsgo.ReconnectWait(100 * time.Millisecond),
		// No buffering while disconnected: a call fails at once rather
		// than wait for its ctx, and is not sent late.
		natsgo.ReconnectBufSize(-1),
		// The client's own error handler logs to stderr; errors reach
		// the caller through the calls instead.
		natsgo.ErrorHandler(func(*natsgo.Conn, *natsgo.Subscription, error) {}),
		natsgo.DisconnectErrHandler(func(*natsgo.Conn, error) { lk.lost() }),
		natsgo.ClosedHandler(func(*natsgo.Conn) { lk.lost() }),
		natsgo.ReconnectErrHandler(func(_ *natsgo.Conn, err error) { lk.dialFailed(err) }),
	}
	if t.user != "" || t.password != "" {
		opts = append(opts, natsgo.UserInfo(t.user, t.password))
	}
	nc, err := natsgo.Connect(strings.Join(t.servers, ","), opts...)
	if err != nil {
		return nil, storeurl.Scrub(t.password, fmt.Errorf("tenure/nats: connect to %s: %w", t.redacted, err))
	}
	js, err := jetstream.New(nc)
	if err != nil {
		nc.Close()
		return nil, storeurl.Scrub(t.password, fmt.Errorf("tenure/nats: %s: %w", t.redacted, err))
	}
	bg, stop := context.WithCancel(context.Background())
	return &Store{nc: nc, js: js, bucket: t.bucket, prefix: t.prefix, redacted: t.redacted, secret: t.password,
		win: map[string]time.Duration{}, link: lk, bg: bg, stopBg: stop}, nil
}

// Bucket returns the name of the store's key-value bucket.
func (s *Store) Bucket() string { return s.bucket }

// NATSKey returns the NATS key of the bucket that holds key's grant:
// PREFIX.BASE64URL(key), since tenure keys may hold any character and
// NATS keys only a few.
func (s *Store) NATSKey(key string) string {
	return s.prefix + "." + base64.RawURLEncoding.EncodeToString([]byte(key))
}

// windowKey is the NATS key holding the longest TTL granted for key.
func (s *Store) windowKey(key string) string { return s.NATSKey(key) + ".w" }

// subject is the stream subject of key's grant.
func (s *Store) subject(key string) string { return "$KV." + s.bucket + "." + s.NATSKey(key) }

// Close ends the store's watches and its connection; later calls return
// [tenure.ErrClosed]. Grants still held are not released: they expire on
// the server. Close is idempotent.
func (s *Store) Close() error {
	if s.closed.Swap(true) {
		return nil
	}
	s.stopBg()
	s.nc.Close()
	return nil
}

// ready returns the bucket, finding or making it on first use.
func (s *Store) ready(ctx context.Context) (jetstream.KeyValue, jetstream.Stream, error) {
	s.setupMu.Lock()
	defer s.setupMu.Unlock()
	if s.kv != nil {
		return s.kv, s.stream, nil
	}
	kv, err := s.js.KeyValue(ctx, s.bucket)
	if errors.Is(err, jetstream.ErrBucketNotFound) {
		kv, err = s.js.CreateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:         s.bucket,
			Description:    "tenure leases",
			History:        1,
			Storage:        jetstream.FileStorage,
			LimitMarkerTTL: MarkerTTL,
		})
		if errors.Is(err, jetstream.ErrBucketExists) || errors.Is(err, jetstream.ErrStreamNameAlreadyInUse) {
			kv, err = s.js.KeyValue(ctx, s.bucket) // made meanwhile by another store
		}
	}
	if err != nil {
		return nil, nil, s.fail(ctx, "open bucket "+s.bucket, err)
	}
	st, err := kv.Status(ctx)
	if err != nil {
		return nil, nil, s.fail(ctx, "read bucket "+s.bucket, err)
	}
	if err := s.checkBucket(st); err != nil {
		return nil, nil, err
	}
	stream, err := s.js.Stream(ctx, "KV_"+s.bucket)
	if err != nil {
		return nil, nil, s.fail(ctx, "open bucket "+s.bucket, err)
	}
	s.kv, s.stream = kv, stream
	return kv, stream, nil
}

// checkBucket refuses a bucket made without the options the store needs.
func (s *Store) checkBucket(st jetstream.KeyValueStatus) error {
	var miss []string
	if st.LimitMarkerTTL() <= 0 {
		miss = append(miss, "per-key TTLs are off (set LimitMarkerTTL, e.g. 1h)")
	}
	if st.History() != 1 {
		miss = append(miss, fmt.Sprintf("history is %d (want 1: with more the server stretches short TTLs to LimitMarkerTTL)", st.History()))
	}
	if st.TTL() != 0 {
		miss = append(miss, fmt.Sprintf("its TTL is %s (want none: it would delete terms' records and cut grants short)", st.TTL()))
	}
	if len(miss) == 0 {
		return nil
	}
	return fmt.Errorf("%w: tenure/nats: bucket %q on %s cannot hold leases: %s; change it, or name a new bucket in the URL for tenure to create",
		tenure.ErrInvalid, s.bucket, s.redacted, strings.Join(miss, "; "))
}

// errConnLost ends a call whose connection was lost while it waited for
// the server: its request or reply may be lost, and the client would
// wait for ctx.
var errConnLost = errors.New("the connection to the server was lost during the call")

// link is a context per connection, cancelled when the connection is
// lost, so that the calls under way on it end at once.
type link struct {
	mu     sync.Mutex
	ctx    context.Context
	cancel context.CancelCauseFunc
	dial   error // the last failed attempt to (re)connect
}

// dialFailed records a failed attempt to connect.
func (l *link) dialFailed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.dial = err
}

// lastDial returns the last failed attempt to connect, if any.
func (l *link) lastDial() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.dial
}

func newLink() *link {
	l := &link{}
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
	return l
}

// lost ends the calls under way and starts a new context for later ones.
func (l *link) lost() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.cancel(errConnLost)
	l.ctx, l.cancel = context.WithCancelCause(context.Background())
}

// bound returns ctx, also cancelled (with cause errConnLost) when the
// current connection is lost; call done when the call is over.
func (l *link) bound(ctx context.Context) (context.Context, func()) {
	l.mu.Lock()
	cur := l.ctx
	l.mu.Unlock()
	c, cancel := context.WithCancelCause(ctx)
	stop := context.AfterFunc(cur, func() { cancel(errConnLost) })
	return c, func() { stop(); cancel(nil) }
}

// usable checks a call before it starts, waits for the connection, and
// returns the bucket.
func (s *Store) usable(ctx context.Context) (jetstream.KeyValue, jetstream.Stream, error) {
	if err := ctxerr.Usable(ctx, s.closed.Load()); err != nil {
		return nil, nil, err
	}
	if err := s.connected(ctx); err != nil {
		return nil, nil, err
	}
	return s.ready(ctx)
}

// connectWait bounds how long a call waits for the client to (re)connect
// before it fails, when its ctx allows longer.
const connectWait = 2 * time.Second

// errNotConnected is the cause of a call made while the client has no
// connection to any server.
var errNotConnected = errors.New("no connection to the server")

// connected waits until the client is connected, for at most connectWait
// or until ctx is done: the client connects in the background, from Open
// on and after every loss of its connection.
func (s *Store) connected(ctx context.Context) error {
	if s.nc.IsConnected() {
		return nil
	}
	ch := s.nc.StatusChanged(natsgo.CONNECTED, natsgo.CLOSED)
	defer s.nc.RemoveStatusListener(ch)
	if s.nc.IsConnected() {
		return nil
	}
	t := time.NewTimer(connectWait)
	defer t.Stop()
	select {
	case st := <-ch:
		if st == natsgo.CONNECTED {
			return nil
		}
	case <-t.C:
	case <-ctx.Done():
	}
	return s.fail(ctx, "connect", errNotConnected)
}

// fail is the error of a call op that failed with err: ErrClosed after
// Close, else naming op and the server, matching ctx's error when ctx is
// done, never quoting the password.
func (s *Store) fail(ctx context.Context, op string, err error) error {
	if s.closed.Load() {
		return tenure.ErrClosed
	}
	if errors.Is(context.Cause(ctx), errConnLost) && ctx.Err() != nil {
		// Not the caller's cancellation: the call's own bound.
		if !errors.Is(err, errNotConnected) {
			err = errConnLost
		}
		ctx = context.WithoutCancel(ctx)
	}
	last := s.nc.LastError()
	if last == nil {
		last = s.link.lastDial()
	}
	if !s.nc.IsConnected() && last != nil {
		err = fmt.Errorf("%w (last connection error: %s)", err, last.Error())
	}
	return storeurl.Fail(ctx, "tenure/nats", s.redacted, s.secret, op, err)
}
