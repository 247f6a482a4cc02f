package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
)

const preferHelp = `Usage: tenure prefer [flags] --key KEY ID

Sets candidate ID as the preferred holder of KEY, as a Kubernetes Lease's
preferredHolder, for as long as this command runs (stop it with Ctrl-C or
SIGTERM to clear the preference). While it holds, the leading tenure run
hands KEY over to ID (a step-down to ID, window one TTL) once it has seen
ID registered as a candidate for --delay without a break, so a flapping
node does not bounce leadership; and when KEY is free, ID goes first. A
candidate of priority 0 is never handed the key. One preference at a time:
a second tenure prefer waits for the first to end.

The preference is a grant of KEY~tenure-prefer (KEY at most 236 bytes),
renewed by this command: if it dies, the preference lapses within --ttl.
Peer modes have no shared key for it: use --priority there.

Exit codes: 0 the preference was set and cleared on a signal; 1 a runtime
error; 2 a bad command line.

Flags:
`

// preferOpts is a validated `tenure prefer` command line.
type preferOpts struct {
	store  storeSource
	key    string
	holder string
	delay  time.Duration
	ttl    time.Duration
	issuer string
	logger *slog.Logger // --log-format, --quiet
}

func parsePrefer(args []string, stdout, stderr io.Writer) (o preferOpts, code int, done bool) {
	fs := newFlagSet("prefer")
	sf := addStoreFlags(fs)
	fs.StringVar(&o.key, "key", "", "the lease `KEY` to set a preferred holder on (required)")
	fs.DurationVar(&o.delay, "delay", 0, "hand over once the leader has seen ID registered for `DUR` without a break (default: one TTL of the leader)")
	fs.DurationVar(&o.ttl, "ttl", 10*time.Second, "the preference's own lease `DUR`: it lapses this long after this command dies")
	logFormat := fs.String("log-format", "text", logFormatUsage)
	quiet := fs.Bool("quiet", false, "do not log (the lines on stdout stay)")
	if code, done := parseFlags(fs, args, preferHelp, stdout, stderr); done {
		return o, code, true
	}
	err := refuseGivenEmpty(fs, "key") // before the environment fills it in
	var keyFrom string
	o.key, keyFrom = orEnvFrom(o.key, "--key", envKey)
	switch {
	case err != nil:
	case fs.NArg() != 1:
		err = usageErrorf("prefer takes one argument, the preferred candidate's ID (got %d)", fs.NArg())
	default:
		o.holder = fs.Arg(0)
		err = checkKeyFlag(o.key, keyFrom)
	}
	if err == nil {
		err = checkControlledKey(o.key, keyFrom, "a preference", "the suffixes")
	}
	if err == nil {
		// Renewed by this process as tenure run's leases are: the same
		// floor, below which a loaded machine lets it lapse and flap
		// (about 90 terms in 10 minutes at 100ms, at load 4).
		if o.ttl < minRunTTL || o.ttl > tenure.MaxTTL {
			err = usageErrorf("--ttl %s is out of range: want %s to %s", o.ttl, minRunTTL, tenure.MaxTTL)
		}
	}
	if err == nil {
		err = checkIDFlag(o.key, o.holder, "ID")
	}
	if err == nil && (o.delay < 0 || o.delay > tenure.MaxTTL) {
		err = usageErrorf("--delay %s is out of range: want 0 to %s", o.delay, tenure.MaxTTL)
	}
	if err == nil {
		o.logger, err = newLogger(stderr, *logFormat, slog.LevelInfo)
	}
	if err == nil && *quiet {
		o.logger = slog.New(slog.DiscardHandler)
	}
	if err == nil {
		o.store, err = sf.resolve(os.LookupEnv)
	}
	if _, peer := peerMode(o.store.url); err == nil && peer {
		err = usageErrorf("prefer is not supported in peer modes: they have no shared key to hold a preference; give the member --priority instead")
	}
	if err != nil {
		return o, fail(stderr, err), true
	}
	host, _ := os.Hostname()
	o.issuer = "tenure-prefer-" + host + "-" + strconv.Itoa(os.Getpid())
	return o, 0, false
}

// preferCmd is `tenure prefer`.
func preferCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, done := parsePrefer(args, stdout, stderr)
	if done {
		return code
	}
	ctx, stop := signal.NotifyContext(ctx, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	openCtx, cancel := context.WithTimeout(ctx, oneShotWait)
	store, err := openStore(openCtx, o.store)
	cancel()
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	// Say "preferring" only once this command's grant holds: while another
	// preference holds, Prefer waits for it to end, and says so first.
	// Its log goes where the command's does (--log-format, --quiet).
	obs := &tenure.Observer{Store: store, Key: tenure.PreferKey(o.key), Logger: o.logger}
	// Read once, as status and step-down do: a store that cannot be read
	// now is an error, not a wait without end.
	readCtx, cancel := context.WithTimeout(ctx, oneShotWait)
	cur, ok, err := tenure.ReadPreference(readCtx, store, o.key)
	if err != nil {
		err = unanswered(readCtx, err) // before cancel
	}
	cancel()
	if err != nil {
		return fail(stderr, fmt.Errorf("cannot read key %q: %w", tenure.PreferKey(o.key), err))
	}
	if ok {
		fmt.Fprintf(stdout, "%s: waiting for the preference for %s to end\n", o.key, shown(cur.Holder))
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	held, watched := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(watched)
		for rec := range obs.Changes(watchCtx) {
			if rec.Holder == o.issuer {
				fmt.Fprintf(stdout, "%s: preferring %s while this runs (Ctrl-C to clear)\n", o.key, o.holder)
				close(held)
				stopWatch()
				return
			}
		}
	}()
	err = tenure.Prefer(ctx, store, o.key, o.issuer, o.ttl, tenure.Preference{Holder: o.holder, Delay: o.delay, Logger: o.logger})
	stopWatch()
	<-watched
	if err != nil && !errors.Is(err, context.Canceled) {
		return fail(stderr, fmt.Errorf("prefer %s for %q: %w", o.holder, o.key, err))
	}
	select {
	case <-held:
		fmt.Fprintf(stdout, "%s: preference for %s cleared\n", o.key, o.holder)
	default:
	}
	return exitOK
}
