package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/shard"
)

const shardHelp = `Usage: tenure shard [flags] --group GROUP --members A,B,C --id A
                   (--shards N | --keys K1,K2,...) -- CMD [ARGS...]
       tenure shard --status [--json] --group GROUP --members A,B,C
                   (--shards N | --keys K1,K2,...)

One member of a group that spreads keys over its live members (package
shard): run one tenure shard per member, each with the same --group,
--members, --shards or --keys and store. Each key goes to one live member,
chosen by rendezvous hashing with bounded loads (each member gets K/n keys,
rounded up or down); this process runs CMD once for each key it
leads, with TENURE_KEY (the key: "0".."N-1" with --shards, else the name
given in --keys), TENURE_ID and TENURE_TERM (the key's fencing token) in its
environment. Each CMD runs as with tenure run: in its own process group,
under a supervisor process of its own that kills the group before the key's
lease can lapse, even if tenure itself is frozen or killed.

When a key moves away (a member joined or left, leadership of the key was
lost), its CMD's group gets SIGTERM, then SIGKILL after --grace, and the key
is released only once CMD is gone: another member's CMD for that key starts
only after this one stopped. When CMD exits by itself while the key is led,
the key is released and this member campaigns for it again, as tenure run
--restart does: it runs CMD again after a jittered retry interval (that wait
doubles, up to --ttl, while CMD keeps exiting non-zero).

SIGINT, SIGTERM and SIGHUP stop every CMD the same way, release every key
and end tenure with code 0. Each key is a lease of its own, renewed on its
own (no session); the member's liveness is the lease GROUP/members/ID, each
key's GROUP/keys/KEY (so a GROUP with a path segment "members" or "keys"
after its first is refused: its leases could be another group's).
peer:// stores lead one key only and cannot be used.

The identity may also come from $TENURE_ID; it must be one of --members.

Exit codes: 0 after a signal, once every CMD stopped and every key was
released; 1 on a runtime error (the store failed for good); 2 for a bad
command line.

With --status it runs nothing: it reads the group from the store and prints
which members are live, which member leads each key under which term, and
each key's owner by the assignment among the live members (a key led by
another member is moving, or held by the fallback rule). With --json it
prints one object:
  {"group":"jobs","live":["a","b"],"members":[{"id":"a","live":true,"leads":2}],
   "keys":[{"key":"0","holder":"a","term":4,"owner":"a"}]}
(holder "" for a key nobody leads, term then the last one granted). Exit
codes: 0 every key is led, 3 some key is led by nobody, 1 the store could
not be read, 2 a bad command line.

Flags:
`

// maxShards bounds the number of keys: each costs a lease, watches and
// goroutines in every member, and a supervisor process while it runs.
const maxShards = 4096

// shardOpts is a validated `tenure shard` command line. Of runOpts it uses
// the store, the identity, the timing (--ttl, --grace), the logging and
// CMD; runOpts.key is the member's liveness key, for the checks.
type shardOpts struct {
	runOpts
	group   string
	members []string
	keys    []string // the shard keys as the user names them
	status  bool     // --status: print the group and exit
	json    bool     // --json, with --status
}

// parseShard parses and validates everything about a `tenure shard`
// command line that can be checked without the store.
func parseShard(args []string, stdout, stderr io.Writer) (o shardOpts, code int, done bool) {
	fs := newFlagSet("shard")
	sf := addStoreFlags(fs)
	var members, keys string
	var shards int
	fs.StringVar(&o.group, "group", "", "the group's `NAME`: its leases are NAME/members/ID and NAME/keys/KEY (required)")
	fs.StringVar(&members, "members", "", "every member that may take part, comma-separated, the same `LIST` for all (required)")
	fs.StringVar(&o.id, "id", "", "this member's identity, one of --members (default: $TENURE_ID, else $POD_NAME, else hostname-pid)")
	fs.IntVar(&shards, "shards", 0, "spread the `N` keys 0..N-1 (1 to 4096); or give --keys")
	fs.StringVar(&keys, "keys", "", "spread the keys of `LIST`, comma-separated; or give --shards")
	fs.DurationVar(&o.ttl, "ttl", defaultRunTTL, "lease TTL of the liveness and key leases: how long a frozen or cut-off member can hold its keys, from 500ms to 24h or the store's narrower range; a store with a TTL of its own (azblob://) uses it unless --ttl is given")
	fs.DurationVar(&o.grace, "grace", 0, "time between SIGTERM and SIGKILL of a key's CMD when the key moves away (default min(2s, (ttl-renew deadline)/2))")
	fs.StringVar(&o.httpAddr, "http", "", shardHTTPUsage)
	fs.BoolVar(&o.quiet, "quiet", false, "do not log")
	fs.StringVar(&o.logFormat, "log-format", "text", logFormatUsage)
	fs.BoolVar(&o.status, "status", false, "print the group's members, who leads each key and its owner, and exit (see above)")
	fs.BoolVar(&o.json, "json", false, "with --status: print JSON (see above)")
	if code, done := parseFlags(fs, args, shardHelp, stdout, stderr); done {
		return o, code, true
	}
	if err := refuseGivenEmpty(fs, "id"); err != nil {
		return o, fail(stderr, err), true
	}
	o.id, o.idFrom = orEnvFrom(o.id, "--id", envID)
	var err error
	if o.store, err = sf.resolve(os.LookupEnv); err != nil {
		return o, fail(stderr, err), true
	}
	o.ttlSet = given(fs, "ttl")
	shardsSet, keysSet := given(fs, "shards"), given(fs, "keys")
	switch {
	case shardsSet && keysSet:
		err = usageErrorf("--shards and --keys are both given; use one")
	case !shardsSet && !keysSet:
		err = usageErrorf("one of --shards N or --keys LIST is required")
	case shardsSet && (shards < 1 || shards > maxShards):
		err = usageErrorf("--shards %d is out of range: want 1 to %d", shards, maxShards)
	case shardsSet:
		o.keys = shard.Numbered(shards)
	default:
		o.keys, err = splitList("keys", keys)
	}
	if err == nil {
		o.members, err = splitList("members", members)
	}
	if err == nil {
		err = o.validate(fs.Args())
	}
	if err != nil {
		return o, fail(stderr, err), true
	}
	return o, 0, false
}

