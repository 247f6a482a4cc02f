//go:build linux

package local

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// watchMask selects the directory events that can change a key's record:
// a record renamed into place, files deleted or created, and (the crash
// signal) a liveness file closed by the last process holding it open for
// writing, which the kernel does when a holder exits or is killed.
const watchMask = unix.IN_MOVED_TO | unix.IN_CLOSE_WRITE | unix.IN_DELETE | unix.IN_CREATE |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// The kernel posts a file's close event before it drops the file's lock,
// so a watcher woken by a holder's death may still see the holder's lock
// for a moment. It then probes again after a delay growing from probeMin to
// probeMax, for at most probeFor.
const (
	probeMin = 100 * time.Microsecond
	probeMax = 20 * time.Millisecond
	probeFor = 2 * time.Second
)

// Watch implements [tenure.Reader] with inotify on the state directory.
// The channel receives the current record at once, then a record whenever
// the holder or the term changed: on Acquire and Release by any process, at
// once when a holder process dies (the kernel closes its liveness file),
// and when a grant's TTL passes without renewal: inotify events wake a
// [tenure.Follow] loop, which re-reads the record, and which re-reads by
// itself when a grant is due to end. Deliveries coalesce: a slow reader
// gets the latest record. The channel is closed
// when ctx is done, the handle is closed, or the watch fails (the record
// became unreadable, or the directory was removed); callers then re-read
// with Get. Watch does not block. The watches of one handle share one
// inotify descriptor and the goroutine that reads it, while any is open:
// an event in the directory wakes that goroutine once, and only the
// watches of the key it concerns, which read the key once between them.
// Each watch costs two goroutines of its own until it ends.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
	w := &watch{
		s:    s,
		key:  key,
		kf:   s.files(key),
		wake: make(chan struct{}, 1),
		gone: make(chan struct{}),
	}
	w.prober = time.AfterFunc(time.Hour, w.signal)
	w.prober.Stop()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil, tenure.ErrClosed
	}
	for {
		if s.nw == nil || !s.nw.add(w) {
			n, err := s.newNotifier()
			if err != nil {
				s.mu.Unlock()
				return nil, err
			}
			s.nw = n
			continue
		}
		w.n = s.nw
		break
	}
	s.watches.Add(1)
	s.mu.Unlock()
	// Follow runs on a context of its own, cancelled only once the watch
	// is released, so a closed channel means the watch holds nothing any
	// more.
	fctx, fstop := context.WithCancel(context.WithoutCancel(ctx))
	go func() {
		select {
		case <-ctx.Done():
		case <-s.done:
		case <-w.gone:
		case <-fctx.Done():
		}
		w.release()
		fstop()
	}()
	out := make(chan tenure.Record)
	go func() {
		defer s.watches.Done()
		defer fstop()
		tenure.Follow{Get: w.get, Wake: w.wake}.Run(fctx, out)
	}()
	return out, nil
}

// newNotifier sets up an inotify descriptor on the state directory and
// starts its reader. The caller holds s.mu.
func (s *Store) newNotifier() (*notifier, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("local: inotify_init1: %w", err)
	}
	// Watch the opened directory, not its path, which may have been
	// replaced since Open.
	if _, err := unix.InotifyAddWatch(fd, "/proc/self/fd/"+strconv.Itoa(s.d.fd()), watchMask|unix.IN_ONLYDIR); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("local: watch %s: %w", s.dir, err)
	}
	// And .sessions, for the end of the sessions that records name.
	sd, err := s.sessDirLocked()
	if err != nil {
		unix.Close(fd)
		return nil, err
	}
	swd, err := unix.InotifyAddWatch(fd, "/proc/self/fd/"+strconv.Itoa(sd.fd()), sessionWatchMask|unix.IN_ONLYDIR)
	if err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("local: watch %s: %w", sd.path, err)
	}
	// A non-blocking descriptor in an *os.File is served by the runtime
	// poller: Read parks the goroutine, and Close wakes it.
	n := &notifier{
		f:      os.NewFile(uintptr(fd), "inotify"),
		gone:   make(chan struct{}),
		events: &s.watchEvents,
		byKey:  map[string]*keyWatches{},
		swd:    swd,
		ended:  map[string]struct{}{},
	}
	go n.read()
	return n, nil
}

