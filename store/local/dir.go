//go:build linux

package local

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure/internal/dirsafe"
)

// termsDir is the subdirectory of the state directory that keeps, per key,
// the record of its last Acquire or Release: the term high-water mark that
// deleting the key's own files does not reset.
const termsDir = ".terms"

// maxLinks bounds the symbolic links followed while resolving a directory.
const maxLinks = 40

// openDir opens the absolute directory path, creating missing components,
// and checks it (checkDir). It walks one component at a time from /,
// relative to the previous directory's descriptor, and follows a symbolic
// link only if root or this user owns it: a link planted by another user
// is an error, not a redirect.
func openDir(path string, group bool) (*dirHandle, error) {
	fail := func(format string, args ...any) error {
		return fmt.Errorf("local: cannot use state directory %q: "+format, append([]any{path}, args...)...)
	}
	cur, err := unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, fail("open /: %v", err)
	}
	defer func() {
		if cur >= 0 {
			unix.Close(cur)
		}
	}()
	rest := splitPath(path)
	links := 0
	euid := uint32(os.Geteuid())
	where := "/" // the directory cur is, for messages
	for len(rest) > 0 {
		name := rest[0]
		rest = rest[1:]
		last := len(rest) == 0
		if err := checkAncestor(cur, where, euid, group); err != nil {
			return nil, fmt.Errorf("%w: cannot use state directory %q: %v", ErrUnsafe, path, err)
		}
		st, err := statOrCreate(cur, name, group, last)
		if err != nil {
			return nil, fail("%v", err)
		}
		if st.Mode&unix.S_IFMT == unix.S_IFLNK {
			if st.Uid != 0 && st.Uid != euid {
				return nil, fmt.Errorf("%w: cannot use state directory %q: its component %q is a symbolic link owned by uid %d, neither root nor this user; pass the real directory", ErrUnsafe, path, name, st.Uid)
			}
			if links++; links > maxLinks {
				return nil, fail("too many levels of symbolic links")
			}
			target, err := readLink(cur, name, &st)
			if err != nil {
				return nil, fail("%v", err)
			}
			if strings.HasPrefix(target, "/") {
				where = "/"
				unix.Close(cur)
				cur, err = unix.Open("/", unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
				if err != nil {
					cur = -1
					return nil, fail("open /: %v", err)
				}
			}
			rest = append(splitPath(target), rest...)
			continue
		}
		flags := unix.O_PATH | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		if last {
			flags = unix.O_RDONLY | unix.O_DIRECTORY | unix.O_NOFOLLOW | unix.O_CLOEXEC
		}
		next, err := unix.Openat(cur, name, flags, 0)
		if err != nil {
			return nil, fail("open %s: %v", name, err)
		}
		unix.Close(cur)
		cur = next
		where = filepath.Join(where, name)
		if last {
			f := os.NewFile(uintptr(cur), path)
			cur = -1
			d := &dirHandle{f: f, path: path, group: group, euid: euid}
			if err := d.check(); err != nil {
				f.Close()
				return nil, err
			}
			return d, nil
		}
	}
	// path was "/" or ended in a link to it.
	return nil, fail("the root directory cannot be a state directory")
}

// readLink returns the target of name, a symbolic link in directory cur
// whose status (owner checked by the caller) is st, and checks that the
// link read is that one.
func readLink(cur int, name string, st *unix.Stat_t) (string, error) {
	target, err := readlinkat(cur, name)
	if err != nil {
		return "", fmt.Errorf("read link %s: %v", name, err)
	}
	var again unix.Stat_t
	if err := unix.Fstatat(cur, name, &again, unix.AT_SYMLINK_NOFOLLOW); err != nil || again.Ino != st.Ino || again.Dev != st.Dev {
		return "", fmt.Errorf("the link %s changed while it was read; try again", name)
	}
	return target, nil
}

// checkAncestor refuses cur, a directory on the way to the state
// directory (where is its path, for messages), if a user other than root
// and this one could rename what it holds (see [dirsafe.CheckParent]).
func checkAncestor(cur int, where string, euid uint32, group bool) error {
	var st unix.Stat_t
	if err := unix.Fstat(cur, &st); err != nil {
		return fmt.Errorf("stat %s: %v", where, err)
	}
	if err := dirsafe.CheckParent(where, dirsafe.Owner{UID: st.Uid, GID: st.Gid, Mode: st.Mode}, euid, group); err != nil {
		return fmt.Errorf("%s, on the way to it, %v", where, err)
	}
	return nil
}

