//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package postgres

import (
	"errors"

	"golang.org/x/sys/unix"
)

// peekNothing reports whether socket fd has nothing to read and is open:
// a non-blocking peek of one byte would block.
func peekNothing(fd uintptr) bool {
	var b [1]byte
	_, _, err := unix.Recvfrom(int(fd), b[:], unix.MSG_PEEK|unix.MSG_DONTWAIT)
	return errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EWOULDBLOCK)
}
