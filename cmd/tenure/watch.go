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
	"github.com/tenurehq/tenure/internal/termsafe"
	"github.com/tenurehq/tenure/peer"
)

const watchHelp = `Usage: tenure watch [flags] --key KEY

Prints the current leader of KEY, then one line each time the leader or term
changes, including "no leader" when a holder releases or its lease expires,
until interrupted (SIGINT or SIGTERM; exit code 0). Lines start with the
local time the change was seen. With --json each line is an object with
the fields of "tenure status --json" but acquire_time, renew_time and
transitions (key, held, holder, term, ttl_ms, remaining_ms, value), plus
"time" (RFC 3339).

With --http ADDR it also serves the leadership view, as "tenure run --http"
does, without ever campaigning: one dashboard for a whole group. GET /
(JSON, or a live page in a browser), /healthz, /readyz (503: an observer
never leads; ?standbyok makes it 200), /events, /metrics.

With --exec CMD it runs CMD with /bin/sh -c once for the state found at
start, then on each change, with these added to its environment:
  TENURE_KEY     the key
  TENURE_LEADER  the leader's identity; "" when nobody leads
  TENURE_TERM    the term (the last one when nobody leads)
  TENURE_VALUE   what the leader published with tenure run --advertise, or ""
For a virtual IP, a DNS record, a notification. CMD inherits tenure's
environment ($TENURE_STORE included, if set) and its output goes to
stderr. A slow or failing CMD never delays the watch: runs are one at a
time, and changes seen while one runs are coalesced, so the next run gets
only the newest state (the latest state wins; the ones between are
skipped). A failing run is logged (its exit status, never the command
line) and the watch goes on. A run still going after --exec-timeout
(default 1m; 0: no limit) is stopped, SIGTERM to its process group and
SIGKILL 5s later, so that a hung CMD cannot hold back the states after it.
On SIGINT or SIGTERM a run in progress is stopped the same way, and
pending states are dropped. If tenure is killed, the run's shell is
killed with it (what the shell had started at that moment runs on).

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
	openCtx, cancel := context.WithTimeout(ctx, oneShotWait)
	store, err := openProbed(peer.WithLogger(openCtx, logger), o.store, o.key, logger)
	if err != nil {
		err = unanswered(openCtx, err) // before cancel, which would hide the deadline
	}
	cancel()
	if err != nil && ctx.Err() != nil {
		return exitOK // stopped while it waited for the store: a stop like any other
	}
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	var view *viewServer
	if o.httpAddr != "" {
		if view, err = listenView(o.httpAddr, o.key, store, logger); err != nil {
			return fail(stderr, err)
		}
		view.start(ctx, logger)
	}
	var hk *hook
	if o.exec != "" {
		hctx, stopHook := context.WithCancel(ctx)
		hk = newHook(hctx, string(o.exec), o.key, o.execTimeout, stderr, logger)
		defer hk.wait()
		defer stopHook()
	}
	obs := &tenure.Observer{Store: store, Key: o.key, Logger: logger}
	records := obs.Changes(ctx)
	if view != nil {
		records = view.follow(ctx, records) // one watch for the view, the metrics and the output
	}
	enc := json.NewEncoder(termsafe.Writer{W: stdout})
	for rec := range records {
		if hk != nil {
			hk.notify(rec)
		}
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
