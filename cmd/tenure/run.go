package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

const runHelp = `Usage: tenure run [flags] --key KEY -- CMD [ARGS...]

Campaigns for KEY and runs CMD only while this process leads it. CMD gets
TENURE_KEY, TENURE_ID and TENURE_TERM (the fencing token) in its environment
and runs in its own process group, under a supervisor that kills the group
before the lease can lapse, even if tenure itself is frozen or killed.

On loss of leadership CMD's group gets SIGTERM, then SIGKILL after --grace.
SIGINT, SIGTERM and SIGHUP are forwarded to CMD's group; tenure then waits
for CMD to exit. When CMD exits, the lease is released and tenure exits with
CMD's exit code (or, with --restart, campaigns again).

With --try, tenure exits at once with code 75 if another candidate holds
KEY; with --wait DUR, it gives up with code 75 after campaigning for DUR
without being elected (for cron-style jobs that should not queue up).
--http ADDR serves the leadership view: GET / (JSON, or a live page in a
browser), /healthz, /readyz (200 only while leading; ?standbyok for
followers), /events (Server-Sent Events), /metrics (Prometheus).

--advertise VALUE publishes VALUE (an address followers route to, or any
short string) with each grant this process wins: tenure status, tenure
watch and the --http view show it while this process leads. The store must
be able to publish values.

Leadership control: "tenure step-down --key KEY" makes the leader stop CMD
and release KEY, and it stays a candidate (in peer modes, step-down takes
the group's observer URL). --priority N ranks candidates when KEY is free
(highest first; 0 never leads); --handover hands KEY to the best waiting
candidate on SIGTERM (in peer modes to any other member); --yield-after DUR
hands it to a candidate of higher priority it has seen registered for DUR. In peer
modes --priority is the member's own (also priority=N in the URL), sent to
the others in every message: in lowest, bully and ring the live member of
the highest priority coordinates, ties broken by the algorithm's ID order;
a member of priority 0 takes part but never leads (raft: it votes but never
stays raft leader); --yield-after hands over to a live member of higher
priority seen for DUR.

KEY, the identity and the advertised value may also come from $TENURE_KEY,
$TENURE_ID and $TENURE_ADVERTISE.

Exit codes: CMD's own (128+n if killed by signal n); 1 if leadership was lost
while CMD ran (without --restart) or on a runtime error; 2 for a bad command
line; 75 if --try or --wait gave up because KEY stayed held; 128+n if signal
n stopped tenure before CMD ran.

Flags:
`

const defaultRunTTL = 10 * time.Second

// runOpts is a validated `tenure run` command line.
type runOpts struct {
	store          storeSource
	key, id        string
	advertise      string // --advertise: the value published with each grant
	ttl, grace     time.Duration
	restart, quiet bool
	try            bool          // --try: give up at once if the key is held
	wait           time.Duration // --wait: give up after campaigning this long
	httpAddr       string        // --http
	logFormat      string        // --log-format
	priority       int           // --priority (see handover.go)
	handover       bool          // --handover
	yieldAfter     time.Duration // --yield-after
	// Which of --id, --ttl and --grace were given; the others take the
	// store's defaults (tenure.Defaulter) or ours.
	idSet, ttlSet, graceSet, waitSet bool
	// Where --key, --id and --advertise came from, for messages: the
	// flag, its variable ($TENURE_ID...) or, for the identity, $POD_NAME.
	keyFrom, idFrom, advertiseFrom string
	opened                         tenure.Store // the store, once open, for its TTL range
	path                           string       // CMD resolved in PATH
	args                           []string     // CMD's arguments
}

