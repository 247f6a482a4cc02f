//go:build linux

package local

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// Store is a handle on a state directory. Handles are independent: two
// handles on one directory, in one process or in two, coordinate exactly as
// two processes do. All methods are safe for concurrent use.
type Store struct {
	dir    string
	d      *dirHandle // the state directory
	t      *dirHandle // its .terms directory
	abs    string     // absolute path of dir, naming it in seen
	bootID string

	mu      sync.Mutex
	closed  bool
	done    chan struct{}         // closed by Close; ends watches
	grants  map[string]*grant     // live grants made through this handle, by token
	sd      *dirHandle            // its .sessions directory (see sessDir)
	sdOld   []*dirHandle          // .sessions directories replaced since Open, closed by Close
	sess    map[*session]struct{} // open sessions, ended by Close
	nw      *notifier             // the inotify descriptor the watches share, if one was set up
	watches sync.WaitGroup

	// For tests: the events dispatched to watches, and the reads made
	// for them.
	watchEvents, watchReads atomic.Uint64
}

// grant is a lease acquired through this handle: its liveness file, whose
// OFD write lock stands for the holder being alive.
type grant struct {
	key  string
	term uint64
	f    *os.File
	id   fileID // f's
	name string // of f in the state directory
}

// Store also has LeaseFiles, which `tenure run` uses (declaring the
// interface itself, as its only consumer; its tests assert that *Store
// has it).
var (
	_ tenure.Publisher = (*Store)(nil)
)

// Open returns a handle on the state directory dir, creating it and its
// missing parents (mode 0700; with [GroupShared] the directory 02770 and
// its parents 0755) if needed, its .terms subdirectory, which keeps the
// highest term of every key, and its .sessions subdirectory, which holds
// the files of sessions (see [Store.OpenSession]).
//
// Open resolves dir one component at a time and follows a symbolic link
// only if it belongs to root or to this user, so nobody else can redirect
// it; every later file operation is relative to the opened directory and
// never follows a link. The directory must be owned by this user and not
// writable by group or others, or, with [GroupShared], be setgid, belong
// to a group of this process and not be writable by others. Errors fit on
// one line, name dir and say how to fix it; a directory that fails these
// checks wraps [ErrUnsafe].
func Open(dir string, opts ...Option) (*Store, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: local store directory is empty", tenure.ErrInvalid)
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("local: cannot use state directory %q: %w", dir, err)
	}
	d, err := openDir(abs, o.group)
	if err != nil {
		return nil, err
	}
	d.path = dir
	d.recs = newRecordCache()
	if err := unix.Faccessat(d.fd(), ".", unix.R_OK|unix.W_OK|unix.X_OK, 0); err != nil {
		d.f.Close()
		return nil, fmt.Errorf("local: cannot use state directory %q: need read, write and search permission: %w", dir, err)
	}
	t, err := openDirAt(d, termsDir, o.group)
	if err != nil {
		d.f.Close()
		return nil, err
	}
	sd, err := openDirAt(d, sessionsDir, o.group)
	if err != nil {
		d.f.Close()
		t.f.Close()
		return nil, err
	}
	boot, err := readBootID()
	if err != nil {
		d.f.Close()
		t.f.Close()
		sd.f.Close()
		return nil, err
	}
	return &Store{
		sd:     sd,
		sess:   map[*session]struct{}{},
		dir:    dir,
		d:      d,
		t:      t,
		abs:    abs,
		bootID: boot,
		done:   make(chan struct{}),
		grants: map[string]*grant{},
	}, nil
}

// Dir returns the state directory of the handle.
func (s *Store) Dir() string { return s.dir }

// checkOpen returns ErrClosed after Close.
func (s *Store) checkOpen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return tenure.ErrClosed
	}
	return nil
}

// LeaseFiles returns the liveness file of l, whose OFD write lock the
// kernel holds for as long as any process has the file open. A child
// process that inherits it (for example through
// [os/exec.Cmd.ExtraFiles]) shares the lock, because an OFD lock belongs to
// the open file description: l then stays live, within its TTL, until both this
// process and the child have exited or closed it. The files stay owned by
// the store: do not close them; they are closed by Release or Close. A
// grant made in a session has no file of its own (its session's file
// stands for it): LeaseFiles fails for it with [tenure.ErrLost].
func (s *Store) LeaseFiles(l tenure.Lease) ([]*os.File, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, tenure.ErrClosed
	}
	g := s.grants[l.Token]
	if g == nil || g.key != l.Key || g.term != l.Term {
		return nil, fmt.Errorf("%w: key %q term %d is not held through this handle", tenure.ErrLost, l.Key, l.Term)
	}
	return []*os.File{g.f}, nil
}

// Close ends the handle: the liveness files of its grants and the files of
// its sessions are closed, so those grants end at once (as if the process
// had died) unless a child process shares them, and its watches end. Later calls return
// [tenure.ErrClosed]. Close does not block beyond waiting for the watch
// goroutines to return; calling it again does nothing.
func (s *Store) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	close(s.done)
	grants, sessions := s.grants, s.sess
	s.grants, s.sess = nil, nil
	s.mu.Unlock()
	for _, g := range grants {
		g.f.Close()
	}
	for ss := range sessions {
		ss.end()
	}
	s.watches.Wait()
	s.t.f.Close()
	for _, sd := range append(s.sdOld, s.sd) {
		if sd != nil {
			sd.f.Close()
		}
	}
	return s.d.f.Close()
}

// addGrant remembers g; it fails if the handle was closed meanwhile. Any
// earlier grant of the same key through this handle is over (the key was
// granted again), so its liveness file is closed.
func (s *Store) addGrant(token string, g *grant) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return tenure.ErrClosed
	}
	for tok, old := range s.grants {
		if old.key == g.key {
			old.f.Close()
			delete(s.grants, tok)
		}
	}
	s.grants[token] = g
	return nil
}

// dropKey forgets the grant of key made through this handle without a
// session, if any, and closes its liveness file: the key was granted
// again, in a session.
func (s *Store) dropKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for tok, old := range s.grants {
		if old.key == key {
			old.f.Close()
			delete(s.grants, tok)
		}
	}
}

// owns reports whether l was acquired through this handle and is still
// remembered by it.
func (s *Store) owns(l tenure.Lease) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.grants[l.Token]
	return g != nil && g.key == l.Key && g.term == l.Term
}

// grantFile returns the identity of l's liveness file, and true, if l was
// acquired through this handle and is still remembered by it. Once the
// grant is released the file is gone from the directory, or (if its
// removal failed) no longer locked, which the callers check first.
func (s *Store) grantFile(l tenure.Lease) (fileID, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	g := s.grants[l.Token]
	if g == nil || g.key != l.Key || g.term != l.Term {
		return fileID{}, false
	}
	return g.id, true
}

// dropGrant forgets the grant of token, if this handle made it, and closes
// its liveness file; it reports whether there was one.
func (s *Store) dropGrant(token string) bool {
	s.mu.Lock()
	g := s.grants[token]
	delete(s.grants, token)
	s.mu.Unlock()
	if g == nil {
		return false
	}
	s.d.recs.forget(s.files(g.key).state)
	g.f.Close()
	return true
}
