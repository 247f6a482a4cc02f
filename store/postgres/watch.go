package postgres

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/ctxwait"
)

// Watch implements [tenure.Reader]. The store keeps one connection, apart
// from the pool, that LISTENs on the table's channel; Acquire and Release
// notify it in the transaction that changes the row, so watchers wake when
// the change commits; each notification wakes a [tenure.Follow] loop,
// which re-reads the row. A grant that expires without a release sends no
// notification: Follow re-reads the record when the server said it would
// expire, so a watch on a held key reads the row about once per TTL while
// the holder renews.
//
// Watch blocks until the LISTEN connection is up (at once if another watch
// made it; else bounded by ctx and the URL's connect_timeout, default 10s),
// so an unreachable server is reported here. The first delivery is then the
// current record. The channel is closed when ctx is done, the store is
// closed, a read fails, or the LISTEN connection is lost (notifications may
// have been missed); the caller then reads with Get and watches again.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	// Not checkCall: the watch needs no lease table until its first read,
	// which migrates.
	if err := ctxerr.Call(ctx, s.closed.Load(), key); err != nil {
		return nil, err
	}
	sb := s.listener.add(key)
	select {
	case <-sb.ready:
	case <-sb.dead:
		s.listener.remove(sb)
		return nil, s.fail(ctx, "listen", s.listener.err())
	case <-ctx.Done():
		s.listener.remove(sb)
		return nil, ctx.Err()
	}
	// The watch ends when ctx is done or the listener fails the watch
	// (its connection was lost, or the store closed).
	wctx, stop := context.WithCancel(ctx)
	out := make(chan tenure.Record)
	go func() {
		defer s.listener.remove(sb)
		defer stop()
		ctxwait.CancelOnClose(wctx, sb.dead, stop)
		tenure.Follow{
			Get:  func(ctx context.Context) (tenure.Record, error) { return s.Get(ctx, sb.key) },
			Wake: sb.sig,
		}.Run(wctx, out)
	}()
	return out, nil
}

// sub is one watch's registration with the listener.
type sub struct {
	key   string
	sig   chan struct{} // capacity 1: a notification for key, coalesced
	ready chan struct{} // closed once LISTEN covers this watch
	dead  chan struct{} // closed when notifications may have been missed
}

// listener owns the LISTEN connection. It connects while there are
// watches, and on losing the connection ends every current watch, since
// notifications sent while it was down are lost.
type listener struct {
	s    *Store
	cfg  *pgx.ConnConfig
	ctx  context.Context
	stop context.CancelFunc

	mu        sync.Mutex
	subs      map[string]map[*sub]struct{}
	started   bool
	listening bool               // LISTEN is in effect on the connection
	lastErr   error              // why the last connection failed
	idle      context.CancelFunc // ends the current connection
	lingerFor time.Duration      // listenLinger when the store opened
	linger    *time.Timer        // calls idle lingerFor after the last watch ended
	wake      chan struct{}      // capacity 1: a watch was added
	exited    chan struct{}
}

// listenLinger is how long the LISTEN connection outlives its last watch.
// An elector ends its campaign's watch when it wins and watches its own
// grant at once, and the other way round when it gives the key back: were
// the connection closed and opened again each time, every handoff would
// pay a backend's start on the server (and its exit), on the same cores as
// the handoff's own statements. A new watch within listenLinger finds the
// connection listening and is ready at once.
var listenLinger = 5 * time.Second

func newListener(s *Store, cfg *pgx.ConnConfig) *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{
		s:         s,
		cfg:       cfg.Copy(),
		ctx:       ctx,
		subs:      map[string]map[*sub]struct{}{},
		lingerFor: listenLinger,
		wake:      make(chan struct{}, 1),
		exited:    make(chan struct{}),
	}
	l.stop = func() {
		cancel()
		l.mu.Lock()
		started := l.started
		l.started = true // no start after stop
		l.mu.Unlock()
		if started {
			<-l.exited
		} else {
			close(l.exited)
		}
		l.failAll(tenure.ErrClosed)
	}
	return l
}

func (l *listener) add(key string) *sub {
	sb := &sub{key: key, sig: make(chan struct{}, 1), ready: make(chan struct{}), dead: make(chan struct{})}
	l.mu.Lock()
	if l.ctx.Err() != nil {
		close(sb.dead)
		l.lastErr = tenure.ErrClosed
		l.mu.Unlock()
		return sb
	}
	if l.listening {
		close(sb.ready)
	}
	if l.linger != nil {
		l.linger.Stop()
	}
	if l.subs[key] == nil {
		l.subs[key] = map[*sub]struct{}{}
	}
	l.subs[key][sb] = struct{}{}
	if !l.started {
		l.started = true
		go l.run()
	}
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
	return sb
}

