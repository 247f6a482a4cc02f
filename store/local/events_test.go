//go:build linux

package local_test

import (
	"context"
	"strings"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
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

// TestWatchesOfAKeyShareOneReadPerEvent: two watches of one key in one
// handle (a leader's own and an Observer's, in `tenure run --http`) are
// woken together by each event and read the key once between them, not
// once each; and both still see every change of holder and term.
func TestWatchesOfAKeyShareOneReadPerEvent(t *testing.T) {
	t.Parallel()
	s := open(t, t.TempDir())
	ctx := t.Context()
	var chans []<-chan tenure.Record
	for range 2 {
		ch, err := s.Watch(ctx, "k")
		if err != nil {
			t.Fatalf("Watch: %v", err)
		}
		<-ch // the current record
		chans = append(chans, ch)
	}
	// next waits until every watch has delivered a record of term and
	// holder (free if "").
	next := func(term uint64, holder string) {
		t.Helper()
		for i, ch := range chans {
			for r := range ch {
				if r.Term == term && r.Holder == holder {
					break
				}
				if r.Term > term {
					t.Fatalf("watch %d: got %+v before term %d held by %q", i, r, term, holder)
				}
			}
		}
	}
	events0, reads0 := local.WatchCounts(s)
	const rounds = 20
	for i := range rounds {
		l, err := s.Acquire(ctx, "k", "a", time.Minute)
		if err != nil {
			t.Fatalf("Acquire: %v", err)
		}
		next(uint64(i+1), "a")
		if err := s.Renew(ctx, l); err != nil {
			t.Fatalf("Renew: %v", err)
		}
		if err := s.Release(ctx, l); err != nil {
			t.Fatalf("Release: %v", err)
		}
		next(uint64(i+1), "")
	}
	events1, reads1 := local.WatchCounts(s)
	events, reads := events1-events0, reads1-reads0
	t.Logf("%d rounds: %d events, %d reads for 2 watches", rounds, events, reads)
	if events < 3*rounds {
		t.Fatalf("%d events in %d rounds of Acquire, Renew and Release; want at least %d", events, rounds, 3*rounds)
	}
	// One read per event, and now and then one more where the second
	// watch woke after a later event had come; one each would be 2×.
	if reads > events+events/4 {
		t.Errorf("%d reads for %d events of 2 watches; want about one per event", reads, events)
	}
}
