// Package ctxerr tells whether a context is done the way a store call must
// judge it, by its deadline as well as by its Err, and checks a store call
// before it starts the same way in every store.
package ctxerr

import (
	"context"
	"time"

	"github.com/tenurehq/tenure"
)

// Err returns ctx's error, or [context.DeadlineExceeded] once ctx's
// deadline has passed even if the context's own timer has not fired yet
// (it can lag on a busy machine, and a socket deadline set from ctx can
// fire first): a call made past its deadline is late either way.
func Err(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d, ok := ctx.Deadline(); ok && !time.Now().Before(d) {
		return context.DeadlineExceeded
	}
	return nil
}

// Usable is what a store checks before a call reaches its server or its
// files: [tenure.ErrClosed] if the store is closed, whatever ctx says (an
// elector must learn that its store is gone, a permanent error, rather
// than that one call was cancelled), else [Err] of ctx.
func Usable(ctx context.Context, closed bool) error {
	if closed {
		return tenure.ErrClosed
	}
	return Err(ctx)
}

// Call is [Usable] for a call on one key, which is checked first with
// [tenure.CheckKey]: a bad key is the caller's mistake whatever the
// store's state.
func Call(ctx context.Context, closed bool, key string) error {
	if err := tenure.CheckKey(key); err != nil {
		return err
	}
	return Usable(ctx, closed)
}

// Claim is [Call] for an Acquire: the key and the claim (identity, TTL,
// value) are checked first with [tenure.CheckClaim], then the store's
// state and ctx with [Usable].
func Claim(ctx context.Context, closed bool, key string, c tenure.Claim) error {
	if err := tenure.CheckClaim(key, c); err != nil {
		return err
	}
	return Usable(ctx, closed)
}