// parseRun parses and validates everything about a `tenure run` command
// line that can be checked without the store.
func parseRun(args []string, stdout, stderr io.Writer) (o runOpts, code int, done bool) {
	fs := newFlagSet("run")
	sf := addStoreFlags(fs)
	fs.StringVar(&o.key, "key", "", "the lease `KEY` to campaign for (required)")
	fs.StringVar(&o.id, "id", "", "this candidate's identity (default: the store's, e.g. a peer's member ID, else $POD_NAME, else hostname-pid)")
	fs.StringVar(&o.advertise, "advertise", "", "publish `VALUE` (e.g. this leader's address) with each grant, for status, watch and --http (at most 1024 bytes)")
	fs.DurationVar(&o.ttl, "ttl", defaultRunTTL, "lease TTL: how long a frozen or cut-off leader can block failover, from 500ms to 24h or the store's narrower range; a store with a TTL of its own (azblob://, peer://) uses it unless --ttl is given")
	fs.DurationVar(&o.grace, "grace", 0, "time between SIGTERM and SIGKILL of CMD on loss of leadership (default min(2s, (ttl-renew deadline)/2))")
	fs.BoolVar(&o.restart, "restart", false, "keep campaigning after CMD exits and run it again on the next win")
	fs.BoolVar(&o.quiet, "quiet", false, "do not log")
	fs.BoolVar(&o.try, "try", false, "exit at once with code 75 if another candidate holds KEY")
	fs.DurationVar(&o.wait, "wait", 0, "give up with code 75 after campaigning for `DUR` without being elected")
	fs.StringVar(&o.httpAddr, "http", "", httpFlagUsage)
	fs.StringVar(&o.logFormat, "log-format", "text", logFormatUsage)
	o.controlFlags(fs)
	if code, done := parseFlags(fs, args, runHelp, stdout, stderr); done {
		return o, code, true
	}
	if err := refuseGivenEmpty(fs, "key", "id"); err != nil {
		return o, fail(stderr, err), true
	}
	o.key, o.keyFrom = orEnvFrom(o.key, "--key", envKey)
	o.id, o.idFrom = orEnvFrom(o.id, "--id", envID)
	o.advertise, o.advertiseFrom = orEnvFrom(o.advertise, "--advertise", envAdvertise)
	var err error
	if o.store, err = sf.resolve(os.LookupEnv); err != nil {
		return o, fail(stderr, err), true
	}
	o.ttlSet, o.waitSet = given(fs, "ttl"), given(fs, "wait")
	if err := o.validate(fs.Args()); err != nil {
		return o, fail(stderr, err), true
	}
	if err := o.checkControl(given(fs, "priority")); err != nil {
		return o, fail(stderr, err), true
	}
	return o, 0, false
}

func (o *runOpts) validate(cmdline []string) error {
	if err := checkKeyFlag(o.key, o.keyFrom); err != nil {
		return err
	}
	o.identify()
	if err := checkTrimmed(o.idFrom, anotherID, o.id); err != nil {
		return err
	}
	if err := tenure.CheckValue(o.advertise); err != nil {
		return about(o.advertiseFrom, err)
	}
	if err := checkHTTPAddr(o.httpAddr); err != nil {
		return err
	}
	switch {
	case o.wait < 0:
		return usageErrorf("--wait %s must not be negative", o.wait)
	case o.waitSet && o.wait == 0:
		// Not "no limit": that is leaving --wait out.
		return usageErrorf("--wait %s must be positive: use --try to give up at once, or leave --wait out to campaign without a limit", o.wait)
	case (o.try || o.wait > 0) && o.restart:
		return usageErrorf("--try and --wait are for one run of CMD; they cannot be combined with --restart")
	case o.try && o.wait > 0:
		return usageErrorf("--try and --wait are both given; use one")
	}
	return o.checkCommand("run", "tenure run --key KEY -- CMD [ARGS...]", cmdline)
}

// identify sets the identity to the default (see defaultIdentity) if no
// --id was given, and notes whether one was.
func (o *runOpts) identify() {
	o.idSet = o.id != ""
	if !o.idSet {
		o.id, o.idFrom = defaultIdentity()
	}
}

// checkCommand is the end of the validation of a command that runs CMD
// (verb: run or shard, usage: its synopsis): the log format, the timing
// flags, and CMD, which must be found on $PATH.
func (o *runOpts) checkCommand(verb, usage string, cmdline []string) error {
	o.graceSet = o.grace != 0
	if _, err := newLogger(io.Discard, o.logFormat, slog.LevelInfo); err != nil {
		return err
	}
	if err := o.timing(); err != nil {
		return err
	}
	if len(cmdline) == 0 || cmdline[0] == "" {
		return usageErrorf("%s: no command given (usage: %s)", verb, usage)
	}
	path, err := exec.LookPath(cmdline[0])
	if err != nil {
		what := "not found"
		if errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EISDIR) {
			what = "cannot be run" // it is there: not executable, or a directory
		}
		return usageErrorf("%s: command %q %s: %v", verb, cmdline[0], what, errors.Unwrap(err))
	}
	o.path, o.args = path, cmdline[1:]
	return nil
}

