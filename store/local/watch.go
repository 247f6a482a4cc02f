//go:build linux

package local

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
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
// with Get. Watch does not block; each watch costs one inotify descriptor
// and three goroutines until it ends.
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := s.checkCall(ctx, key); err != nil {
		return nil, err
	}
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
	// A non-blocking descriptor in an *os.File is served by the runtime
	// poller: Read parks the goroutine, and Close wakes it.
	w := &watch{
		s:    s,
		key:  key,
		kf:   s.files(key),
		f:    os.NewFile(uintptr(fd), "inotify"),
		wake: make(chan struct{}, 1),
		gone: make(chan struct{}),
	}
	w.prober = time.AfterFunc(time.Hour, w.signal)
	w.prober.Stop()
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		w.f.Close()
		return nil, tenure.ErrClosed
	}
	s.watches.Add(1)
	s.mu.Unlock()
	go w.read()
	// Follow runs on a context of its own, cancelled only once the
	// descriptor is released, so a closed channel means the watch holds
	// nothing any more.
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

type watch struct {
	s   *Store
	key string
	kf  keyFiles
	f   *os.File

	wake    chan struct{} // a relevant event arrived (coalesced)
	closing atomic.Uint64 // term whose liveness file was last closed for writing
	gone    chan struct{} // closed when read returns
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

// release stops the watch's reader and frees its descriptor. It returns
// once both are done; later calls return at once.
func (w *watch) release() {
	w.once.Do(func() {
		w.prober.Stop()
		w.f.Close() // wakes read
		<-w.gone
	})
}

// get reads the record for [tenure.Follow]. Follow re-reads by itself when
// a held grant's TTL passes; get adds the probes of a holder whose liveness
// file was closed: the kernel posts the close before it drops the lock, so
// the holder may look live for a moment, and get wakes Follow again after
// a delay growing from probeMin to probeMax, for at most probeFor. A failed
// read releases the descriptor before Follow closes the channel.
func (w *watch) get(context.Context) (tenure.Record, error) {
	r, err := w.s.get(w.key)
	if err != nil {
		w.release()
		return r, err
	}
	if !r.Held() || r.Term != w.closing.Load() {
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

// read turns inotify events about the key's files into wake-ups until the
// descriptor is closed or the directory goes away.
func (w *watch) read() {
	defer close(w.gone)
	buf := make([]byte, 16<<10)
	for {
		n, err := w.f.Read(buf)
		if err != nil {
			return
		}
		relevant, ended := false, false
		for off := 0; off+unix.SizeofInotifyEvent <= n; {
			ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
			nameEnd := off + unix.SizeofInotifyEvent + int(ev.Len)
			if nameEnd > n {
				break
			}
			name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:nameEnd]), "\x00")
			off = nameEnd
			switch {
			case ev.Mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF|unix.IN_IGNORED) != 0:
				ended = true
			case ev.Mask&unix.IN_Q_OVERFLOW != 0:
				relevant = true
			case name == w.kf.state:
				relevant = true
			case isHolderName(name, w.kf.base):
				relevant = true
				if ev.Mask&unix.IN_CLOSE_WRITE != 0 {
					if term, err := strconv.ParseUint(name[len(w.kf.base)+len(".holder."):], 10, 64); err == nil {
						w.closing.Store(term)
					}
				}
			}
		}
		if relevant {
			w.signal()
		}
		if ended {
			return
		}
	}
}
