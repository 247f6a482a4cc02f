// Package ctxerr tells whether a context is done the way a store call must
// judge it: by its deadline as well as by its Err.
package ctxerr

import (
	"context"
	"time"
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
