package redis

import (
	"context"
	"errors"
	"net"
	"sync"

	goredis "github.com/redis/go-redis/v9"
)

// hub carries every watch of a Store over one pub/sub connection, so that
// thousands of candidates watching thousands of keys cost the server one
// connection, not one each (the server's default maxclients is 10,000).
// The connection opens with the first watch and closes with the last; if
// it fails, every watch on it ends (its channel closes, and the caller
// watches again, over a new connection).
type hub struct {
	client *goredis.Client

	mu   sync.Mutex
	cur  *link // nil when no watch runs
	subs map[string]map[*watcher]struct{}
}

// link is one pub/sub connection of a hub.
type link struct {
	ps        *goredis.PubSub
	dead      chan struct{}              // closed when the connection failed or was closed
	confirmed map[string]bool            // channels the server confirmed
	expect    map[string]int             // SUBSCRIBEs sent and not yet confirmed, per channel
	waiting   map[string][]*confirmation // watches waiting for a channel's confirmation
}

// confirmation is one watch waiting for the server to confirm its
// subscriptions.
type confirmation struct {
	left int
	done chan struct{}
}

// watcher is one watch: sig receives when its key may have changed, and
// is closed when the watch must end because the connection failed.
type watcher struct {
	sig chan struct{}
}

// add subscribes w to channels and returns once the server confirmed them
// all, or with an error if ctx ends or the connection fails first; w is
// then not subscribed. SUBSCRIBE and UNSUBSCRIBE are sent under h.mu, so
// the server sees them in the order of the hub's own bookkeeping.
func (h *hub) add(ctx context.Context, w *watcher, channels []string) error {
	h.mu.Lock()
	if h.cur == nil {
		h.cur = &link{ps: h.client.Subscribe(context.WithoutCancel(ctx)), dead: make(chan struct{}),
			confirmed: map[string]bool{}, expect: map[string]int{}, waiting: map[string][]*confirmation{}}
		go h.receive(h.cur)
	}
	l := h.cur
	c := &confirmation{done: make(chan struct{})}
	var fresh []string
	for _, ch := range channels {
		if h.subs[ch] == nil {
			h.subs[ch] = map[*watcher]struct{}{}
			fresh = append(fresh, ch)
			l.expect[ch]++
		}
		h.subs[ch][w] = struct{}{}
		if !l.confirmed[ch] {
			l.waiting[ch] = append(l.waiting[ch], c)
			c.left++
		}
	}
	if c.left == 0 {
		close(c.done)
	}
	var err error
	if len(fresh) > 0 {
		err = l.ps.Subscribe(ctx, fresh...)
	}
	h.mu.Unlock()
	if err == nil {
		select {
		case <-c.done:
			return nil
		case <-l.dead:
			err = errors.New("the subscription connection failed")
		case <-ctx.Done():
			err = ctx.Err()
		}
	}
	h.remove(w, channels)
	return err
}

// remove unsubscribes w, closing the connection once no watch is left.
func (h *hub) remove(w *watcher, channels []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	l := h.cur
	var gone []string
	for _, ch := range channels {
		if _, ok := h.subs[ch][w]; !ok {
			continue
		}
		delete(h.subs[ch], w)
		if len(h.subs[ch]) == 0 {
			delete(h.subs, ch)
			if l != nil {
				delete(l.confirmed, ch)
				gone = append(gone, ch)
			}
		}
	}
	switch {
	case l == nil:
	case len(h.subs) == 0:
		h.cur = nil
		_ = l.ps.Close()
	case len(gone) > 0:
		// A failure here fails the connection, which ends every watch.
		_ = l.ps.Unsubscribe(context.Background(), gone...)
	}
}

// close ends the connection and every watch on it.
func (h *hub) close() {
	h.mu.Lock()
	l := h.cur
	h.mu.Unlock()
	if l != nil {
		_ = l.ps.Close()
		<-l.dead
	}
}

// receive turns messages on l into signals to the watchers of their
// channel until l fails or is closed; then it ends every watch on l.
func (h *hub) receive(l *link) {
	defer h.die(l)
	pinged := false
	for {
		msg, err := l.ps.ReceiveTimeout(context.Background(), healthInterval)
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !pinged {
				// Silence: make the server say something.
				if l.ps.Ping(context.Background()) == nil {
					pinged = true
					continue
				}
			}
			return
		}
		pinged = false
		switch m := msg.(type) {
		case *goredis.Message:
			if m.Payload != "expire" { // not a renewal's PEXPIRE
				h.wake(m.Channel)
			}
		case *goredis.Subscription:
			if m.Kind == "subscribe" && h.confirm(l, m.Channel) {
				// Confirmed again: go-redis reconnected and anything
				// may have been missed, so re-read too.
				h.wake(m.Channel)
			}
		}
	}
}

// confirm records the server's confirmation of ch on l; the confirmation
// of the last SUBSCRIBE sent releases the watches waiting for ch. It
// reports whether ch was confirmed already, with no SUBSCRIBE pending (a
// reconnection re-subscribed it).
func (h *hub) confirm(l *link, ch string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if n := l.expect[ch]; n > 1 {
		l.expect[ch] = n - 1
		return false
	}
	again := l.expect[ch] == 0 && l.confirmed[ch]
	delete(l.expect, ch)
	if h.subs[ch] != nil {
		l.confirmed[ch] = true
	}
	for _, c := range l.waiting[ch] {
		if c.left--; c.left == 0 {
			close(c.done)
		}
	}
	delete(l.waiting, ch)
	return again
}

// wake signals the watchers of ch, without blocking.
func (h *hub) wake(ch string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for w := range h.subs[ch] {
		select {
		case w.sig <- struct{}{}:
		default:
		}
	}
}

// die ends every watch on l once it failed or was closed.
func (h *hub) die(l *link) {
	h.mu.Lock()
	defer h.mu.Unlock()
	close(l.dead)
	if h.cur != l {
		return // closed with its last watch
	}
	h.cur = nil
	_ = l.ps.Close()
	ended := map[*watcher]bool{}
	for ch, ws := range h.subs {
		for w := range ws {
			if !ended[w] {
				ended[w] = true
				close(w.sig)
			}
		}
		delete(h.subs, ch)
	}
}
