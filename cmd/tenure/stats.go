package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"runtime/metrics"
	"time"
)

// quietLogger logs warnings and errors only, as text to w.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// debugStats prints the process's live heap and goroutine count every
// period, for measuring the idle cost of an elector. It is enabled by the
// environment variable TENURE_DEBUG_STATS=<duration> and is not part of the
// supported interface.
func debugStats(ctx context.Context, w io.Writer, every time.Duration) {
	samples := []metrics.Sample{
		{Name: "/gc/heap/live:bytes"},
		{Name: "/memory/classes/heap/objects:bytes"},
		{Name: "/sched/goroutines:goroutines"},
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		runtime.GC()
		metrics.Read(samples)
		fmt.Fprintf(w, "tenure-stats live_heap_bytes=%d heap_object_bytes=%d goroutines=%d\n",
			samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64())
	}
}
