//go:build !linux

package local

import (
	"context"
	"errors"
	"os"
	"time"

	"github.com/tenurehq/tenure"
)

// errUnsupported is returned by Open outside Linux.
var errUnsupported = errors.New("local: the local store needs Linux (OFD locks, inotify, CLOCK_BOOTTIME)")

// Store is a handle on a state directory; outside Linux it cannot be opened.
type Store struct{}

// Store also has LeaseFiles, which `tenure run` uses (declaring the
// interface itself, as its only consumer; its tests assert that *Store
// has it).
var (
	_ tenure.Publisher = (*Store)(nil)
)

// Open fails outside Linux.
func Open(dir string, opts ...Option) (*Store, error) { return nil, errUnsupported }

// Dir returns "".
func (s *Store) Dir() string { return "" }

// Acquire fails outside Linux.
func (s *Store) Acquire(context.Context, string, string, time.Duration) (tenure.Lease, error) {
	return tenure.Lease{}, errUnsupported
}

// AcquireClaim fails outside Linux.
func (s *Store) AcquireClaim(context.Context, string, tenure.Claim) (tenure.Lease, error) {
	return tenure.Lease{}, errUnsupported
}

// Renew fails outside Linux.
func (s *Store) Renew(context.Context, tenure.Lease) error { return errUnsupported }

// Release fails outside Linux.
func (s *Store) Release(context.Context, tenure.Lease) error { return errUnsupported }

// Get fails outside Linux.
func (s *Store) Get(context.Context, string) (tenure.Record, error) {
	return tenure.Record{}, errUnsupported
}

// Watch fails outside Linux.
func (s *Store) Watch(context.Context, string) (<-chan tenure.Record, error) {
	return nil, errUnsupported
}

// LeaseFiles fails outside Linux.
func (s *Store) LeaseFiles(tenure.Lease) ([]*os.File, error) { return nil, errUnsupported }

// OpenSession fails outside Linux.
func (s *Store) OpenSession(context.Context, time.Duration) (tenure.StoreSession, error) {
	return nil, errUnsupported
}

// Close does nothing.
func (s *Store) Close() error { return nil }
