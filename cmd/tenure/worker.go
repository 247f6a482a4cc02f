package main

import (
	"context"
	"io"

	"github.com/tenurehq/tenure/cmd/tenure/internal/demoworker"
)

// workerCmdName is the hidden subcommand the demo, the tests and the
// benchmarks run as CMD under `tenure run`; see package demoworker.
const workerCmdName = "__demo-worker"

func workerCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	return demoworker.Run(ctx, args, stdout, stderr)
}

// Short names for the worker's records.
type (
	workerEvent = demoworker.Event
	history     = demoworker.History
)

var (
	parseEvent   = demoworker.Parse
	checkHistory = demoworker.Check
)
