package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"time"

	"github.com/tenurehq/tenure"
)

const stepDownHelp = `Usage: tenure step-down [flags] --key KEY [--to ID] [--window DUR]

Asks the leader of KEY to step down: its command is stopped (SIGTERM, then
SIGKILL after its --grace), the lease released, and the leading tenure run
stays a candidate. With --to ID, only candidate ID may take KEY during the
window; without it, any candidate but the old leader may. After the window
any candidate may, so a transfer to a dead or absent ID falls back by
itself. Candidates obey only if they run tenure run (which enables
leadership control) or set tenure.Config.Control.

It waits until a new leader holds KEY and prints it, unless --no-wait
(refused on the local store: its grants end with their process).
The request is a grant of the control key KEY~tenure-control (KEY may be
at most 236 bytes).

In peer modes give the group's observer URL, without id and state-dir:
  peer://?peers=...&algorithm=...&secret-file=...
The request goes to the coordinator, authenticated by the group's
secret. In lowest, bully and ring the members but ID hold back for the
window (without --to, the old leader does); in lowest, and in bully
without no-preempt, the preferred member takes over again once the
window ends. In raft the leader hands raft leadership to ID
(LeadershipTransferToServer), else to any member.

Exit codes: 0 a new leader took over (or, with --no-wait, the request was
made; or --to ID already leads, and nothing was done); 1 a runtime error, another step-down under way, or nobody took over
within the window and one TTL; 2 a bad command line; 3 nobody leads KEY.

Flags:
`

// stepDownOpts is a validated `tenure step-down` command line.
type stepDownOpts struct {
	store  storeSource
	key    string
	to     string
	window time.Duration
	noWait bool
}

func parseStepDown(args []string, stdout, stderr io.Writer) (o stepDownOpts, code int, done bool) {
	fs := newFlagSet("step-down")
	sf := addStoreFlags(fs)
	fs.StringVar(&o.key, "key", "", "the lease `KEY` whose leader steps down (required)")
	fs.StringVar(&o.to, "to", "", "hand over to candidate `ID` (default: any candidate but the leader)")
	fs.DurationVar(&o.window, "window", tenure.DefaultStepDownWindow, "the window (`DUR`, from 100ms to 24h) during which only --to's candidate (without --to: any but the leader) may take the key")
	fs.BoolVar(&o.noWait, "no-wait", false, "return once the request is made, without waiting for the new leader")
	if code, done := parseFlags(fs, args, stepDownHelp, stdout, stderr); done {
		return o, code, true
	}
	keyFrom, err := checkKeyArgs(fs, &o.key)
	if err == nil {
		err = checkControlledKey(o.key, keyFrom, "step-down", "the control key's suffix")
	}
	if err == nil {
		err = checkTTLRange("--window", o.window)
	}
	if err == nil && o.to != "" {
		err = checkIDFlag(o.key, o.to, "--to")
	}
	if err == nil {
		o.store, err = sf.resolve(os.LookupEnv)
	}
	if err == nil {
		err = checkPeerStepDown(o.store)
	}
	if err == nil && o.noWait && isLocalStore(o.store.url) {
		// A grant of the local store ends with its process: the request
		// would end when this command returns, perhaps before the leader
		// saw it, and the window would not hold the others back.
		err = usageErrorf("--no-wait is not supported on the local store (file://): its grants, the request included, end with the process that made them; leave --no-wait out")
	}
	if err != nil {
		return o, fail(stderr, err), true
	}
	return o, 0, false
}

// peerStepDown lists the peer modes whose nodes take step-down requests
// through an observer (package peer's Node, and raft).
var peerStepDown = map[string]bool{"lowest": true, "bully": true, "ring": true, "raft": true}

// checkPeerStepDown accepts a step-down on a peer store only in a mode
// that takes one, and only through the group's observer URL: with id=N
// the command would open a member's node, a second member N.
func checkPeerStepDown(src storeSource) error {
	mode, ok := peerMode(src.url)
	switch {
	case !ok:
		return nil
	case !peerStepDown[mode]:
		return usageErrorf("step-down is not supported in peer mode (algorithm %s)", mode)
	}
	if u, err := url.Parse(src.url); err == nil && u.Query().Has("id") {
		return usageErrorf("step-down in peer mode asks the members from outside the group: leave id (and state-dir) out of the peer URL, as for tenure status")
	}
	return nil
}

// isLocalStore reports whether raw is a URL of the local store ("" is
// the default one).
func isLocalStore(raw string) bool {
	u, err := url.Parse(raw)
	return raw == "" || err == nil && u.Scheme == "file"
}

// peerMode reports whether raw is a peer:// URL and its algorithm.
func peerMode(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme != "peer" {
		return "", false
	}
	if a := u.Query().Get("algorithm"); a != "" {
		return a, true
	}
	return "bully", true
}

