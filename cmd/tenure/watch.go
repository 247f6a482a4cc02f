package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
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

Flags:
`

// watchCmd is `tenure watch`.
func watchCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("watch")
	sf := addStoreFlags(fs)
	key := fs.String("key", "", "the lease `KEY` (required)")
	asJSON := fs.Bool("json", false, "print one JSON object per line")
	if code, done := parseFlags(fs, args, watchHelp, stdout, stderr); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return fail(stderr, err)
	}
	if err := checkKeyFlag(*key); err != nil {
		return fail(stderr, err)
	}
	src, err := sf.resolve(os.Getenv)
	if err != nil {
		return fail(stderr, err)
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	openCtx, cancel := context.WithTimeout(ctx, 30*time.Second)
	store, err := openStore(peer.WithLogger(openCtx, quietLogger(stderr)), src)
	if err == nil {
		if _, err = store.Get(openCtx, *key); err != nil {
			store.Close()
			err = fmt.Errorf("cannot read key %q: %w", *key, err)
		}
	}
	cancel()
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	obs := &tenure.Observer{Store: store, Key: *key, Logger: quietLogger(stderr)}
	enc := json.NewEncoder(stdout)
	for rec := range obs.Changes(ctx) {
		now := time.Now()
		if *asJSON {
			j := toJSON(rec)
			j.Time = now.Format(time.RFC3339Nano)
			_ = enc.Encode(j)
		} else {
			fmt.Fprintf(stdout, "%s %s\n", now.Format("15:04:05.000"), describe(rec))
		}
	}
	return exitOK
}