// notifier is a handle's inotify descriptor on the state directory,
// shared by its watches. Its methods are safe for concurrent use.
type notifier struct {
	f      *os.File
	gone   chan struct{}  // closed when read returns
	events *atomic.Uint64 // counts the events dispatched (the store's, for tests)

	swd int // the watch descriptor of .sessions

	mu    sync.Mutex
	byKey map[string]*keyWatches // the open watches, by their key's file prefix
	n     int                    // how many
	done  bool                   // no watch may be added: the descriptor is closed or closing
	ended map[string]struct{}    // sessions whose file was closed or removed (see dispatchSession)
}

// sessionWatchMask selects the events of .sessions that end a session: its
// file closed by the last process holding it open for writing (the holder,
// closing it or dying; readers open it read-only, keep-alives write it in
// place without closing it), or deleted, or renamed away or over.
const sessionWatchMask = unix.IN_CLOSE_WRITE | unix.IN_DELETE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
	unix.IN_DELETE_SELF | unix.IN_MOVE_SELF

// maxEnded bounds notifier.ended; past it the set starts over, so a
// watch may then see the end of a session only by its probe-less re-read
// (see watch.get), at the next event of its key or at the session's
// expiry.
const maxEnded = 4096

// keyWatches are the open watches of one key in a handle, and the reads
// they share: an event wakes them all, and they need one read of the key
// between them, not one each (a leader's own watch and an [tenure.Observer]
// in the same process both wake on each of its renewals).
type keyWatches struct {
	ws  map[*watch]struct{}
	seq atomic.Uint64 // events dispatched for the key; written under notifier.mu

	mu   sync.Mutex
	last *keyRead // the read begun last, done or under way
	sess string   // the session last's record named, once last is done; "" if none
}

// keyRead is one read of a key, shared by the watches woken by the events
// dispatched before it began.
type keyRead struct {
	seq  uint64        // keyWatches.seq when it began
	done chan struct{} // closed once rec and err are set
	rec  tenure.Record
	sess string // the session the record names, if any
	err  error
}

// read reads the key for w. A watch woken by event ev (see
// notifier.dispatch) shares any read that began after ev was dispatched,
// waiting for it if it is under way: that read saw what ev announced. A
// read for any other reason (the first one, an expiry, a probe) is made
// afresh, since time alone changes a record's liveness.
func (kw *keyWatches) read(w *watch) (tenure.Record, string, error) {
	ev := w.pending.Swap(0)
	kw.mu.Lock()
	if r := kw.last; ev != 0 && r != nil && r.seq >= ev {
		kw.mu.Unlock()
		<-r.done
		return r.rec, r.sess, r.err
	}
	r := &keyRead{seq: kw.seq.Load(), done: make(chan struct{})}
	kw.last = r
	kw.mu.Unlock()
	w.s.watchReads.Add(1)
	r.rec, r.sess, r.err = w.s.getSession(w.key)
	// With the read's end: a session's end dispatched from now on finds
	// the key by it (see notifier.dispatchSession).
	kw.mu.Lock()
	if kw.last == r {
		kw.sess = r.sess
	}
	close(r.done)
	kw.mu.Unlock()
	return r.rec, r.sess, r.err
}

// add adds w to the watches woken by n; it reports false if n has ended.
func (n *notifier) add(w *watch) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.done {
		return false
	}
	kw := n.byKey[w.kf.base]
	if kw == nil {
		kw = &keyWatches{ws: map[*watch]struct{}{}}
		n.byKey[w.kf.base] = kw
	}
	kw.ws[w] = struct{}{}
	w.kw = kw
	n.n++
	return true
}

