package main

import (
	"context"
	"fmt"
	"io"
)

// evictionChecker is a store that checks the server's eviction policy
// (the Redis store; see its EvictionCheck).
type evictionChecker interface {
	EvictionCheck(ctx context.Context) (string, error)
}

// storeChecks returns what the store checked of its server's configuration,
// one line each, for `tenure status`; a check that failed is a line that
// says so. Stores that check nothing give none.
func storeChecks(ctx context.Context, store any) []string {
	c, ok := store.(evictionChecker)
	if !ok {
		return nil
	}
	what, err := c.EvictionCheck(ctx)
	if err != nil {
		return []string{fmt.Sprintf("store check FAILED: %v", err)}
	}
	return []string{"store check: " + what}
}

// printChecks writes the store's check lines (text output only).
func printChecks(w io.Writer, checks []string) {
	for _, c := range checks {
		fmt.Fprintln(w, c)
	}
}