func (l *listener) remove(sb *sub) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if m := l.subs[sb.key]; m != nil {
		delete(m, sb)
		if len(m) == 0 {
			delete(l.subs, sb.key)
		}
	}
	if len(l.subs) == 0 && l.idle != nil {
		// Nobody watches: the connection goes unless a watch comes first.
		if l.linger == nil {
			l.linger = time.AfterFunc(l.lingerFor, l.idleIfUnwatched)
		} else {
			l.linger.Reset(l.lingerFor)
		}
	}
}

// idleIfUnwatched lets the connection go if nobody watches.
func (l *listener) idleIfUnwatched() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.subs) == 0 && l.idle != nil {
		l.idle()
	}
}

func (l *listener) count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.subs)
}

func (l *listener) err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lastErr == nil {
		return errors.New("LISTEN connection lost")
	}
	return l.lastErr
}

// setListening records that LISTEN took effect and marks every watch
// ready.
func (l *listener) setListening() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listening = true
	for _, m := range l.subs {
		for sb := range m {
			select {
			case <-sb.ready:
			default:
				close(sb.ready)
			}
		}
	}
}

// signal wakes the watches of key, or of every key if all.
func (l *listener) signal(key string, all bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, m := range l.subs {
		if !all && k != key {
			continue
		}
		for sb := range m {
			select {
			case sb.sig <- struct{}{}:
			default:
			}
		}
	}
}

// failAll ends every current watch, because of err.
func (l *listener) failAll(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.listening = false
	l.lastErr = err
	for k, m := range l.subs {
		for sb := range m {
			close(sb.dead)
		}
		delete(l.subs, k)
	}
}

func (l *listener) run() {
	defer close(l.exited)
	backoff := 50 * time.Millisecond
	for l.ctx.Err() == nil {
		if l.count() == 0 {
			select {
			case <-l.wake:
				continue
			case <-l.ctx.Done():
				return
			}
		}
		err := l.listen()
		if errors.Is(err, errIdle) {
			// Watches registered meanwhile re-read when the next
			// connection is listening.
			l.mu.Lock()
			l.listening = false
			l.mu.Unlock()
			continue
		}
		if err != nil && l.ctx.Err() == nil {
			// Every watch registered so far may have missed something.
			l.failAll(err)
			select {
			case <-time.After(backoff):
			case <-l.ctx.Done():
			}
			backoff = min(backoff*2, 2*time.Second)
			continue
		}
		backoff = 50 * time.Millisecond
	}
}

// errIdle ends a connection nobody needs any more.
var errIdle = errors.New("no watches left")

// listen connects, LISTENs, wakes every watch to re-read (covering changes
// made before LISTEN took effect), then dispatches notifications until the
// connection fails, the last watch ends (errIdle) or the store closes.
func (l *listener) listen() (err error) {
	connCtx, idle := context.WithCancel(l.ctx)
	defer idle()
	l.mu.Lock()
	l.idle = idle
	l.mu.Unlock()
	defer func() {
		if err != nil && connCtx.Err() != nil && l.ctx.Err() == nil {
			err = errIdle
		}
	}()
	if l.count() == 0 {
		return errIdle
	}
	cctx, cancel := context.WithTimeout(connCtx, connectTimeout(l.cfg))
	conn, err := pgx.ConnectConfig(cctx, l.cfg)
	if err == nil {
		_, err = conn.Exec(cctx, "LISTEN "+pgx.Identifier{l.s.channel}.Sanitize())
	}
	cancel()
	if err != nil {
		if conn != nil {
			l.closeConn(conn)
		}
		return err
	}
	defer l.closeConn(conn)
	l.setListening()
	l.signal("", true)
	for {
		n, err := conn.WaitForNotification(connCtx)
		if err != nil {
			return err
		}
		l.signal(n.Payload, false)
	}
}

func (l *listener) closeConn(conn *pgx.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = conn.Close(ctx)
}

func connectTimeout(cfg *pgx.ConnConfig) time.Duration {
	if cfg.ConnectTimeout > 0 {
		return cfg.ConnectTimeout
	}
	return 10 * time.Second
}
