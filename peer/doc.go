// Package peer elects a coordinator among a static group of processes that
// talk to each other directly, with no lease store: the "lowest ID", Bully
// and Ring strategies of the leader-election pattern (packages
// peer/lowest, peer/bully, peer/ring), and complete modes such as
// peer/raft, all behind one algorithm registry.
//
// # Layers
//
// Data crosses each layer once, in both directions, and each is usable
// alone in a test:
//
//   - peer/wire: the [wire.Message] members exchange and its frame format
//     (version 6), with fuzzed decoders. No I/O, no state.
//   - peer/transport: the [transport.Transport] interface a node sends and
//     receives through (status queries included, with their reply), the
//     observer's [transport.Asker], and the member list ([transport.Group]).
//   - peer/tcp (the authenticated TCP transport: handshake, group keys,
//     secret files) and peer/memnet (in memory, seeded faults) implement
//     it; the algorithms run unchanged over either.
//   - this package: the [Algorithm] interface and its registry ([Register],
//     [Algorithms], [Open], shaped like [tenure.Register]), the [Node] that
//     runs an algorithm with its failure detector, handover and persisted
//     epochs ([EpochStore]), the Store adapter (store.go), the [Observer],
//     and the peer:// URL ([ParseURL]). Algorithm-specific options are
//     typed ([Config.Options]), converted from the URL by the parser the
//     algorithm registers ([WithParams]).
//   - peer/lowest, peer/bully, peer/ring: algorithms run by Node;
//     peer/raft: a complete mode with its own transport.
//
// A member's [Node] is a [tenure.Store] and [tenure.Reader] for one logical
// key, so the same [tenure.Elector], Observer, health checks and `tenure run`
// work unchanged:
//
//   - Acquire(ctx, key, identity, ttl): identity must be the node's ID in
//     decimal. It succeeds iff the algorithm made this node coordinator and
//     the handover below is complete; the lease's Term is the coordinator
//     epoch. Another coordinator gives a *[tenure.HeldError] naming it; no
//     coordinator yet gives [ErrElecting], a coordinator still waiting for
//     the handover [ErrHandover] (both transient: the elector retries, and
//     the node's Watch wakes it when the wait ends).
//   - Renew succeeds while the node is coordinator under that epoch and
//     returns [tenure.ErrLost] once it stopped being coordinator.
//   - Release resigns: Resign is sent to all, the node abstains from
//     elections for Timeout, the others elect someone else.
//   - Get and Watch report the coordinator this node follows (Watch, built
//     on [tenure.Follow], names the coordinator on its own node only once
//     its handover is complete). Watch delivers a change at once, so a coordinator that learns it is
//     superseded (a higher epoch, another member's claim with precedence)
//     or steps down pushes the loss: the elector's watch of its own grant
//     cancels the task at once, not at the next renewal.
//   - Close leaves the group silently; the others detect it by timeout.
//
// # One leader task at a time: the handover
//
// Without a partition (see the assumptions below), no two members' leader
// tasks run at once, in every algorithm: on preemption by a member with
// precedence, on recovery after a crash, on an election started by a
// suspicion, on a ring re-election. A new coordinator is elected at once,
// but its node grants the lease (Acquire succeeds, so its task starts)
// only when every other member M has either
//
//   - yielded: M answers each claim of a coordinator still waiting (flag
//     [wire.FlagHandover]) with a [wire.Yield]; it yields to the new epoch only once
//     M's node holds no grant of an older epoch: it is not coordinator under
//     one, and the lease it last handed out was released by its elector
//     (Release, even of a superseded lease), or its elector came back to
//     Acquire (so its previous term and task ended: the elector never
//     campaigns while a task runs), or, if neither happens, TTL passed
//     since that lease's last successful renewal by M's own clock (the
//     elector cancels its task at the latest RenewDeadline < TTL after it
//     sent that renewal). Until then M answers "not yet", which also keeps
//     it heard from; or
//   - stayed silent for Timeout + Heartbeat, counted from the later of the
//     election and the last message heard from M: such a member is taken to
//     have crashed (the synchrony assumption), and a crashed member's task
//     died with it. The extra heartbeat covers an answer still in flight.
//     Counting from the election too gives a member that is alive after all
//     (a false suspicion: its messages were lost for Timeout) a whole
//     Timeout of the new coordinator's claims, every heartbeat, to step
//     down at once and answer "not yet", which keeps it heard from.
//
// So the handover from a live coordinator takes about one message round
// trip after its task returned (plus the elector's retry interval, TTL/15,
// before it comes back to Acquire), and only a crashed or silent
// predecessor costs a timeout: about 2×Timeout + a few heartbeats from the
// crash to the new grant (Timeout to suspect it and elect, then Timeout +
// Heartbeat of silence; the simulations found that waiting only two
// heartbeats after the election lets a falsely suspected coordinator
// overlap under heavy message loss). A deposed member whose elector
// neither releases nor comes back (a task slow to return) holds up the
// handover for at most TTL after its last renewal; its task's context was
// cancelled by then (at RenewDeadline), and `tenure run` has SIGKILLed its
// CMD (RenewDeadline + --grace < TTL), but an in-process task that ignores
// cancellation longer than TTL − RenewDeadline is not covered. No clock is
// compared across members: each wait is measured on one member's
// monotonic clock, so clock rates need no margin beyond the synchrony
// assumption itself (a live member is never silent for Timeout).
//
// Use the elector's defaults with the node's (`tenure run` does): the TTL
// is 3×Timeout, so a deposed coordinator whose elector never comes back
// holds up its successor by at most 3×Timeout.
//
// Importing the package registers the URL scheme "peer":
//
//	peer://?id=2&peers=1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001&algorithm=bully&secret-file=/etc/tenure/peer.secret&state-dir=/var/lib/tenure[&heartbeat=100ms&timeout=500ms&no-preempt=1&key=NAME]
//
// Every member gets the same peers list and secret file and its own id.
// The secret file's content never appears in errors or logs, nor does its
// path: [tenure.Redact] hides the secret-file parameter, and the errors
// about the file itself (a mode open to group or others, too little
// entropy) name it as "the file named by secret-file" and say how to fix
// it ([tcp.LoadSecretParam]).
//
// # Observers: the URL without id
//
// The same URL without id (and without state-dir) opens an [Observer]
// instead of a member, for `tenure status` and `tenure watch`:
//
//	peer://?peers=1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001&algorithm=bully&secret-file=/etc/tenure/peer.secret
//
// An observer asks every member, with a status query authenticated by the
// shared secret, which coordinator it follows and under which epoch. Get
// returns the coordinator with the highest epoch that a member which
// answered reports (Holder its ID, Term its epoch, TTL and Remaining as
// that member says, Value what the coordinator published with its grant
// when the coordinator itself answered), Holder "" when none reports one, and an error naming
// each member and why when none answers. Watch repeats that every
// Heartbeat and delivers changes. The Observer is a [tenure.Reader];
// [tenure.Open] returns its Store face ([Observer.Store]), whose Acquire,
// Renew and Release fail with [ErrObserver] (a [tenure.ErrInvalid]): add
// id=N to campaign.
//
// An observer is never a member: it takes no ID (its queries come from
// [wire.ObserverID], 0, which no member can have), members' nodes answer
// its queries in their dispatch and never pass them to the election, so it is never
// heard as alive, never voted for and never followed; it sends no
// heartbeats. Without the secret it learns nothing: members close the
// connection when its handshake proof fails, and answers are authenticated
// under the connection's session key and carry the query's random nonce,
// so an old answer cannot be replayed to it. The
// raft mode answers the same questions over its mutual-TLS port (see
// package peer/raft).
//
// # Leadership control: step-down
//
// Any holder of the group's secret can ask the coordinator to step down
// ([tenure.RequestStepDown] on an observer, `tenure step-down` with the
// observer URL), naming a member to hand over to or none, with a window:
// the observer sends a [wire.StepDown] for the coordinator's epoch,
// authenticated and replay-protected like its status queries, and the
// coordinator of that epoch takes it (any other member refuses). Its node
// then serves the request as the record of the key's control key
// ([tenure.ControlKey]), so its elector with [tenure.Config.Control] (as
// `tenure run` sets) cancels the task with [tenure.ErrSteppedDown], waits
// for it to return and releases; the release resigns with the request,
// and every member but the one named (the old coordinator included; only
// the old coordinator when none is named) abstains for the window. After
// it anyone stands again, so a transfer to a member that is down falls
// back by itself; a later step-down's rule replaces an earlier one's. The
// successor grants only after the handover above, so the old task stops
// before the new one starts. An elector without Config.Control ignores
// the request, as on a store.
//
// Abstaining is all the algorithms are told: lowest, and bully without
// no-preempt, still prefer their member, which takes over again once the
// window ends (ring keeps the new coordinator).
//
// # Priorities
//
// Each member has a priority ([Config.Priority], URL parameter priority,
// `tenure run --priority`; default 1) and announces it in every message it
// sends (protocol version 6); a node remembers what each member's last
// message said ([Env.Priority]). In lowest, bully and ring the live member
// of the highest priority coordinates, and among equal priorities the
// algorithm's own order of IDs decides ([Outranks]): the order is total
// and each member's priority is fixed while its process runs, so the
// algorithms' arguments for one coordinator carry over unchanged, and the
// handover above still guards the tasks. A member of priority 0
// ([tenure.NeverLead]) abstains for good: it heartbeats, answers, forwards
// ring messages and follows, but never stands, and its node refuses to
// become coordinator; with only such members alive nobody coordinates and
// the key stays free. Priority ranks members only when an election runs:
// lowest and bully (without no-preempt) preempt for a higher priority as
// they do for a preferred ID; ring and bully with no-preempt do not, and a
// leader's [tenure.Control.YieldAfter] then hands over to a live member of a
// higher priority seen for that long, through the step-down above. Raft
// has its own rules (package peer/raft).
//
// Nodes serve their key's candidate slots as the members they hear from,
// with their priorities; followers heartbeat the coordinator (bully, ring;
// in lowest everyone heartbeats everyone), so the coordinator's node, and
// so its elector's YieldAfter, sees every live member. An observer lists
// the members that answer, best first ([Observer.Candidates]), and takes
// no claim of a coordinator whose own answer says priority 0.
//
// # Epochs: the fencing term
//
// Every new coordinator takes an epoch greater than every epoch it knows,
// persisted (fsync'd file peer-<ID>.epoch in state-dir) before it is
// announced; members persist the highest epoch they hear of, so epochs never
// go back, even across restarts, and a corrupt epoch file is an error, never
// "epoch 0". Epochs are also unique per member (member of rank r issues only
// epochs ≡ r modulo the group size), so two coordinators elected at the same
// time on both sides of a partition hold different epochs: max(known)+1
// rounded up to the member's residue. Every message carries the sender's
// highest epoch; a coordinator that hears of a higher one steps down (its
// Watch reports it at once and Renew returns ErrLost) and a heartbeat
// claiming an older epoch is rejected. Epochs never wrap: once no epoch of
// its residue fits in 64 bits (a member that holds the secret can announce
// 2^64-1), a member refuses to coordinate, logs why once, and the group
// stays without a coordinator until the epoch files are reset.
//
// # Transport and security
//
// Members talk over the authenticated TCP transport of package peer/tcp
// (protocol version 6: a handshake with fresh nonces from both sides,
// per-group keys derived with HKDF, per-connection MACs with sequence
// numbers; its package doc states what it protects and what not). Package
// peer/memnet is an in-memory transport with seeded faults for tests. Both
// implement [transport.Transport], the one interface a [Node] sends and
// receives through.
//
// # What the algorithms assume (and when to pick raft instead)
//
// lowest, bully and ring assume a synchronous system: messages arrive within
// about a heartbeat and a member silent for Timeout has crashed (a reliable
// failure detector), IDs are unique and totally ordered and the member list
// is the same everywhere. Within those assumptions, once faults stop, all
// live members agree on one coordinator within about
// Timeout + a few heartbeats, and no two members' leader tasks are ever
// live at once (the handover above). The seeded simulations check both,
// with real electors on every member, crashes and recoveries of the
// coordinator and of the member with precedence, loss, duplication and
// delay; the no-overlap check applies to the seeds without partitions.
//
// Under a partition or a false suspicion (a long GC pause, a member silent
// for Timeout although alive, delays beyond the assumed bound) they CAN
// ELECT TWO COORDINATORS at once, one per side, and both grant: the
// handover takes silence for a crash, and a coordinator cut off from the
// others does not stop by itself (it cannot tell a crashed follower from a
// partition without a quorum, and stopping whenever a follower crashes
// would stop every task with it). They never share an epoch, and when the
// partition heals the coordinator with the lower epoch steps down and its
// task is cancelled at once; but between the two moments both tasks run.
// The epoch is therefore a fencing token that must be checked by the
// protected resource (reject writes with an epoch lower than the highest
// seen). If you cannot fence, use a quorum mode (raft, which stays
// partition-safe) or a lease store.
//
// # Non-guarantees
//
//   - No quorum: a minority side elects its own coordinator.
//   - The membership is static; changing it means restarting every member
//     with the new list.
//   - Every member must run a version with the handover ([wire.Yield]): a new
//     coordinator waits for each live member's Yield, which an older
//     member never sends (it drops the unknown type), so a lowest group
//     with one older member never grants and a bully or ring group waits
//     for its silence. Upgrade by restarting every member together.
//   - Timing is local: each member uses its own monotonic clock; no clock
//     synchronization is needed, but Timeout must exceed the worst message
//     delay plus pause, or suspicions will be false.
//   - Delivery is best effort: a message sent while its connection is
//     being replaced (after the receiver restarted, or its idle timeout)
//     can be lost. Replays are not: no frame is accepted outside the
//     connection and position it was sent at.
//   - Authentication proves membership of the group, not identity: any
//     holder of the secret can claim any member ID. The dialer proves
//     first, so whoever answers at a member's address receives its proof
//     and could test guesses of the secret against it offline; a random
//     secret (see [tcp.LoadSecret]) makes that useless.
//   - The group key binds the URL's key parameter, not the key a node binds
//     on first use, and member IDs, not addresses: two groups with the same
//     IDs, algorithm and key parameter (or none) derive the same group key
//     from one secret. Recorded frames are still useless across them, but
//     someone who can redirect a live connection could splice it into the
//     other group: give each group its own key= or its own secret file.
//   - An observer reports what the members it reaches believe, polled: a
//     follower keeps naming a crashed coordinator until it suspects it
//     (Timeout), a change shorter than a Heartbeat can be missed, and during
//     a split it names the coordinator with the higher epoch, not the only
//     one. It is a view for people and routing, never a fencing token
//     source for a writer.
package peer