// splitList splits the comma-separated value of flag name, refusing an
// empty list, an empty item, a duplicate and more than maxShards items.
func splitList(name, v string) ([]string, error) {
	if strings.TrimSpace(v) == "" {
		return nil, usageErrorf("--%s is required", name)
	}
	items := strings.Split(v, ",")
	seen := make(map[string]bool, len(items))
	for i, it := range items {
		it = strings.TrimSpace(it)
		switch {
		case it == "":
			return nil, usageErrorf("--%s %q has an empty item", name, v)
		case seen[it]:
			return nil, usageErrorf("--%s lists %q twice", name, it)
		}
		seen[it] = true
		items[i] = it
	}
	if len(items) > maxShards {
		return nil, usageErrorf("--%s lists %d items; at most %d", name, len(items), maxShards)
	}
	return items, nil
}

func (o *shardOpts) validate(cmdline []string) error {
	if o.group == "" {
		return usageErrorf("--group is required")
	}
	if err := checkTrimmed("--group", "name another group than", o.group); err != nil {
		return err
	}
	if err := shard.CheckGroup(o.group); err != nil {
		return about("--group", err)
	}
	if _, peer := peerMode(o.store.url); peer {
		return usageErrorf("--store: a peer:// group leads one key; tenure shard needs a store of many keys")
	}
	if err := checkHTTPAddr(o.httpAddr); err != nil {
		return err
	}
	o.identify()
	if err := o.checkNames(); err != nil {
		return err
	}
	if o.status {
		if len(cmdline) > 0 {
			return usageErrorf("--status runs no command; remove %q", strings.Join(cmdline, " "))
		}
		return nil
	}
	if o.json {
		return usageErrorf("--json is for --status")
	}
	return o.checkCommand("shard", "tenure shard --group G --members A,B --shards N -- CMD [ARGS...]", cmdline)
}

// checkNames checks the identity against --members, the members as
// identities and parts of lease keys, and the keys as parts of lease keys. It sets runOpts.key to the member's
// liveness key.
func (o *shardOpts) checkNames() error {
	if !o.status && !slices.Contains(o.members, o.id) {
		return usageErrorf("%s %q is not one of --members (%s)", o.idFrom, o.id, strings.Join(o.members, ","))
	}
	for _, m := range o.members {
		lease := shard.MemberLease(o.group, m)
		if err := tenure.CheckAcquire(lease, m, time.Second); err != nil {
			return about(fmt.Sprintf("--members: member %q", m), err)
		}
		if err := notDerived(lease); err != nil {
			return about(fmt.Sprintf("--members: member %q", m), err)
		}
	}
	for _, k := range o.keys {
		lease := shard.KeyLease(o.group, k)
		if err := tenure.CheckKey(lease); err != nil {
			return about(fmt.Sprintf("--keys: key %q", k), err)
		}
		if err := notDerived(lease); err != nil {
			return about(fmt.Sprintf("--keys: key %q", k), err)
		}
	}
	o.key = shard.MemberLease(o.group, o.id)
	return nil
}

// notDerived refuses a lease that leadership control derives from another
// ([tenure.BaseKey]): its elector would refuse it once the member is live.
func notDerived(lease string) error {
	if base, what, ok := tenure.BaseKey(lease); ok {
		return usageErrorf("lease %q is %s of %q, reserved by leadership control", lease, what, base)
	}
	return nil
}

