package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/seen"
	"github.com/tenurehq/tenure/internal/storeurl"
)

// DefaultPath is the ZooKeeper path of a URL without one.
const DefaultPath = "/tenure"

// controlSessionTimeout is the session timeout of the store's own session,
// which reads, watches and releases; grants have sessions of their own.
const controlSessionTimeout = 10 * time.Second

// Store is a lease store on ZooKeeper. Create it with [Open]; it is safe
// for concurrent use, and every method blocks at most until ZooKeeper
// answered or its context is done.
type Store struct {
	servers []string
	root    string
	auth    []byte // "user:password" for digest authentication, or nil
	secret  string // the password, to scrub from messages
	acl     []zk.ACL
	where   string // servers, for error messages

	ctl *zk.Conn // the control session

	mu       sync.Mutex
	grants   map[string]*grant // by Lease.Token
	sessions map[*storeSession]struct{}
	watched  map[string]watchedNode // by key: the key node as a live watch last read it (see fresh)

	seen   seen.Terms // the highest term this Store saw per key
	spare  *grant     // a session made ready for the next Acquire, or nil
	making bool       // a spare session is being made
	closed bool
	done   chan struct{} // closed by Close
	up     chan struct{} // closed while the control session is connected
	authed chan struct{} // closed once the control session authenticated (or at once without credentials)
	down   chan struct{} // closed while it is not (after it had been)
}

var (
	_ tenure.Publisher = (*Store)(nil)
)

func init() {
	storeurl.Register(open, "zk")
}

// Open returns a store on the ZooKeeper ensemble named by rawURL,
// zk://[user:password@]host:port[,host:port...]/path. It starts connecting
// and returns without waiting for the session (calls wait for it, bounded by
// their contexts). A malformed URL gives an error matching
// [tenure.ErrInvalid]. No error quotes the password.
func Open(ctx context.Context, rawURL string) (*Store, error) {
	return storeurl.Open(ctx, rawURL, "zk", open)
}

