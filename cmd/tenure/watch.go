package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os/signal"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

const watchHelp = `Usage: tenure watch [flags] --key KEY

Prints the current leader of KEY, then one line each time the leader or term
changes, including "no leader" when a holder releases or its lease expires,
until interrupted (SIGINT or SIGTERM; exit code 0). Lines start with the
local time the change was seen. With --json each line is an object shaped as
in "tenure status --json" plus "time" (RFC 3339).

With --http ADDR it also serves the leadership view, as "tenure run --http"
does, without ever campaigning: one dashboard for a whole group. GET /
(JSON, or a live page in a browser), /healthz, /readyz (503: an observer
never leads; ?standbyok makes it 200), /events, /metrics.

Flags:
`

// watchCmd is `tenure watch`.
func watchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, done := parseKeyCmd("watch", watchHelp, "print one JSON object per line", args, stdout, stderr)
	if done {
		return code
	}
	logger, err := newLogger(stderr, o.logFormat, slog.LevelWarn)
	if err != nil {
		return fail(stderr, err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	store, err := openProbed(peer.WithLogger(openCtx, logger), o.store, o.key)
	cancel()
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	if o.httpAddr != "" {
		view, err := listenView(o.httpAddr, o.key, store, logger)
		if err != nil {
			return fail(stderr, err)
		}
		view.serve(ctx, logger)
	}
	obs := &tenure.Observer{Store: store, Key: o.key, Logger: logger}
	enc := json.NewEncoder(stdout)
	for rec := range obs.Changes(ctx) {
		now := time.Now()
		if o.json {
			j := toJSON(rec)
			j.Time = now.Format(time.RFC3339Nano)
			_ = enc.Encode(j)
		} else {
			fmt.Fprintf(stdout, "%s %s\n", now.Format("15:04:05.000"), describe(rec))
		}
	}
	return exitOK
}
