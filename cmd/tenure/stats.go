package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"syscall"

	"github.com/tenurehq/tenure/internal/termsafe"
)

// quietLogger logs warnings and errors only, as text to w.
func quietLogger(w io.Writer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelWarn}))
}

// logFormatUsage is the usage of --log-format.
const logFormatUsage = "log lines as `text` (key=value) or json (one object per line)"

// newLogger returns the logger --log-format asks for, writing level and
// above to w. JSON lines give durations as text ("1.5s"), as text lines
// and tenure's flags do, not as slog's default count of nanoseconds.
func newLogger(w io.Writer, format string, level slog.Level) (*slog.Logger, error) {
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		opts.ReplaceAttr = durationText
		return slog.New(slog.NewJSONHandler(termsafe.Writer{W: w}, opts)), nil
	}
	return nil, usageErrorf("--log-format %q: want text or json", format)
}

// durationText is a ReplaceAttr that writes durations as text.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// debugStats prints the process's live heap and goroutine count on each
// SIGUSR1, for measuring the idle cost of an elector without disturbing
// it in between. It is enabled by the environment variable
// TENURE_DEBUG_STATS=1 and is not part of the supported interface. It
// returns a function that stops it.
func debugStats(w io.Writer) (stop func()) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done := make(chan struct{})
	go func() {
		samples := []metrics.Sample{
			{Name: "/gc/heap/live:bytes"},
			{Name: "/memory/classes/heap/objects:bytes"},
			{Name: "/sched/goroutines:goroutines"},
		}
		for {
			select {
			case <-done:
				return
			case <-usr1:
			}
			runtime.GC()
			metrics.Read(samples)
			fmt.Fprintf(w, "tenure-stats live_heap_bytes=%d heap_object_bytes=%d goroutines=%d\n",
				samples[0].Value.Uint64(), samples[1].Value.Uint64(), samples[2].Value.Uint64())
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(done)
	}
}
