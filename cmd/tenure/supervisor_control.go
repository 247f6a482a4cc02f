package main

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure"
)

// The control channel joins `tenure run` to its supervisor: a
// SOCK_SEQPACKET unix socket pair, the supervisor's end at its fd 3. Each
// message is 24 bytes: two little-endian int64 instants on CLOCK_MONOTONIC,
// in nanoseconds, at which the supervisor must SIGTERM its process group
// (the leader context's cancellation) and SIGKILL it (cancellation plus
// grace), then the term. The first message starts CMD: it carries the term
// for TENURE_TERM and, as SCM_RIGHTS, the store's lease files, which the
// supervisor keeps open (and away from CMD) while it lives. Later messages
// only move the deadlines forward. CLOCK_MONOTONIC is shared by every
// process of the machine and keeps counting while a process is stopped, so
// a frozen tenure cannot stretch them. End of file means tenure is gone (or,
// before the first message, that it stopped campaigning).
//
// The supervisor answers once, when CMD has exited and the rest of its
// group was killed: an 8-byte message, CMD's exit code as a little-endian
// int64 (see sendExit). tenure can then release the lease without waiting
// for the supervisor process itself to exit and be reaped.
//
// A socket rather than a pipe, so that the supervisor can be started while
// tenure campaigns and still receive the lease files once elected: starting
// it (a fresh tenure process, with every linked store's package init) is
// then off the failover's critical path.
const controlMsgLen = 24

type deadlineMsg struct {
	termAt, killAt int64
	term           uint64
}

func (m deadlineMsg) encode() []byte {
	b := make([]byte, controlMsgLen)
	binary.LittleEndian.PutUint64(b[0:], uint64(m.termAt))
	binary.LittleEndian.PutUint64(b[8:], uint64(m.killAt))
	binary.LittleEndian.PutUint64(b[16:], m.term)
	return b
}

// errControlClosed is the end of the control channel.
var errControlClosed = errors.New("tenure: control channel closed")

// recvControl reads one message and the files sent with it. The files are
// marked close-on-exec. errControlClosed means the peer is gone. It waits
// in the runtime's poller; see recvmsg.
func recvControl(c *net.UnixConn) (deadlineMsg, []int, error) {
	b := make([]byte, controlMsgLen+1)
	oob := make([]byte, unix.CmsgSpace(64*4))
	n, oobn, err := recvmsg(c, b, oob)
	var fds []int
	if oobn > 0 {
		msgs, perr := unix.ParseSocketControlMessage(oob[:oobn])
		for _, m := range msgs {
			if rights, err := unix.ParseUnixRights(&m); err == nil {
				fds = append(fds, rights...)
			}
		}
		for _, fd := range fds {
			unix.CloseOnExec(fd)
		}
		if perr != nil && err == nil {
			err = perr
		}
	}
	if err != nil || n == 0 {
		return deadlineMsg{}, fds, errControlClosed
	}
	if n != controlMsgLen {
		return deadlineMsg{}, fds, fmt.Errorf("tenure: control message of %d bytes, want %d", n, controlMsgLen)
	}
	return deadlineMsg{
		termAt: int64(binary.LittleEndian.Uint64(b[0:])),
		killAt: int64(binary.LittleEndian.Uint64(b[8:])),
		term:   binary.LittleEndian.Uint64(b[16:]),
	}, fds, nil
}

// recvmsg reads one message into b and its control data into oob, as
// ReadMsgUnix does, but with a raw recvmsg(2) (the socket is non-blocking,
// and the runtime's poller does the waiting): a system call made the
// ordinary way wakes the runtime's monitor thread (sysmon) from its sleep,
// and for an idle supervisor, whose only work is one such message per
// renewal, that wake-up cost more than the message. MSG_CMSG_CLOEXEC
// makes received descriptors close-on-exec at once.
func recvmsg(c *net.UnixConn, b, oob []byte) (n, oobn int, err error) {
	rc, err := c.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var errno syscall.Errno
	err = rc.Read(func(fd uintptr) bool {
		iov := unix.Iovec{Base: &b[0]}
		iov.SetLen(len(b))
		msg := unix.Msghdr{Iov: &iov, Iovlen: 1, Control: &oob[0]}
		msg.SetControllen(len(oob))
		r, _, e := syscall.RawSyscall(unix.SYS_RECVMSG, fd, uintptr(unsafe.Pointer(&msg)), unix.MSG_CMSG_CLOEXEC)
		n, oobn, errno = int(r), int(msg.Controllen), e
		return e != unix.EAGAIN && e != unix.EINTR
	})
	if err == nil && errno != 0 {
		err = errno
	}
	if err != nil {
		return 0, 0, err
	}
	return n, oobn, nil
}