func open(ctx context.Context, u *url.URL) (*Store, error) {
	red := tenure.Redact(storeurl.String(u))
	servers, root, err := storeurl.Hosts(u, "zk", "server")
	if err != nil {
		return nil, err
	}
	if root == "/" {
		root = DefaultPath
	}
	if err := checkRoot(root); err != nil {
		return nil, fmt.Errorf("%w: zk URL %q: path %q %s", tenure.ErrInvalid, red, root, err)
	}
	s := &Store{
		servers:  servers,
		root:     root,
		acl:      zk.WorldACL(zk.PermAll),
		where:    strings.Join(servers, ","),
		grants:   map[string]*grant{},
		sessions: map[*storeSession]struct{}{},
		watched:  map[string]watchedNode{},
		done:     make(chan struct{}),
		up:       make(chan struct{}),
		authed:   make(chan struct{}),
		down:     make(chan struct{}),
	}
	if u.User != nil {
		pw, _ := u.User.Password()
		s.auth, s.secret = []byte(u.User.Username()+":"+pw), pw
		s.acl = zk.AuthACL(zk.PermAll)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ctl, _, err := zk.Connect(servers, controlSessionTimeout,
		zk.WithLogger(logger{secret: s.secret}), zk.WithEventCallback(s.controlEvent),
		zk.WithDialer(cappedDialer(handshakeLimit(controlSessionTimeout), netDial)))
	if err != nil {
		return nil, fmt.Errorf("zk: connect to %s: %w", s.where, storeurl.Scrub(s.secret, err))
	}
	s.ctl = ctl
	if s.auth == nil {
		close(s.authed)
	} else {
		go s.authenticate()
	}
	return s, nil
}

// authenticate adds the credentials to the control session once it exists;
// the client re-sends them by itself after every reconnect. Reads wait for
// it, since the store's nodes are readable by its user only.
func (s *Store) authenticate() {
	for {
		select {
		case <-s.connected():
		case <-s.done:
			return
		}
		if err := s.ctl.AddAuth("digest", s.auth); err == nil {
			close(s.authed)
			return
		}
		select { // the session dropped before the request went out
		case <-s.done:
			return
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// controlEvent tracks the control session, so watches end when it is cut.
func (s *Store) controlEvent(ev zk.Event) {
	if ev.Type != zk.EventSession {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	switch ev.State {
	case zk.StateDisconnected, zk.StateExpired, zk.StateAuthFailed:
		flip(&s.down, &s.up)
	case zk.StateHasSession:
		flip(&s.up, &s.down)
	}
}

// flip closes *on if it is open and reopens *off if it is closed.
func flip(on, off *chan struct{}) {
	select {
	case <-*on:
	default:
		close(*on)
	}
	select {
	case <-*off:
		*off = make(chan struct{})
	default:
	}
}

// Close ends every grant this store holds at once (closing their sessions,
// and every [tenure.StoreSession] it opened, deletes their ephemeral
// nodes), ends watches, and closes the control session. Later calls return [tenure.ErrClosed]. It waits up to about a
// second for ZooKeeper to confirm the sessions closed. Close is idempotent.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	gs := make([]*grant, 0, len(s.grants)+1)
	for _, g := range s.grants {
		gs = append(gs, g)
	}
	if s.spare != nil {
		gs = append(gs, s.spare)
		s.spare = nil
	}
	sss := make([]*storeSession, 0, len(s.sessions))
	for ss := range s.sessions {
		sss = append(sss, ss)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, g := range gs {
		wg.Go(func() { g.end(true) })
	}
	for _, ss := range sss {
		wg.Go(func() { ss.end("the store was closed", true) })
	}
	wg.Go(s.ctl.Close)
	wg.Wait()
	return nil
}

// checkRoot says what is wrong with root, a URL's cleaned path, as the
// path of the store's nodes: characters ZooKeeper refuses (found here, not
// at the first grant), or ZooKeeper's own /zookeeper tree.
func checkRoot(root string) error {
	for _, r := range root {
		if unicode.IsControl(r) || r >= 0xd800 && r <= 0xf8ff || r >= 0xfff0 && r <= 0xffff {
			return errors.New("has characters ZooKeeper refuses")
		}
	}
	if root == "/zookeeper" || strings.HasPrefix(root, "/zookeeper/") {
		return errors.New("is in the tree ZooKeeper reserves for itself")
	}
	return nil
}

// Path returns the ZooKeeper path under which the store keeps its nodes.
func (s *Store) Path() string { return s.root }

func (s *Store) keyPath(key string) string   { return s.root + "/" + escape(key) }
func (s *Store) leasePath(key string) string { return s.keyPath(key) + "/lease" }

// markerPath is an ephemeral node, beside the key node, that the grant's
// session creates with the lease node and deletes with it on release: it
// outlives the lease node only if that was deleted from outside while the
// session lived, which is how Acquire tells such a grant from one that
// expired or was released. (Escaped keys contain no ".", so no key node
// is named like a marker.)
func (s *Store) markerPath(key string, session int64) string {
	return s.keyPath(key) + ".s" + strconv.FormatUint(uint64(session), 16)
}

// escape turns a key into one valid ZooKeeper node name: bytes outside
// [A-Za-z0-9_-] become %XX, so "/", "." and ".." cannot form paths.
func escape(key string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
		}
	}
	return b.String()
}

func (s *Store) isClosed() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// usable returns ErrClosed or ctx's error, so no request starts that could
// not finish.
func (s *Store) usable(ctx context.Context) error { return ctxerr.Usable(ctx, s.isClosed()) }

// checkCall is usable for a call on key, checked first: what a call on one
// key checks before it talks to the server.
func (s *Store) checkCall(ctx context.Context, key string) error {
	return ctxerr.Call(ctx, s.isClosed(), key)
}

// fail wraps a request error with the operation, key and servers; after
// Close it is ErrClosed, and when ctx is done, or past its deadline before
// its timer fired, it matches ctx's error.
func (s *Store) fail(ctx context.Context, op, key string, err error) error {
	if s.isClosed() {
		return tenure.ErrClosed
	}
	err = storeurl.Scrub(s.secret, err)
	if cerr := ctxerr.Err(ctx); cerr != nil && !errors.Is(err, cerr) {
		return fmt.Errorf("zk: %s %q at %s: %w (%v)", op, key, s.where, cerr, err)
	}
	return fmt.Errorf("zk: %s %q at %s: %w", op, key, s.where, err)
}

// call runs f, a blocking request of the ZooKeeper client (which takes no
// context), and returns when it finishes or ctx is done. An abandoned
// request still completes, or fails when its connection closes.
func call[T any](ctx context.Context, f func() (T, error)) (T, error) {
	type result struct {
		v   T
		err error
	}
	ch := make(chan result, 1)
	go func() {
		v, err := f()
		ch <- result{v, err}
	}()
	select {
	case r := <-ch:
		return r.v, r.err
	case <-ctx.Done():
		var zero T
		return zero, ctx.Err()
	}
}

// waitSession waits until conn has a session, or ctx is done.
func waitSession(ctx context.Context, conn *zk.Conn, ready <-chan struct{}) error {
	if conn.State() == zk.StateHasSession {
		return nil
	}
	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("no ZooKeeper session (state %s): %w", conn.State(), ctx.Err())
	}
}

// connected returns the channel that is closed once the control session
// is connected (the current one: it is replaced when the session
// disconnects).
func (s *Store) connected() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.up
}

// session waits until the control session is connected, bounded by ctx,
// and returns the channel that is closed when it disconnects.
func (s *Store) session(ctx context.Context) (<-chan struct{}, error) {
	select {
	case <-s.connected():
	case <-s.done:
		return nil, tenure.ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("no ZooKeeper session (state %s): %w", s.ctl.State(), ctx.Err())
	}
	select {
	case <-s.authed:
	case <-s.done:
		return nil, tenure.ErrClosed
	case <-ctx.Done():
		return nil, fmt.Errorf("ZooKeeper session not authenticated yet: %w", ctx.Err())
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down, nil
}

// unknownHolder names the holder of a key whose node data tenure cannot
// read.
const unknownHolder = "(unknown)"

// record is what the key node stores: the last grant, and the ZooKeeper
// session that holds it (see markerPath).
type record struct {
	Holder  string `json:"holder"`
	TTL     int64  `json:"ttl_ns"`
	Session int64  `json:"session,omitempty"`
	// Value is the value published with the grant; absent when none was.
	Value string `json:"value,omitempty"`
	// Version is the key node's data version that the grant's own write
	// gives it, so that a record rewritten from outside (which bumps the
	// version) can be told from the grant's (see vouched); absent in
	// records written before it was added.
	Version int32 `json:"version,omitempty"`
}

// encode is the record of a grant to identity for ttl in session, whose
// write gives the key node data version version.
func encode(identity string, ttl time.Duration, session int64, version int32, value string) []byte {
	b, _ := json.Marshal(record{Holder: identity, TTL: int64(ttl), Session: session, Version: version, Value: value})
	return b
}

func decode(b []byte) record {
	var r record
	_ = json.Unmarshal(b, &r) // a foreign value reads as holder ""
	return r
}

// logger sends the ZooKeeper client's messages to slog at debug level,
// with the password hidden where they quote it (storeurl.Scrub), and hands
// the negotiated session timeout to a grant session that waits for it.
type logger struct {
	secret  string
	timeout chan<- time.Duration // may be nil
}

func (l logger) Printf(format string, args ...any) {
	if l.timeout != nil && strings.HasPrefix(format, "authenticated: id=%d, timeout=%d") && len(args) == 2 {
		if ms, ok := args[1].(int32); ok {
			select {
			case l.timeout <- time.Duration(ms) * time.Millisecond:
			default:
			}
		}
	}
	msg := storeurl.Scrub(l.secret, fmt.Errorf(format, args...)).Error()
	slog.Debug("zk client: " + msg)
}