// stepDownCmd is `tenure step-down`.
func stepDownCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, done := parseStepDown(args, stdout, stderr)
	if done {
		return code
	}
	openCtx, cancel := context.WithTimeout(ctx, oneShotWait)
	defer cancel()
	store, err := openStore(openCtx, o.store)
	if err != nil {
		return fail(stderr, err)
	}
	defer store.Close()
	rec, err := store.Get(openCtx, o.key)
	if err == nil && o.to != "" && rec.Holder == o.to {
		fmt.Fprintf(stdout, "%s: %s already leads, term %d; nothing to do\n", o.key, shown(rec.Holder), rec.Term)
		return exitOK
	}
	free := err == nil && !rec.Held()
	if err := checkTarget(openCtx, store, o, free, stderr); err != nil {
		return fail(stderr, err)
	}
	if free {
		fmt.Fprintf(stderr, "tenure: nobody leads %q; nothing to step down\n", o.key)
		return exitFree
	}
	sd, err := tenure.RequestStepDown(openCtx, store, o.key, tenure.StepDownRequest{To: o.to, Window: o.window})
	if errors.Is(err, tenure.ErrNoLeader) {
		fmt.Fprintf(stderr, "tenure: nobody leads %q; nothing to step down\n", o.key)
		return exitFree
	}
	var held *tenure.HeldError
	if errors.As(err, &held) {
		// The library's message quotes the control key's record too:
		// "...: tenure: key "job~tenure-control" is held by ...".
		return fail(stderr, fmt.Errorf("step-down of %q: another step-down is under way, %s left of its window; try again after it",
			o.key, held.Record.Remaining.Round(time.Millisecond)))
	}
	if err != nil {
		return fail(stderr, fmt.Errorf("step-down of %q: %w", o.key, unanswered(openCtx, err)))
	}
	to := o.to
	if to == "" {
		to = "any other candidate"
	}
	fmt.Fprintf(stdout, "%s: asked %s (term %d) to step down, handing over to %s (window %s)\n",
		o.key, shown(sd.Leader.Holder), sd.Leader.Term, to, o.window)
	if o.noWait {
		return exitOK
	}
	return awaitHandover(ctx, store, o, sd, stdout, stderr)
}

// checkTarget refuses a --to candidate registered with priority 0, which
// never leads, and warns about one not registered at all (the transfer
// then falls back after the window unless it appears) unless free, the
// key is not held: the caller then says so in one line.
func checkTarget(ctx context.Context, store tenure.Store, o stepDownOpts, free bool, stderr io.Writer) error {
	if o.to == "" {
		return nil
	}
	cs, err := candidatesOf(ctx, store, o.key)
	if err != nil {
		return nil // the registry is advisory; the request may still work
	}
	for _, c := range cs {
		if c.Identity == o.to && c.Priority == tenure.NeverLead {
			return fmt.Errorf("--to %s: that candidate runs with priority 0 and never leads", o.to)
		}
		if c.Identity == o.to {
			return nil
		}
	}
	if free {
		return nil // the caller says nobody leads, in one line: no warning on top
	}
	fmt.Fprintf(stderr, "tenure: warning: %s is not registered as a candidate of %q; unless it takes over within the window (%s), any candidate may after it\n",
		o.to, o.key, o.window)
	return nil
}

// awaitHandover waits up to the window plus the old grant's TTL for a new
// leader, prints it, and ends the window early once one leads.
func awaitHandover(ctx context.Context, store tenure.Store, o stepDownOpts, sd tenure.StepDown, stdout, stderr io.Writer) int {
	began := time.Now()
	wctx, cancel := context.WithTimeout(ctx, o.window+sd.Leader.TTL)
	defer cancel()
	rec, err := tenure.AwaitSuccessor(wctx, store, o.key, sd.Leader.Term)
	if err != nil {
		return fail(stderr, fmt.Errorf("nobody took over %q within the window (%s) and one TTL (%s); does %s run with leadership control (tenure run, or Config.Control)?",
			o.key, o.window, sd.Leader.TTL, shown(sd.Leader.Holder)))
	}
	rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	_ = store.Release(rctx, sd.Grant) // the window's work is done; it may have expired already
	rcancel()
	note := ""
	switch {
	case o.to != "" && rec.Holder != o.to:
		note = fmt.Sprintf(" (%s did not take over within the window)", o.to)
	case rec.Holder == sd.Leader.Holder:
		// The same candidate in a later term: "a leads, term 2" alone
		// reads as a hand-over to an operator about to take a down.
		note = fmt.Sprintf(" (nobody else took over within the window: %s leads again)", shown(rec.Holder))
	}
	fmt.Fprintf(stdout, "%s: %s leads, term %d, %s after the request%s\n", o.key, shown(rec.Holder), rec.Term,
		time.Since(began).Round(time.Millisecond), note)
	return exitOK
}
