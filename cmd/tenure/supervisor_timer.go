package main

import (
	"fmt"
	"os"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deadlineTimer fires when CLOCK_MONOTONIC reaches the instant it is set
// to. It is a timerfd in the runtime's poller, not a time.Timer: the
// supervisor moves its deadlines later at every renewal, and the Go
// runtime keeps a timer moved later at its old place until that old time
// comes, waking a thread (and its monitor thread, sysmon) for nothing
// once per renewal. The kernel re-arms a timerfd in place. Set may be
// called from one goroutine at a time; C may deliver an expiry of an
// earlier setting, so a receiver checks the time itself.
type deadlineTimer struct {
	fd int
	f  *os.File      // fd, read by the goroutine that feeds C
	C  chan struct{} // receives after each expiry (at most one pending)
}

// newDeadlineTimer returns a timer set to the CLOCK_MONOTONIC instant at.
// Its goroutine ends when the process does: the supervisor has two such
// timers for its whole life.
func newDeadlineTimer(at int64) (*deadlineTimer, error) {
	fd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("timerfd_create: %w", err)
	}
	t := &deadlineTimer{fd: fd, C: make(chan struct{}, 1)}
	if err := t.Set(at); err != nil {
		unix.Close(fd)
		return nil, err
	}
	t.f = os.NewFile(uintptr(fd), "deadline timer") // non-blocking: read through the poller
	go t.feed()
	return t, nil
}

// Set arms t for the CLOCK_MONOTONIC instant at (at once if it has
// passed). timerfd_settime never blocks, so it is a raw system call, which
// does not wake sysmon (see recvmsg).
func (t *deadlineTimer) Set(at int64) error {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(max(at, 1))} // 0 would disarm it
	if _, _, e := syscall.RawSyscall6(unix.SYS_TIMERFD_SETTIME, uintptr(t.fd), unix.TFD_TIMER_ABSTIME, uintptr(unsafe.Pointer(&spec)), 0, 0, 0); e != 0 {
		return fmt.Errorf("timerfd_settime: %w", e)
	}
	return nil
}

// feed delivers t's expiries on C.
func (t *deadlineTimer) feed() {
	var b [8]byte // the expiry count
	for {
		if _, err := t.f.Read(b[:]); err != nil {
			return
		}
		select {
		case t.C <- struct{}{}:
		default: // one pending expiry says it all
		}
	}
}