// defaultIdentity is the identity of a candidate given none: $POD_NAME
// (a pod's name is unique and stable for its life), else hostname-pid.
// from says which, for messages.
func defaultIdentity() (id, from string) {
	if pod := os.Getenv("POD_NAME"); pod != "" {
		return pod, "$POD_NAME (the default --id)"
	}
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "localhost"
	}
	return host + "-" + strconv.Itoa(os.Getpid()), "the hostname (the default --id)"
}

// timing checks the identity and TTL and takes the grace period from the
// elector's configuration for them.
func (o *runOpts) timing() error {
	if err := checkTTL(o.ttl, o.opened); err != nil {
		return err
	}
	if err := tenure.CheckAcquire(o.key, o.id, o.ttl); err != nil {
		return about(o.idFrom, err)
	}
	if o.grace < 0 {
		return usageErrorf("--grace %s must not be negative", o.grace)
	}
	cfg := tenure.Config{TTL: o.ttl}.WithDefaults()
	var given time.Duration
	if o.graceSet {
		given = o.grace
	}
	grace, err := cfg.KillGrace(given)
	if err != nil {
		return usageErrorf("--grace %s is too long for --ttl %s: the renew deadline (%s, 2/3 of --ttl) plus --grace must be shorter than --ttl, so CMD is dead before the lease can lapse; use a --grace under %s or a longer --ttl",
			o.grace, o.ttl, cfg.RenewDeadline, cfg.Margin())
	}
	o.grace = grace
	return nil
}

// storeDefaults lets a store that knows better (a peer node's own ID, a
// blob lease's 15 s minimum) fill in --id and --ttl when they were not given.
// It then checks --ttl against the store's own range (tenure.TTLRanger).
func (o *runOpts) storeDefaults(s tenure.Store) error {
	o.opened = s
	d, ok := s.(tenure.Defaulter)
	if !ok {
		return o.timing()
	}
	id, ttl := d.Defaults()
	if !o.idSet && id != "" {
		o.id, o.idFrom = id, "the store's identity"
	}
	if !o.ttlSet && ttl > 0 {
		if ttl < minRunTTL {
			return shortDefaultTTL(ttl)
		}
		o.ttl = ttl
	}
	return o.timing()
}

// shortDefaultTTL is the error of a store whose default TTL is below
// minRunTTL. A raft member's default is its timeout, also the longest TTL
// it grants: with timeout=200ms neither the default nor --ttl 500ms
// worked, and checkTTL's "--ttl 200ms is out of range" named a flag the
// user had not given. Found auditing the raft peer mode.
func shortDefaultTTL(ttl time.Duration) error {
	return usageErrorf("the store's default TTL, %s, is below tenure run's shortest --ttl, %s: "+
		"pass --ttl %s or more; with a raft peer:// URL, whose TTL may not exceed its timeout, also set timeout=%s or more in the URL",
		ttl, minRunTTL, minRunTTL, minRunTTL)
}

// runCmd is `tenure run`.
func runCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, done := parseRun(args, stdout, stderr)
	if done {
		return code
	}
	env, err := o.runnerEnv(stdout, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	logger, stderr := env.logger, env.stderr

	// Catch signals before anything can be started, so none is lost.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer signal.Stop(sigs)

	store, sig, err := o.openUnlessSignalled(ctx, logger, sigs)
	switch {
	case sig != 0:
		return 128 + int(sig)
	case err != nil:
		return fail(stderr, err)
	}
	defer store.Close()

	r := newRunner(o, env, store)
	ctx, limit := limitCampaign(ctx, o)
	onEvent := limit.onEvent(r.onEvent)
	var view *viewServer
	if o.httpAddr != "" {
		if view, err = listenView(o.httpAddr, o.key, store, logger); err != nil {
			return fail(stderr, err)
		}
		onEvent = view.onEvent(onEvent)
	}
	es := electorStore(store)
	el, err := tenure.New(tenure.Config{
		Store:    es,
		Key:      o.key,
		Identity: o.id,
		Value:    o.advertise,
		TTL:      o.ttl,
		Logger:   logger,
		OnEvent:  onEvent,
		Control:  o.control(es),
	})
	if err != nil {
		return fail(stderr, err)
	}
	r.elector = el
	if view != nil {
		if err := view.view.SetElector(el); err != nil {
			return fail(stderr, err)
		}
		viewCtx, stopView := context.WithCancel(context.WithoutCancel(ctx))
		defer stopView()
		view.serve(viewCtx, logger)
	}
	if os.Getenv("TENURE_DEBUG_STATS") != "" {
		stopStats := debugStats(stderr)
		defer stopStats()
	}
	return r.run(ctx, sigs)
}