// remove removes w. When it was the last watch it closes the descriptor
// and waits for the reader to return, so that no descriptor or goroutine
// outlives the watches.
func (n *notifier) remove(w *watch) {
	n.mu.Lock()
	if kw := n.byKey[w.kf.base]; kw != nil {
		if _, ok := kw.ws[w]; ok {
			delete(kw.ws, w)
			n.n--
			if len(kw.ws) == 0 {
				delete(n.byKey, w.kf.base)
			}
		}
	}
	last := n.n == 0 && !n.done
	if last {
		n.done = true
	}
	n.mu.Unlock()
	if last {
		n.f.Close() // wakes read
		<-n.gone
	}
}

// end marks n ended and ends every watch still open: read stopped.
func (n *notifier) end() {
	n.mu.Lock()
	n.done = true
	var ws []*watch
	for _, kw := range n.byKey {
		for w := range kw.ws {
			ws = append(ws, w)
		}
	}
	n.mu.Unlock()
	for _, w := range ws {
		w.end()
	}
}

type watch struct {
	s   *Store
	n   *notifier
	kw  *keyWatches // the watches of its key, set by notifier.add
	key string
	kf  keyFiles

	wake    chan struct{} // a relevant event arrived (coalesced)
	pending atomic.Uint64 // the last event for the key not yet read after, 0 if none
	closing atomic.Uint64 // term whose liveness file was last closed for writing
	gone    chan struct{} // closed when the watch must end: released, or its notifier stopped
	endOnce sync.Once     // closes gone
	once    sync.Once     // release

	// Probing a holder whose liveness file was closed; only get uses
	// these, from Follow's goroutine.
	prober     *time.Timer // wakes Follow for the next probe
	probe      time.Duration
	probeUntil time.Time
}

// signal wakes Follow, unless a wake is pending already.
func (w *watch) signal() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// end closes gone, the first time.
func (w *watch) end() { w.endOnce.Do(func() { close(w.gone) }) }

// release stops the watch's wake-ups and, if it was the handle's last
// watch, frees the shared descriptor and its reader. It returns once that
// is done; later calls return at once.
func (w *watch) release() {
	w.once.Do(func() {
		w.prober.Stop()
		w.n.remove(w)
		w.end()
	})
}

// get reads the record for [tenure.Follow]. Follow re-reads by itself when
// a held grant's TTL passes; get adds the probes of a holder whose liveness
// file, or session file, was closed: the kernel posts the close before it
// drops the lock, so the holder may look live for a moment, and get wakes Follow again after
// a delay growing from probeMin to probeMax, for at most probeFor. A failed
// read releases the descriptor before Follow closes the channel.
func (w *watch) get(context.Context) (tenure.Record, error) {
	r, sess, err := w.kw.read(w)
	if err != nil {
		w.release()
		return r, err
	}
	if !r.Held() || r.Term != w.closing.Load() && (sess == "" || !w.n.sessionEnded(sess)) {
		w.probe = 0
		w.prober.Stop()
		return r, nil
	}
	now := time.Now()
	if w.probe == 0 {
		w.probe, w.probeUntil = probeMin, now.Add(probeFor)
	}
	if now.Before(w.probeUntil) {
		w.prober.Reset(w.probe)
		w.probe = min(w.probe*2, probeMax)
	}
	return r, nil
}

// read turns inotify events into wake-ups of the watches of the keys they
// concern until the descriptor is closed or the directory goes away; then
// it ends the watches left.
func (n *notifier) read() {
	defer close(n.gone)
	defer n.end()
	buf := make([]byte, 16<<10)
	rc, err := n.f.SyscallConn()
	if err != nil {
		return
	}
	for {
		nr, err := n.readRaw(rc, buf)
		if err != nil {
			return
		}
		ended := false
		n.mu.Lock()
		for off := 0; off+unix.SizeofInotifyEvent <= nr; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameEnd := off + unix.SizeofInotifyEvent + int(ev.Len)
			if nameEnd > nr {
				break
			}
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:nameEnd]), "\x00")
			off = nameEnd
			switch {
			case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0:
				ended = true
			case int(ev.Wd) == n.swd && ev.Mask&unix.IN_Q_OVERFLOW == 0:
				n.dispatchSession(name)
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				for _, kw := range n.byKey {
					n.wake(kw, 0)
				}
			default:
				n.dispatch(name, ev.Mask)
			}
		}
		n.mu.Unlock()
		if ended {
			n.f.Close()
			return
		}
	}
}

