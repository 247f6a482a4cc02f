//go:build linux

package local_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dirEvents watches dir with inotify (every event) and returns a function
// that returns the events read so far, as "NAME MASK" strings.
func dirEvents(t *testing.T, dir string) func() []string {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_ALL_EVENTS); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		var out []string
		buf := make([]byte, 64<<10)
		for {
			n, err := unix.Read(fd, buf)
			if err != nil || n <= 0 {
				return out
			}
			for off := 0; off+unix.SizeofInotifyEvent <= n; {
				ev := (*unix.InotifyEvent)(unsafe.Pointer(&buf[off]))
				end := off + unix.SizeofInotifyEvent + int(ev.Len)
				name := strings.TrimRight(string(buf[off+unix.SizeofInotifyEvent:end]), "\x00")
				if ev.Mask&(unix.IN_ACCESS|unix.IN_OPEN|unix.IN_CLOSE_NOWRITE|unix.IN_MODIFY|unix.IN_ATTRIB) == 0 {
					out = append(out, name+" "+maskName(ev.Mask))
				}
				off = end
			}
		}
	}
}

func maskName(m uint32) string {
	var s []string
	for _, b := range []struct {
		bit  uint32
		name string
	}{{unix.IN_CREATE, "CREATE"}, {unix.IN_CLOSE_WRITE, "CLOSE_WRITE"}, {unix.IN_MOVED_FROM, "MOVED_FROM"},
		{unix.IN_MOVED_TO, "MOVED_TO"}, {unix.IN_DELETE, "DELETE"}} {
		if m&b.bit != 0 {
			s = append(s, b.name)
		}
	}
	return strings.Join(s, "|")
}

// A renewal rewrites the record through a temporary file outside the
// state directory: its watchers (in every process using the directory)
// see the record renamed into place, not a temporary file created,
// written and renamed away, each of which wakes them.
func TestRenewShowsInTheDirectoryAsTheRecordOnly(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir)
	l := acquire(t, s, "quiet", "me", time.Minute)
	events := dirEvents(t, dir)
	for range 3 {
		if err := s.Renew(context.Background(), l); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range events() {
		if strings.Contains(ev, ".tmp.") {
			t.Errorf("renewals showed a temporary file in the state directory: %s", ev)
		}
	}
}