// electorStore is what the elector of `tenure run` uses of the opened
// store: the store itself. Tests replace it to inject store failures.
var electorStore = func(s tenure.Store) tenure.Store { return s }

// runner runs CMD under an elector: with --restart through [tenure.Elector.Run],
// else through [tenure.Elector.Do]. The elector owns the timeline (when to
// campaign, back off, stop); the runner only starts and stops CMD.
type runner struct {
	opts    runOpts
	self    string
	store   tenure.Store
	elector *tenure.Elector
	logger  *slog.Logger
	stdout  io.Writer
	stderr  io.Writer
	standby chan *supervisor // receives the standby supervisor once spawned (nil if that failed)
	// moves is set by tenure shard, whose terms end by cancellation when
	// the key moves to another member or the member stops: that is not
	// logged as a loss.
	moves bool

	mu      sync.Mutex
	pending bool               // a standby supervisor was or is being spawned and not yet taken
	pg      int                // CMD's process group while CMD runs
	sig     syscall.Signal     // the first signal tenure received; 0 if none
	cancel  context.CancelFunc // ends campaigning
	handed  *tenure.StepDown   // the hand-over this leader asked for (--handover), if any
	dupTerm uint64             // the term of the last grant warnDuplicate warned about
}

// openStore opens the store within one TTL, probing o.key, and applies
// its defaults (see storeDefaults). The peer packages log through logger
// (so --quiet silences them). The key is probed so that an unreadable or
// corrupt state fails now, once, instead of making the elector retry for
// ever; a store that cannot be reached yet is waited for within that TTL
// (see openProbed).
func (o *runOpts) openStore(ctx context.Context, logger *slog.Logger) (tenure.Store, error) {
	openCtx, cancel := context.WithTimeout(ctx, o.ttl)
	defer cancel()
	store, err := openProbed(peer.WithLogger(openCtx, logger), o.store, o.key, logger)
	if err != nil {
		return nil, err
	}
	if err := o.storeDefaults(store); err != nil {
		store.Close()
		return nil, err
	}
	if o.store.url == "" {
		// The default, and what an unset variable in a deployment leaves:
		// say so, for a fleet of machines would each elect its own leader.
		u, _ := defaultStoreURL()
		logger.Info("tenure: no --store, --store-file or $"+envStore+": using the local store, which elects among this host's processes only",
			"key", o.key, "id", o.id, "store", u)
	}
	return store, nil
}

// openUnlessSignalled is openStore, given up at the first of sigs (the
// signals tenure run handles) that arrives before it returns: a candidate
// waiting for a store that cannot be reached yet is stopped as one waiting
// for the key is, at once and with 128+n, not after up to one TTL of
// reads and with exit 1. It then returns that signal and no store. A
// signal that arrives once the store is open stays in sigs, for the runner.
func (o *runOpts) openUnlessSignalled(ctx context.Context, logger *slog.Logger, sigs <-chan os.Signal) (tenure.Store, syscall.Signal, error) {
	openCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	got := make(chan syscall.Signal, 1)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		select {
		case s := <-sigs:
			got <- s.(syscall.Signal)
			cancel()
		case <-openCtx.Done():
		}
	}()
	store, err := o.openStore(openCtx, logger)
	cancel()
	<-watched
	select {
	case sig := <-got:
		if store != nil {
			store.Close()
		}
		logger.Info("tenure: stopped by a signal before the store answered; nothing was started", "key", o.key, "id", o.id, "signal", sig.String())
		return nil, sig, nil
	default:
		return store, 0, err
	}
}

// runnerEnv is what every runner of one tenure process shares: the
// tenure executable its supervisors run, the logger and the output, each
// writer locked, as the logger and the supervisors' output copiers share
// them.
type runnerEnv struct {
	self           string
	logger         *slog.Logger
	stdout, stderr io.Writer
}

// runnerEnv finds the tenure executable and makes the logger (--quiet,
// --log-format, already checked by validate) on stdout and stderr.
func (o *runOpts) runnerEnv(stdout, stderr io.Writer) (runnerEnv, error) {
	self, err := os.Executable()
	if err != nil {
		return runnerEnv{}, fmt.Errorf("cannot find the tenure executable to supervise CMD: %w", err)
	}
	env := runnerEnv{self: self, stdout: lockWriter(stdout), stderr: lockWriter(stderr)}
	env.logger, _ = newLogger(env.stderr, o.logFormat, slog.LevelInfo)
	if o.quiet {
		env.logger = slog.New(slog.DiscardHandler)
	}
	adopted.warnNotSubreaper(env.logger)
	return env, nil
}

