// Package raft elects a leader among a static group of peers by quorum,
// with the raft consensus protocol (github.com/hashicorp/raft), and presents
// each member as a [tenure.Store] and [tenure.Reader] for one logical key.
// The same [tenure.Elector], Observer, health checks and `tenure run` work
// on it unchanged; unlike the lowest, bully and ring modes of package peer,
// a side of a partition without a majority never has a leader.
//
// A [Node] is one member. The raft leader holds the key:
//
//   - Acquire(ctx, key, identity, ttl): identity must be the node's ID. It
//     succeeds iff this node is the raft leader and a quorum confirms it (a
//     VerifyLeader round) before ctx is done. The lease's Term is the raft
//     term, granted at most once per key. Elsewhere it returns a
//     *[tenure.HeldError] naming the leader this node knows, or
//     [ErrNoLeader] (transient) while it knows none.
//   - Renew runs another quorum round; it returns [tenure.ErrLost] once this
//     node no longer leads the lease's term (a term never comes back) and a
//     transient error when the round does not finish within ctx, so the
//     elector's renew deadline cancels the task of a leader cut off from its
//     quorum.
//   - Release ends the grant and hands raft leadership to another member
//     (LeadershipTransfer), so the next leader, in a new term, takes over
//     without waiting for an election timeout. Until a new term begins the
//     releasing node grants nothing ([ErrSteppingDown]).
//   - Get and Watch report the raft leader as this node sees it (Holder ""
//     while it knows none) and the current term; TTL and Remaining are 0.
//     A member names a leader only with the term that leader won: raft's
//     main loop handles heartbeats in order with term changes (the
//     transport's heartbeat fast path is left unused, see heartbeat.go),
//     so one term never reads as held by two members.
//   - A Node is a [tenure.Publisher]: AcquireClaim with a Value commits the
//     value to the raft log in the grant's term (one more quorum round)
//     before granting, and every member's Get and Watch report it while
//     that term lasts, once the member applied it. The log is the only
//     state machine input; a snapshot keeps the value and its term.
//     Observers (below) report it too.
//   - Close stops the member; a majority of the others elects a new leader
//     after the heartbeat timeout.
//   - A Node is a [tenure.StepDowner]: the leader takes a step-down request
//     for its term (from the mode's observer over the status protocol, or
//     from its own process), serves it as the key's control-key record so
//     its elector with [tenure.Config.Control] cancels the task with
//     [tenure.ErrSteppedDown] and releases, and the release hands raft
//     leadership to the named member (LeadershipTransferToServer), else to
//     any (LeadershipTransfer), and to the other members in turn if
//     that fails (the member named is down). Raft has no abstention: only
//     the old leader's elector holds back, for the window but no longer
//     than raft's term stays the one asked to step down. The candidate slots of
//     the key read as this node and the leader it knows; on the leader,
//     with the TCP transport, as the members that answer a status query
//     (the leader asks them), with their priorities.
//
// # Priority
//
// Raft elects by its own rules, so [Config.Priority] (URL parameter
// priority, `tenure run --priority`) does not order the election. It is
// reported in status answers (observers list it) and in the leader's
// candidate slots, so a leader's elector with [tenure.Control.YieldAfter]
// hands over to a live member of a higher priority once it has seen it
// for that long: a step-down of its own term naming that member, and
// the release transfers raft leadership to it (LeadershipTransferToServer).
//
// A member of priority 0 never leads. hashicorp/raft cannot keep a voter
// from campaigning, and making it a nonvoter would take its vote out of
// the quorum (with three members, one failure would stop every election)
// and would need every member's static bootstrap configuration to know it.
// So it stays a voter, but its node grants no lease (Acquire answers
// [ErrSteppingDown]) and, whenever raft makes it leader, hands raft
// leadership to another member within a heartbeat timeout
// (LeadershipTransferToServer, naming each other member in turn, one
// attempt every heartbeat timeout while it still leads). Its own Get, and its
// status answers, which say priority 0, report no holder, so an observer
// reports the key free while it holds raft leadership; other members'
// Get may name it for that moment. If only members of priority 0 keep a
// quorum alive, raft leadership moves among them and nobody grants.
//
// Importing the package registers the peer mode "raft":
//
//	peer://?id=1&peers=1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001&algorithm=raft&secret-file=/etc/tenure/peer.secret&state-dir=/var/lib/tenure[&timeout=500ms&election-timeout=500ms&leader-lease-timeout=250ms]
//
// # Observers
//
// The same URL without id and state-dir opens a read-only [peer.Observer]
// (for `tenure status` and `tenure watch`): it asks every member whom it
// sees leading and in which term, and reports the leader of the highest
// term (Holder "" when no member knows one; TTL and Remaining 0), with
// the value published in that term as the members that applied it report
// it. It is not a raft server: not in the configuration, no vote, no log.
//
// The question travels on the member's raft port. The observer completes
// the same pre-authentication and mutual TLS 1.3 handshake as a member (so
// without the secret it learns nothing) and asks,
// through TLS application-layer protocol negotiation, for the protocol
// "tenure-raft-status/1"; raft's own connections ask for none. A member
// hands a connection that negotiated it to a small responder instead of
// raft: each request byte '?' gets one JSON line
// {"leader":"2","term":7,"state":"Follower","value":"10.0.0.2:8080","priority":1,"heartbeat_timeout_ns":500000000}
// ("value" omitted when none was published, and by members that predate
// it, as "priority" and "heartbeat_timeout_ns" are by members that predate
// them; fields are only added), on a connection the observer
// keeps between polls (closed after 30s idle). A member built before this
// protocol negotiates none, and the observer reports that it does not
// answer status queries.
//
// A step-down request travels on the same connection: the byte '!' and
// one line of JSON {"term":7,"to":"2","window_ms":10000}, answered by a
// status line with "accepted":true, or "refused" saying why (see
// status.go); the connection's mutual TLS authenticates it and protects it
// from replay.
//
// # Guarantees
//
//   - At most one leader per term, and a grant only with a quorum: a leader
//     cut off into a minority cannot acquire or renew (every Acquire and
//     Renew is a quorum round trip), and steps down after LeaderLeaseTimeout.
//     A minority side has no leader at all.
//   - Terms only grow. The current term and vote are fsync'd in the node's
//     directory (raft-boltdb) before raft acts on them, so a restarted member
//     never goes back, and a grant's term is above every grant that ended
//     before it began: a usable fencing token.
//   - No overlap of leader tasks, given the timing rule below and clocks
//     that run at the same rate: the elector cancels a leader's task
//     RenewDeadline (< TTL ≤ HeartbeatTimeout) after its last successful
//     renewal was sent, while the quorum that confirmed that renewal votes
//     for nobody else until it has heard nothing for at least
//     HeartbeatTimeout.
//   - Only holders of the shared secret take part. Every raft connection
//     starts with a pre-authentication on the raw TCP connection: the
//     dialer sends a fresh nonce, the acceptor answers with its own fresh
//     nonce, the dialer proves with an HMAC-SHA256 over both under a key
//     derived from the secret (HKDF-SHA256), and only then does the
//     acceptor prove itself the same way; a connection that fails is
//     closed. Then each node's certificate, signed by a certificate
//     authority key derived from the secret (HKDF-SHA256 to an Ed25519
//     key), is verified in mutual TLS 1.3. So a stranger who connects
//     receives one random nonce and nothing derived from the secret (no
//     proof, no certificate whose signature would let it test guesses of
//     the secret offline); a process without the secret cannot vote or
//     lead; traffic is encrypted and integrity-protected. The secret never
//     appears in errors or logs.
//   - The listener survives its errors: a failed Accept (EMFILE, ENFILE...)
//     is logged and retried with backoff (5 ms doubling to 1 s); at most 64
//     incoming connections are in their handshakes at once (more are closed
//     at once), each for at most 5 s.
//
// # The timing rule
//
// Acquire refuses (with [tenure.ErrInvalid]) a ttl longer than
// HeartbeatTimeout: after losing contact with this leader, a majority may
// elect another that soon, so a longer grant could not be honoured. Run the
// elector with TTL ≤ HeartbeatTimeout (the peer timeout, 500 ms by default).
// The margin TTL − RenewDeadline must also cover one network round trip: a
// heartbeat already in flight when a renewal starts can confirm it.
//
// The rule holds only if the members that vote share it: give every member
// the same timeout. A leader asks the other members their heartbeat timeout
// over the status protocol (it waits, at most HeartbeatTimeout/4, only for
// members it has not heard from yet) and refuses, with [tenure.ErrInvalid],
// a ttl longer than the timeout a majority of them report: they could
// elect another leader while its task runs.
//
// # Non-guarantees and assumptions
//
//   - Liveness needs a majority of members running and connected to each
//     other; with fewer, nobody leads (that is the point).
//   - The membership is static (bootstrapped from the member list on first
//     start); changing it means a new cluster: new directories on every
//     member. At least [MinMembers] members.
//   - Leader tasks are cancelled cooperatively, as with every store: a task
//     that ignores its context, or a process paused longer than the margin,
//     can still act after a new leader started. Fence writes with the term.
//   - A TLS connection proves membership, not identity: a holder of the
//     secret can claim any member ID. Keep the secret as safe as the
//     protected resource.
//   - The dialer proves first, so whoever answers at a member's address
//     (someone who took over the address or redirected traffic) receives
//     the dialer's proof and can test guesses of the secret against it
//     offline. A random secret makes that useless: secret files are
//     refused with less than about 96 bits of estimated entropy (see
//     [tcp.LoadSecret]).
//   - Clocks need not agree, but must advance at about the same rate; timers
//     are local and monotonic.
//
// # Testing
//
// The tests run whole clusters in one process over raft's in-memory
// transport, inside testing/synctest bubbles (virtual time), with seeded
// partitions, crashes and restarts; a failing seed is printed and rerun
// with
//
//	TENURE_RAFT_SEED=N go test ./peer/raft -run TestSimulation -v
//
// Loopback TCP tests and BenchmarkFailover use the authenticated transport.
package raft
