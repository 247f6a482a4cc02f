// Command leanworker is the demo worker (package demoworker) on its own,
// without the rest of tenure, for the benchmarks: a small binary starts in
// about a millisecond, where the tenure binary, with every store SDK's
// package initialisation, takes many.
package main

import (
	"context"
	"os"

	"github.com/tenurehq/tenure/cmd/tenure/internal/demoworker"
)

func main() {
	os.Exit(demoworker.Run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}