func newRunner(o runOpts, env runnerEnv, store tenure.Store) *runner {
	return &runner{opts: o, self: env.self, store: store, logger: env.logger, stdout: env.stdout, stderr: env.stderr,
		standby: make(chan *supervisor, 1)}
}

// stop handles a signal to tenure: it is forwarded to CMD's group while CMD
// runs (the task then ends the elector's loop once CMD exited); otherwise
// campaigning ends. Either way tenure exits once CMD is done.
func (r *runner) stop(sig syscall.Signal) {
	mark(stepSignal)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sig == 0 {
		r.sig = sig
	}
	if r.pg != 0 {
		r.logger.Info("tenure: forwarding signal to the command", "key", r.opts.key, "id", r.opts.id, "signal", sig.String(), "pgid", r.pg)
		_ = syscall.Kill(-r.pg, sig)
		return
	}
	r.cancel()
}

// signalled returns the first signal tenure received, 0 if none.
func (r *runner) signalled() syscall.Signal {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.sig
}

// run campaigns, runs CMD while leading, and returns the exit code.
func (r *runner) run(ctx context.Context, sigs <-chan os.Signal) int {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	r.mu.Lock()
	r.cancel = cancel
	r.mu.Unlock()
	go func() {
		for s := range sigs {
			r.stop(s.(syscall.Signal))
		}
	}()
	r.prepare()
	defer r.dismissStandby()
	defer r.awaitHandedOver()
	if r.opts.restart {
		return r.exitCode(ctx, r.elector.Run(ctx, r.task))
	}
	for {
		err := r.elector.Do(ctx, r.task)
		if !r.campaignAgain(ctx, err) {
			return r.exitCode(ctx, err)
		}
	}
}

// exitCode is tenure's exit code for the result of the elector's Run or Do.
func (r *runner) exitCode(ctx context.Context, err error) int {
	var exit *cmdExit
	sig := r.signalled()
	switch {
	case err == nil:
		return 0
	case errors.Is(context.Cause(ctx), errGaveUp) && sig == 0:
		r.logger.Info("tenure: giving up: the key is held by another candidate", "key", r.opts.key, "id", r.opts.id)
		return exitHeld
	case errors.As(err, &exit) && exit.lost != nil && sig == 0:
		return exitRuntime // leadership lost while CMD ran: the task said so
	case errors.As(err, &exit):
		return exit.code
	case sig != 0 && errors.Is(err, tenure.ErrSteppedDown):
		return 0 // CMD exited 0 after the signal; the step-down (--handover) came after
	case sig != 0:
		return 128 + int(sig)
	case ctx.Err() != nil:
		return exitRuntime
	}
	return fail(r.stderr, err)
}

// onEvent is the elector's event hook. Once this candidate campaigns again
// and sees who leads (or that nobody does), a standby supervisor is
// started for its next term, unless one stands by already. Not sooner:
// starting one (a whole tenure process) right after a release would take
// CPU from the next leader's start on the same machine.
func (r *runner) onEvent(ev tenure.Event) {
	markEvent(ev)
	if ev.Kind == tenure.EventLeaderChanged && ev.Holder == r.opts.id {
		r.warnDuplicate(ev.Term)
	}
	if ev.Kind == tenure.EventLeaderChanged && ev.Holder != r.opts.id && r.signalled() == 0 {
		r.prepare()
	}
}

// warnDuplicate says, once per term, that the key is held by this
// candidate's own identity while it campaigns: a grant its elector did
// not make (it holds none while campaigning), so another process's with
// the same --id, or an earlier grant of this identity that has yet to end
// (a crashed run's). Without it tenure would wait silently.
func (r *runner) warnDuplicate(term uint64) {
	r.mu.Lock()
	first := term != r.dupTerm
	r.dupTerm = term
	r.mu.Unlock()
	if first {
		r.logger.Warn("tenure: the key is held by this identity under another grant: is another process running with the same --id? Waiting until that grant ends",
			"key", r.opts.key, "id", r.opts.id, "term", term)
	}
}

// lockWriter makes w safe for concurrent writes, unless it is a file, which
// os/exec hands to child processes as is and which the kernel serialises.
func lockWriter(w io.Writer) io.Writer {
	if _, ok := w.(*os.File); ok {
		return w
	}
	return &lockedWriter{w: w}
}

type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