// statOrCreate stats name in the directory cur without following a link,
// creating it as a directory first if it is missing: private, or for a
// group store traversable by all and, if it is the state directory itself
// (last), shared with the group.
func statOrCreate(cur int, name string, group, last bool) (unix.Stat_t, error) {
	var st unix.Stat_t
	err := unix.Fstatat(cur, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if err != unix.ENOENT {
		if err != nil {
			return st, fmt.Errorf("%s: %v", name, err)
		}
		return st, nil
	}
	mode := uint32(0o700)
	if group {
		mode = 0o755
		if last {
			mode = 0o2770
		}
	}
	err = unix.Mkdirat(cur, name, mode)
	if err != nil && err != unix.EEXIST {
		return st, fmt.Errorf("create %s: %v", name, err)
	}
	if err == nil && last && group {
		// The umask may have cleared bits the group needs.
		if err := unix.Fchmodat(cur, name, mode, 0); err != nil {
			return st, fmt.Errorf("chmod %s: %v", name, err)
		}
	}
	if err := unix.Fstatat(cur, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		return st, fmt.Errorf("%s: %v", name, err)
	}
	return st, nil
}

// openDirAt opens (creating it if needed) the subdirectory name of d, with
// d's sharing, and checks it.
func openDirAt(d *dirHandle, name string, group bool) (*dirHandle, error) {
	mode := uint32(0o700)
	if group {
		mode = 0o2770
	}
	err := unix.Mkdirat(d.fd(), name, mode)
	if err == nil && group {
		err = unix.Fchmodat(d.fd(), name, mode, 0)
	}
	if err != nil && err != unix.EEXIST {
		return nil, fmt.Errorf("local: cannot create %s: %w", d.pathOf(name), err)
	}
	fd, err := unix.Openat(d.fd(), name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err == unix.ELOOP || err == unix.ENOTDIR {
		return nil, fmt.Errorf("%w: %s is not a directory (a symbolic link or a file); tenure keeps the terms there: remove it", ErrUnsafe, d.pathOf(name))
	}
	if err != nil {
		return nil, fmt.Errorf("local: cannot open %s: %w", d.pathOf(name), err)
	}
	sub := &dirHandle{f: os.NewFile(uintptr(fd), d.pathOf(name)), path: d.pathOf(name), group: group, euid: d.euid}
	if err := sub.check(); err != nil {
		sub.f.Close()
		return nil, err
	}
	return sub, nil
}

// check verifies the ownership and mode of an opened directory, and that
// it is on a local file system (checkLocalFS), and records its group.
func (d *dirHandle) check() error {
	var st unix.Stat_t
	if err := unix.Fstat(d.fd(), &st); err != nil {
		return fmt.Errorf("local: stat state directory %q: %w", d.path, err)
	}
	if err := checkLocalFS(d.fd(), d.path); err != nil {
		return err
	}
	d.gid = st.Gid
	d.id = idOf(&st)
	perm := st.Mode & 0o7777
	euid := uint32(os.Geteuid())
	if !d.group {
		switch {
		case st.Uid != euid:
			return fmt.Errorf("%w: state directory %q is owned by uid %d, not by this user (uid %d); pass --store file:///DIR with a directory you own, or ?shared=group to share it on purpose", ErrUnsafe, d.path, st.Uid, euid)
		case perm&0o022 != 0:
			return fmt.Errorf("%w: state directory %q is writable by group or others (mode %04o); run chmod go-w %s, or pass ?shared=group to share it with its group on purpose", ErrUnsafe, d.path, perm, d.path)
		}
		return nil
	}
	switch {
	case perm&0o002 != 0:
		return fmt.Errorf("%w: shared state directory %q is writable by others (mode %04o); run chmod o-w %s", ErrUnsafe, d.path, perm, d.path)
	case !inGroup(st.Gid):
		return fmt.Errorf("%w: shared state directory %q belongs to group %d, which this process is not in; run it with that group or chgrp the directory", ErrUnsafe, d.path, st.Gid)
	case perm&0o2000 == 0:
		return fmt.Errorf("%w: shared state directory %q is not setgid (mode %04o), so new files would not belong to its group; run chmod g+s %s", ErrUnsafe, d.path, perm, d.path)
	}
	return nil
}

// inGroup reports whether the process has gid as its effective or a
// supplementary group.
func inGroup(gid uint32) bool {
	if uint32(os.Getegid()) == gid {
		return true
	}
	groups, err := os.Getgroups()
	return err == nil && slices.Contains(groups, int(gid))
}

// splitPath returns the components of p, without empty ones and ".".
func splitPath(p string) []string {
	var out []string
	for _, c := range strings.Split(filepath.ToSlash(p), "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}

func readlinkat(dirfd int, name string) (string, error) {
	for size := 256; ; size *= 2 {
		buf := make([]byte, size)
		n, err := unix.Readlinkat(dirfd, name, buf)
		if err != nil {
			return "", err
		}
		if n < size {
			return string(buf[:n]), nil
		}
	}
}

// seen remembers, per state directory (by absolute path, so that a
// directory removed and created again, possibly with the same inode number,
// is still the same store) and key, the highest term this process has read
// or granted, so that even if every file of a key is
// deleted (its .terms record included) this process never hands out a term
// that is not greater; and, for that term, whether it was last seen held
// and with which TTL, so that the next grant after such a deletion still
// waits out its holder.
var seen = struct {
	sync.Mutex
	m map[seenKey]seenTerm
}{m: map[seenKey]seenTerm{}}

type seenKey struct {
	dir string
	key string
}

type seenTerm struct {
	term uint64
	ttl  time.Duration // of the grant of term, when it was seen held
	held bool          // term was last seen held, not released
}

// see records term for key and returns the highest term seen for it.
func (s *Store) see(key string, term uint64) uint64 {
	seen.Lock()
	defer seen.Unlock()
	k := seenKey{s.abs, key}
	if m := seen.m[k]; term > m.term {
		seen.m[k] = seenTerm{term: term}
	}
	return seen.m[k].term
}

// seeState records st, a record or .terms record of key: its term, and
// whether that term is held (a record read later of the same term
// replaces what an earlier one said, so a release is remembered).
func (s *Store) seeState(key string, st state) {
	seen.Lock()
	defer seen.Unlock()
	k := seenKey{s.abs, key}
	if m := seen.m[k]; st.Term > m.term || st.Term == m.term && st.Term != 0 {
		seen.m[k] = seenTerm{term: st.Term, ttl: time.Duration(st.TTL), held: st.Holder != ""}
	}
}

// remembered returns what this process last saw of key's highest term.
func (s *Store) remembered(key string) seenTerm {
	seen.Lock()
	defer seen.Unlock()
	return seen.m[seenKey{s.abs, key}]
}
