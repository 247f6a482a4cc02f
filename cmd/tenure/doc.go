// Command tenure runs a command on exactly one machine (or process) at a
// time, chosen by leader election over a lease store, and shows who leads.
//
//	tenure demo                                  a live failover demo, no setup
//	tenure run --key nightly -- ./backup.sh      run only while leading "nightly"
//	tenure shard --group jobs --members a,b,c --id a --shards 16 -- ./worker
//	                                             run ./worker once per key a leads
//	tenure status --key nightly [--json]         who leads; exit 0 held, 3 free
//	tenure watch --key nightly [--json]          one line per change of leader
//	tenure step-down --key nightly [--to ID]     the leader hands over (see README)
//
// Every subcommand that uses a store takes --store URL, or --store-file PATH
// (a file holding the URL, refused unless only its owner can read it), or
// reads the URL from $TENURE_STORE, in that order of precedence; --store
// and --store-file together are a usage error, and so is either given
// empty or $TENURE_STORE set but blank. A URL with a password
// belongs in the file or the environment: a command line is visible to
// every user in ps. Stores are built only through [tenure.Open], so any
// store package linked in (a store_*.go file with a blank import) is
// available by its scheme. The default is the local store, file:// in its
// default directory, which coordinates processes of one machine. URLs are
// shown only through [tenure.Redact], and input that is not a URL is never
// shown at all.
//
// --ttl must be from 500ms (above the library's [tenure.MinTTL], 100ms:
// tenure run starts processes within the renew deadline) to
// [tenure.MaxTTL] (24h), and
// within the store's own range if it has one ([tenure.TTLRanger]: Azure
// blob leases 15s to 60s, etcd at least 1s); anything else is a usage
// error, exit code 2.
//
// # tenure run
//
// --advertise VALUE (or $TENURE_ADVERTISE) publishes VALUE with each grant
// tenure run wins, at most 1024 bytes of UTF-8 without control characters:
// typically the address followers route to. status, watch and the --http
// view show it while this candidate leads.
//
// tenure run campaigns with a [tenure.Elector] (TTL 10s by default) and,
// while leading, runs CMD with TENURE_KEY, TENURE_ID and TENURE_TERM (the
// fencing token) added to its environment. It does not run CMD itself: it
// re-executes itself as a hidden supervisor (`tenure __supervise`) that
// leads a new process group and runs CMD in that group; on Linux from
// /proc/self/exe, so that a new build renamed over the binary meanwhile
// (an upgrade in place) is never the supervisor of an older tenure: the
// control protocol below has no version of its own. The supervisor is
// started while tenure campaigns and waits on its control socket (fd 3, a
// SOCK_SEQPACKET socket pair); once elected, tenure sends it the term, the
// deadlines and, as SCM_RIGHTS, the store's lease files (a store with a
// LeaseFiles method, such as the local store), which it holds open, away
// from CMD, while it lives; once CMD has exited and its group is killed it
// reports CMD's exit code back on the socket.
// After every successful renewal tenure sends it the CLOCK_MONOTONIC
// instants at which the leader context will be cancelled and by which the
// group must be dead; the supervisor enforces them by itself. (Starting the
// supervisor ahead keeps the start-up of a large binary, which runs every
// linked store SDK's package initialisation, off the failover path.)
//
// Guarantees:
//
//   - CMD starts only after the lease was granted, and is SIGTERMed no later
//     than the elector's renew deadline and SIGKILLed no later than that plus
//     --grace, which must leave the lease unexpired (RenewDeadline + grace <
//     TTL is checked at start-up). This holds if tenure is frozen (SIGSTOP,
//     swapped out) since the supervisor keeps time itself, and if tenure is
//     killed: the supervisor then sees end of file on its control socket and
//     kills CMD at once. If the supervisor had to stop CMD because tenure
//     was late, tenure reports leadership lost, not CMD's clean exit.
//   - A crashed tenure's lease ends as soon as its supervisor and CMD are
//     dead (on stores that tie grants to open files, like the local store),
//     not after the TTL; CMD is dead before the lease can end.
//   - On loss of leadership, CMD's whole process group gets SIGTERM, then
//     SIGKILL after --grace; the lease is released only after the
//     supervisor exited.
//   - The supervisor is the subreaper of CMD's descendants
//     (PR_SET_CHILD_SUBREAPER): a process that leaves CMD's process group
//     (setsid, a daemon's double fork) is orphaned to it, gets the signals
//     the group gets, and is killed with CMD; when CMD exits, every
//     descendant left, in its group or not, is killed before the exit is
//     reported, so a CMD that daemonizes by itself is stopped at once.
//     tenure is a subreaper too: if the supervisor is SIGKILLed with CMD's
//     group (kill -9 0 inside CMD), what CMD left outside the group is
//     orphaned to tenure, which kills it before it releases the lease. As a
//     container's PID 1 it reaps the container's orphans as they exit.
//   - SIGINT, SIGTERM and SIGHUP sent to tenure are forwarded to CMD's group;
//     tenure waits for CMD and exits with its code. A signal while tenure is
//     only campaigning ends it with 128+n, without running CMD.
//   - All input is validated, CMD included (looked up in PATH), and the key
//     read once from the store, before campaigning: a bad command line never
//     consumes a term.
//
// Non-guarantees:
//
//   - Processes CMD hands work to outside its descendants (systemd-run,
//     at, another service) escape the supervisor; so do descendants that
//     left CMD's process group if tenure and the supervisor are both
//     SIGKILLed, and one that moved into tenure's own process group.
//   - The supervisor kills descendants for at most 5 s: one it may not
//     signal (running as another user, when tenure is not root) runs on,
//     as would descendants that fork faster than it reads /proc.
//   - CMD runs in a background process group: if it reads from a terminal
//     it is stopped by SIGTTIN. Leader-elected commands are usually daemons.
//   - Safety rests on the monotonic clocks of this machine and of the store
//     running at about the same rate (the TTL−RenewDeadline−grace margin
//     absorbs the difference), and on the store honouring its TTL. Protect
//     the resource itself with TENURE_TERM as a fencing token: a process can
//     always be paused between checking and acting.
//   - A frozen tenure (SIGSTOP) is not detected by the store: the key fails
//     over only when the lease expires, after at most the TTL.
//
// Exit codes of tenure run: CMD's own (128+n if it was killed by signal n);
// 1 if leadership was lost while CMD ran (without --restart; CMD was
// stopped) or on a runtime error (the store, starting the supervisor); 2 for
// a bad command line; 128+n if signal n ended tenure before CMD ran. With
// --restart tenure campaigns again after CMD exits or leadership is lost
// (or the supervisor could not start), and exits only on a signal: it is
// [tenure.Elector.Run] with CMD as the task, so it waits a jittered
// retry interval between terms, doubled after each consecutive term in
// which CMD failed (a non-zero exit while leading), up to the TTL. Without
// --restart it is [tenure.Elector.Do].
//
// # tenure shard
//
// tenure shard is one member of a [shard.Sharder] group: it spreads the
// keys of --shards or --keys over the live members of --members and runs
// CMD once per key it leads, each through a runner of tenure run of its
// own (one runner.task per term of the key), so each CMD has a supervisor
// process of its own, with the guarantees above, per key: the key's
// deadlines go to its supervisor at each renewal, and the key's lease
// files (a grant made outside any session: the sharder is given the store
// without its sessions, see perKeyStore) are held by that supervisor.
// TENURE_KEY is the shard key as the user named it ("0".."N-1", or an item
// of --keys), not its lease key GROUP/keys/KEY. Unlike tenure run, no
// supervisor is started ahead: one standing by per key would be K idle
// processes, so a key's supervisor starts once the key is granted. A CMD
// that exits while its key is led is run again as with --restart (the
// sharder's elector for the key releases it and campaigns again after its
// retry wait). A signal cancels every term: each CMD is stopped as on a
// loss, the keys are released, and tenure exits 0.
//
// # tenure watch --exec
//
// tenure watch --exec CMD runs CMD with /bin/sh -c for the state found at
// start and on each change of leader or term, with TENURE_KEY,
// TENURE_LEADER ("" when nobody leads), TENURE_TERM and TENURE_VALUE added
// to its environment. Runs are serialized; while one runs, newer changes
// replace the pending state, so the next run sees only the newest one. The
// watch hands states to the runner without waiting, so a slow or failing
// hook never delays its output. Failures are logged with the exit status,
// never the command line.
//
// Exit codes of tenure status: 0 the key is held, 3 it is free, 1 the store
// could not be read, 2 bad command line. tenure watch exits 0 on SIGINT or
// SIGTERM. Every error is a single line "tenure: ..." on stderr.
//
// # Leadership control
//
// tenure run turns on [tenure.Config.Control] on every store, peer modes included:
// --priority (default 1; 0 never leads), --handover and --yield-after set
// it. tenure step-down --key KEY [--to ID] [--window DUR] [--no-wait] makes
// the leader's elector cancel CMD's term with cause [tenure.ErrSteppedDown]
// (CMD gets SIGTERM, then SIGKILL after --grace), release the key once
// CMD's group is gone, and campaign again: tenure run does not exit, with
// or without --restart. Only ID may take the key during the window. The
// usual guarantee holds: the old CMD is dead before the new one starts.
// tenure status --candidates lists the registered candidates. In peer
// modes, step-down and status --candidates take the group's observer URL
// (no id): the request goes to the coordinator, authenticated by the
// group secret; in lowest, bully and ring the members but ID hold back
// for the window, in raft leadership is transferred to ID; the candidates
// are the members that answer, best first, with their priorities.
// --handover hands over to any other member (the algorithm picks the
// next by priority; raft its leadership transfer). --priority N (or
// priority=N in the URL) is the member's own: lowest, bully and ring elect
// the highest live priority, then by their usual ID order; priority 0
// never leads (in raft it hands raft leadership away at once and never
// grants); --yield-after DUR hands over to a member of higher priority
// seen live for DUR.
//
// tenure prefer --key KEY [--delay DUR] [--ttl DUR] ID sets candidate ID
// as the preferred holder of KEY, as a Kubernetes Lease's preferredHolder,
// for as long as it runs: the leading tenure run hands over to ID once it
// has seen it registered for --delay (default one TTL), and ID goes first
// when KEY is free. SIGINT or SIGTERM clears it (exit 0). Not in peer
// modes (exit 2): use --priority there.
//
// # JSON
//
// tenure status --json prints one object, and tenure watch --json one per
// line with an extra "time" (RFC 3339, when the change was seen):
//
//	{"key":"nightly","held":true,"holder":"host-1234","term":7,"ttl_ms":10000,"remaining_ms":8312,"value":"10.0.0.7:8080"}
//
// held is false and holder "" when the key is free; term is then the last
// term granted, 0 if never. value is what the holder published with
// tenure run --advertise (or [tenure.Config.Value]); "" when the key is
// free, the holder published nothing, or the store cannot publish values.
// In the lowest, bully and ring peer modes only the coordinator knows the
// value: a peer observer shows it when the coordinator itself answered,
// and a member's view shows it on the coordinator only. In raft every
// member knows it once applied. Fields may be
// added, never renamed or removed.
//
// tenure status --json adds acquire_time, renew_time and transitions (see
// grantTimes): renew_time is derived from the time left on stores that
// count it themselves, null elsewhere; acquire_time and transitions are
// null, since no store reports them.
package main
