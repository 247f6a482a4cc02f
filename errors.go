package tenure

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors. Stores and the elector wrap them with %w, so test for them
// with [errors.Is]; never compare error strings.
var (
	// ErrHeld is returned by [Store.Acquire] when another grant of the key is
	// live. The returned error is a *[HeldError] carrying the current record.
	ErrHeld = errors.New("tenure: lease is held by another candidate")

	// ErrLost is returned by [Store.Renew] and [Store.Release] when the lease
	// passed is no longer the key's current grant: it expired, was released,
	// or another candidate took the key over. The store changed nothing.
	// It is also the cause of a leader context cancelled for that reason.
	ErrLost = errors.New("tenure: lease lost")

	// ErrRenewDeadline is the cause of a leader context cancelled because no
	// renewal succeeded within [Config.RenewDeadline]: leadership had become
	// doubtful, so the task was stopped before the store could grant the key
	// to anyone else.
	ErrRenewDeadline = errors.New("tenure: lease not renewed before the renew deadline")

	// ErrStalled is the cause of a leader context cancelled because the task
	// did not call [Progress] within [Config.StallTimeout].
	ErrStalled = errors.New("tenure: leader task stalled")

	// ErrInvalid is wrapped by every error about a bad argument or
	// configuration: an empty or over-long key or identity, a TTL ≤ 0, a
	// config whose durations are inconsistent, a malformed store URL, a
	// nil context or store given to a blocking call of this package.
	ErrInvalid = errors.New("tenure: invalid argument")

	// ErrClosed is returned by a store used after Close.
	ErrClosed = errors.New("tenure: store closed")

	// ErrUnknownScheme is returned by [Open] for a URL whose scheme no store
	// registered.
	ErrUnknownScheme = errors.New("tenure: unknown store scheme")

	// ErrUnavailable is wrapped by a store error that is expected to pass
	// by itself and says nothing is wrong: a peer group in the middle of an
	// election, say. The elector retries such errors like any other but
	// logs them at debug level instead of as warnings.
	ErrUnavailable = errors.New("tenure: temporarily unavailable")

	// ErrSteppedDown is the cause of a leader context cancelled because a
	// step-down was requested ([RequestStepDown]) for its term. The term
	// ends as released ([EventReleased]), not lost, and the elector keeps
	// campaigning; [Elector.Do] returns an error matching it.
	ErrSteppedDown = errors.New("tenure: leader stepped down on request")

	// ErrNoLeader is returned by [RequestStepDown] when nobody leads the key.
	ErrNoLeader = errors.New("tenure: nobody leads the key")

	// ErrRunning is returned by [Elector.Run] and [Elector.Do] when the
	// elector is already running.
	ErrRunning = errors.New("tenure: elector already running")

	// ErrTermsExhausted is wrapped by a [Store.Acquire] error when no term
	// greater than every term the key had can be granted: the key's term
	// counter, or a term the store handle saw, is the largest the store
	// can hold (2^64−1, or less where its counter is narrower) or cannot be
	// read as one. Only a record written from outside the store's code gets
	// there; granting a smaller term would break fencing, so the key stays
	// unusable until an operator repairs its record. The elector does not
	// retry it: [Elector.Run] and [Elector.Do] return it.
	ErrTermsExhausted = errors.New("tenure: no greater term can be granted")
)

// HeldError is the error [Store.Acquire] returns when the key is held. It
// matches [ErrHeld] under [errors.Is]; use [errors.As] to read the holder:
//
//	var held *tenure.HeldError
//	if errors.As(err, &held) {
//		log.Printf("%s leads until at least %s", held.Record.Holder, held.Record.Remaining)
//	}
type HeldError struct {
	// Record is the key's record as the store saw it when it refused.
	Record Record
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("tenure: key %q is held by %q (term %d, %s left)",
		e.Record.Key, e.Record.Holder, e.Record.Term, e.Record.Remaining.Round(1e6))
}

// Is reports whether target is [ErrHeld].
func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// checkContext refuses a nil ctx, given to what, with an error wrapping
// ErrInvalid: it would panic deep inside, maybe with a lock held or in a
// goroutine of its own.
func checkContext(ctx context.Context, what string) error {
	if ctx == nil {
		return invalidf("%s with a nil context (use context.Background() or context.TODO())", what)
	}
	return nil
}

// checkStore refuses a nil store or reader r, given to what.
func checkStore(r Reader, what string) error {
	if r == nil {
		return invalidf("%s with a nil store", what)
	}
	return nil
}

// invalidf returns an error wrapping ErrInvalid with a formatted message.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrInvalid}, args...)...)
}