// readRaw reads events into buf, waiting in the runtime's poller while
// there are none. The descriptor is non-blocking, so the read(2) is made
// as a raw system call: a blocking one would wake the runtime's monitor
// thread (sysmon) from its sleep, which cost an idle process more than the
// read itself for every event in the directory, mostly other keys'. It
// fails once the descriptor is closed.
func (n *notifier) readRaw(rc syscall.RawConn, buf []byte) (int, error) {
	var nr int
	var errno syscall.Errno
	err := rc.Read(func(fd uintptr) bool {
		r, _, e := syscall.RawSyscall(syscall.SYS_READ, fd, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
		nr, errno = int(r), e
		return e != syscall.EAGAIN && e != syscall.EINTR
	})
	switch {
	case err != nil:
		return 0, err
	case errno != 0:
		return 0, errno
	case nr == 0:
		return 0, io.EOF
	}
	return nr, nil
}

// dispatch wakes the watches concerned by an event on file name: the
// record or a liveness file of their key. The caller holds n.mu.
func (n *notifier) dispatch(name string, mask uint32) {
	if base, ok := strings.CutSuffix(name, ".state"); ok {
		if kw := n.byKey[base]; kw != nil {
			n.wake(kw, 0)
		}
		return
	}
	i := strings.LastIndex(name, ".holder.")
	if i < 0 || !isHolderName(name, name[:i]) {
		return
	}
	kw := n.byKey[name[:i]]
	if kw == nil {
		return
	}
	var closing uint64 // the term whose liveness file was closed, if that is the event
	if term, err := strconv.ParseUint(name[i+len(".holder."):], 10, 64); err == nil && mask&unix.IN_CLOSE_WRITE != 0 {
		closing = term
	}
	n.wake(kw, closing)
}

// dispatchSession handles an event on the file of session id: it
// remembers that the session ended, and wakes the watches of every key
// whose last read named it or has a read under way. A watch that saw the
// session live then either checked sessionEnded after this (and probes
// again: the kernel posts the close before it drops the lock; see
// watch.get), or is woken here: the read it saw was the key's last
// (which named id), or a later one is under way, or a later one named
// something else, which only an event of the key's record, which woke
// it too, can explain. The caller holds n.mu.
func (n *notifier) dispatchSession(id string) {
	if !validSessionID(id) {
		return
	}
	if len(n.ended) >= maxEnded {
		clear(n.ended)
	}
	n.ended[id] = struct{}{}
	for _, kw := range n.byKey {
		kw.mu.Lock()
		match := kw.sess == id
		if r := kw.last; r != nil && !match {
			select {
			case <-r.done:
			default:
				match = true // under way: it may see id live
			}
		}
		kw.mu.Unlock()
		if match {
			n.wake(kw, 0)
		}
	}
}

// sessionEnded reports whether an event said that session id ended.
func (n *notifier) sessionEnded(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	_, ok := n.ended[id]
	return ok
}

// wake numbers a new event for kw's key and wakes its watches, telling
// them first of the liveness file of term closing closed, if not 0 (terms
// start at 1). The caller holds n.mu.
func (n *notifier) wake(kw *keyWatches, closing uint64) {
	ev := kw.seq.Add(1)
	n.events.Add(1)
	for w := range kw.ws {
		if closing != 0 {
			w.closing.Store(closing)
		}
		w.pending.Store(ev)
		w.signal()
	}
}