const exitMsgLen = 8

// sendExit reports CMD's exit code to tenure. Errors (tenure is gone) are
// ignored.
func sendExit(c *net.UnixConn, code int) {
	var b [exitMsgLen]byte
	binary.LittleEndian.PutUint64(b[:], uint64(int64(code)))
	_, _ = c.Write(b[:])
}

// recvExit waits for the supervisor's report of CMD's exit code; ok is
// false if the channel closed without one.
func recvExit(c *net.UnixConn) (code int, ok bool) {
	var b [exitMsgLen + 1]byte
	n, err := c.Read(b[:])
	if err != nil || n != exitMsgLen {
		return 0, false
	}
	return int(int64(binary.LittleEndian.Uint64(b[:]))), true
}

// controlPair returns the two ends of a new control channel: tenure's, and
// the file to pass to the supervisor as its fd 3 (close it once started).
func controlPair() (*net.UnixConn, *os.File, error) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_SEQPACKET|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	ours := os.NewFile(uintptr(fds[0]), "tenure-control")
	defer ours.Close()
	c, err := net.FileConn(ours)
	if err != nil {
		unix.Close(fds[1])
		return nil, nil, fmt.Errorf("control socket: %w", err)
	}
	return c.(*net.UnixConn), os.NewFile(uintptr(fds[1]), "tenure-control"), nil
}

// monoNow returns CLOCK_MONOTONIC in nanoseconds. clock_gettime(2) never
// blocks, so it is made as a raw system call, which does not wake the
// runtime's monitor thread as unix.ClockGettime does (see recvmsg).
func monoNow() int64 {
	var ts unix.Timespec
	if _, _, e := syscall.RawSyscall(unix.SYS_CLOCK_GETTIME, unix.CLOCK_MONOTONIC, uintptr(unsafe.Pointer(&ts)), 0); e != 0 {
		panic("tenure: CLOCK_MONOTONIC unavailable: " + e.Error())
	}
	return ts.Nano()
}

// monoAt converts t, a time carrying Go's monotonic reading, to a
// CLOCK_MONOTONIC instant (Go's monotonic clock is CLOCK_MONOTONIC on Linux,
// so only the read-out offset matters).
func monoAt(t time.Time) int64 { return monoNow() + int64(time.Until(t)) }

// deadlineFeed sends the supervisor of one term the deadlines it enforces,
// the term's own ([tenure.Term.Deadlines]). They only move forward: each
// stop deadline is the time a successful renewal (or the acquisition) was
// sent plus the renew deadline, and its kill deadline grace later, both
// before the store can grant the key to anyone else. Safe for concurrent
// use.
type deadlineFeed struct {
	grace time.Duration // --grace

	mu      sync.Mutex
	c       *net.UnixConn
	started bool
	latest  time.Time
}

func msg(stop, kill time.Time, term uint64) []byte {
	return deadlineMsg{termAt: monoAt(stop), killAt: monoAt(kill), term: term}.encode()
}

// start sends the first message: CMD may start, in term, until term's
// deadlines; files are the lease files the supervisor must hold.
func (f *deadlineFeed) start(term *tenure.Term, files []*os.File) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	stop, kill := term.Deadlines(f.grace)
	var oob []byte
	if len(files) > 0 {
		fds := make([]int, len(files))
		for i, file := range files {
			fds[i] = int(file.Fd())
		}
		oob = unix.UnixRights(fds...)
	}
	if _, _, err := f.c.WriteMsgUnix(msg(stop, kill, term.Lease().Term), oob, nil); err != nil {
		return fmt.Errorf("cannot reach the supervisor: %w", err)
	}
	f.started, f.latest = true, stop
	return nil
}

// advance passes term's deadlines on to the supervisor if they moved
// since the last message (a no-op before start). Errors (the supervisor is
// gone) are ignored: its end is noticed by waiting for it.
func (f *deadlineFeed) advance(term *tenure.Term) {
	f.mu.Lock()
	defer f.mu.Unlock()
	stop, kill := term.Deadlines(f.grace)
	if !f.started || !stop.After(f.latest) {
		return
	}
	f.latest = stop
	_, _ = f.c.Write(msg(stop, kill, 0))
}