// shardCmd is `tenure shard`.
func shardCmd(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	o, code, done := parseShard(args, stdout, stderr)
	if done {
		return code
	}
	if o.status {
		return shardStatusCmd(ctx, o, stdout, stderr)
	}
	env, err := o.runnerEnv(stdout, stderr)
	if err != nil {
		return fail(stderr, err)
	}
	logger, stderr := env.logger, env.stderr

	// Catch signals before anything can be started, so none is lost.
	ctx, stop := stopOnSignal(ctx, logger, o.id)
	defer stop()
	store, err := o.open(ctx, logger)
	if err != nil {
		if ctx.Err() != nil {
			return exitOK // stopped by a signal before anything ran
		}
		return fail(stderr, err)
	}
	defer store.Close()

	// One runner per key: `tenure run`'s, for one term at a time of that
	// key (no --restart loop of its own: the sharder's elector for the key
	// campaigns again after CMD exits). It gets the opened store, so that
	// it finds the lease files of the key's grant and hands them to the
	// supervisor.
	runners := make(map[string]*runner, len(o.keys))
	for _, k := range o.keys {
		ro := o.runOpts
		ro.key = k
		runners[k] = newRunner(ro, env, store)
		runners[k].moves = true
	}
	sh, err := shard.New(shard.Config{
		Store:    perKey(store),
		Group:    o.group,
		Identity: o.id,
		Members:  o.members,
		Keys:     o.keys,
		TTL:      o.ttl,
		Logger:   logger,
	})
	if err != nil {
		return fail(stderr, err)
	}
	if o.httpAddr != "" {
		view, err := listenShardView(o.httpAddr, o.group, sh)
		if err != nil {
			return fail(stderr, err)
		}
		viewCtx, stopView := context.WithCancel(context.WithoutCancel(ctx))
		defer stopView()
		view.serve(viewCtx, logger)
	}
	logger.Info("tenure: shard member starting", "group", o.group, "id", o.id, "members", len(o.members), "keys", len(o.keys))
	err = sh.Run(ctx, func(ctx context.Context, key string) error {
		r := runners[key]
		defer r.dismissStandby() // one left over if the term ended before CMD started
		return r.task(ctx)
	})
	if ctx.Err() != nil {
		logger.Info("tenure: shard member stopped; every command stopped and every key released", "group", o.group, "id", o.id)
		return exitOK
	}
	return fail(stderr, err)
}

// stopOnSignal returns ctx cancelled by SIGINT, SIGTERM or SIGHUP, which
// end the member: every task's context is cancelled, which stops its CMD
// (see runner.await) before its key is released. stop releases the
// signals and the context.
func stopOnSignal(ctx context.Context, logger *slog.Logger, id string) (_ context.Context, stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		select {
		case s := <-sigs:
			logger.Info("tenure: stopping every command and releasing every key", "signal", s.String(), "id", id)
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(sigs)
		cancel()
	}
}

// open opens the store as tenure run does (see runOpts.openStore) and
// checks the names again (the store may have named this member).
func (o *shardOpts) open(ctx context.Context, logger *slog.Logger) (tenure.Store, error) {
	store, err := o.openStore(ctx, logger)
	if err != nil {
		return nil, err
	}
	if err := o.checkNames(); err != nil {
		store.Close()
		return nil, err
	}
	return store, nil
}

// perKeyStore is the store as the sharder sees it: without sessions, so
// that each key's grant is a grant of its own. On the local store such a
// grant has a liveness file, which the key's supervisor holds open (see
// leaseFiler): if tenure is killed, the grant lives until the supervisor
// has killed CMD and exited, not a moment less. A session's grants share
// one file, which lives in tenure alone and would end every grant at once
// while the CMDs were still being killed. The optional abilities the
// sharder's electors use are passed on (values by perKeyPublisher: see
// perKey); the others (step-downs, defaults) it does not use.
type perKeyStore struct{ tenure.Store }

// perKeyPublisher is a perKeyStore whose store publishes values: the
// sharder publishes the fingerprint of its member and key lists with its
// liveness grant, by which members given other lists are told apart.
type perKeyPublisher struct{ perKeyStore }

// perKey returns store as the sharder sees it: a perKeyStore, or a
// perKeyPublisher if store is a [tenure.Publisher].
func perKey(store tenure.Store) tenure.Store {
	if _, ok := store.(tenure.Publisher); ok {
		return perKeyPublisher{perKeyStore{store}}
	}
	return perKeyStore{store}
}

// AcquireClaim passes on the store's [tenure.Publisher.AcquireClaim].
func (s perKeyPublisher) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	return s.Store.(tenure.Publisher).AcquireClaim(ctx, key, c)
}

// TTLRange passes on the store's range; (0, 0), no narrowing, if it has
// none.
func (s perKeyStore) TTLRange() (lo, hi time.Duration) {
	if r, ok := s.Store.(tenure.TTLRanger); ok {
		return r.TTLRange()
	}
	return 0, 0
}

// WatchPolls passes on whether the store's Watch polls.
func (s perKeyStore) WatchPolls() bool {
	p, ok := s.Store.(tenure.PollingWatcher)
	return ok && p.WatchPolls()
}
