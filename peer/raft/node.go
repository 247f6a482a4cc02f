package raft

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	hraft "github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"go.etcd.io/bbolt"
	bberrors "go.etcd.io/bbolt/errors"
)

// ErrNoLeader is returned (wrapped) by [Node.Acquire] while this node knows
// of no leader: an election is under way, or this node cannot reach a
// quorum. It is transient; the elector retries.
var ErrNoLeader = fmt.Errorf("tenure/raft: no leader known (%w)", tenure.ErrUnavailable)

// ErrSteppingDown is returned (wrapped) by [Node.Acquire] on a node that
// released its grant of a key but is still raft leader of the same term,
// because handing leadership over has not succeeded yet. A grant's term must
// be new, so this node cannot grant the key again before a new term; each
// such Acquire tries the handover again. It is transient.
var ErrSteppingDown = errors.New("tenure/raft: stepping down; no new grant in this term")

// Node is one member of a raft cluster, seen as a [tenure.Store] for one
// key (Config.Key, or the first key used), which the raft leader holds.
// Create it with [New]; it is safe for
// concurrent use. See the package documentation for what it guarantees.
type Node struct {
	cfg    Config
	raft   *hraft.Raft
	layer  *tlsLayer // nil with an injected transport
	peers  *tlsAsker // asks the other members (peers.go); nil with an injected transport
	closer []io.Closer
	closed atomic.Bool
	done   chan struct{} // closed by Close

	// Futures raft accepted before shutting down may never be answered,
	// so Close first stops new ones and waits for those in flight (raft
	// answers each within its own timeouts while it runs).
	futMu    sync.Mutex
	closing  bool
	inflight sync.WaitGroup

	mu    sync.Mutex
	key   string // the one key served: Config.Key or the first used
	grant grant  // the last grant of key

	fsm valueFSM // the values published with grants

	peerHB peerTimeouts // the other members' heartbeat timeouts (timeouts.go)

	sd       stepDown                   // the last step-down request taken (stepdown.go); guarded by mu
	ctlWatch map[chan struct{}]struct{} // wakes of the control key's watches; guarded by mu
	started  time.Time
}

// grant is this node's last grant of its key.
type grant struct {
	term uint64
	held bool // false once released or found lost
}

var (
	_ tenure.Publisher = (*Node)(nil)
)

// New starts the raft member cfg.ID and returns it as a store. On first
// start it bootstraps the cluster from cfg.Members (a node that already has
// state keeps it: its term and vote are durable in cfg.Dir). New does not
// wait for an election; it returns an error wrapping [tenure.ErrInvalid]
// for a bad configuration, without quoting the secret.
func New(cfg Config) (*Node, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	n := &Node{cfg: cfg, key: cfg.Key, done: make(chan struct{}), ctlWatch: map[chan struct{}]struct{}{}, started: time.Now()}
	ok := false
	defer func() {
		if !ok {
			n.closeResources()
		}
	}()

	logs, stable, snaps, err := n.openStores()
	if err == nil {
		err = n.claimDirState(stable)
	}
	if err != nil {
		return nil, err
	}
	trans, err := n.openTransport()
	if err != nil {
		return nil, err
	}
	closeTrans := func() {
		if c, ok := trans.(io.Closer); ok {
			c.Close()
		}
	}
	if n.layer != nil {
		if n.peers, err = newPeerAsker(cfg); err != nil {
			closeTrans()
			return nil, err
		}
		n.closer = append(n.closer, n.peers)
	}

	rc := cfg.raftConfig()
	var elected chan bool
	if cfg.priority() == tenure.NeverLead {
		elected = make(chan bool, 1)
		rc.NotifyCh = elected
	}
	if err := hraft.ValidateConfig(rc); err != nil {
		closeTrans()
		return nil, invalidf("%v", err)
	}
	has, err := hraft.HasExistingState(logs, stable, snaps)
	if err != nil {
		closeTrans()
		return nil, fmt.Errorf("raft: read state: %w", err)
	}
	if !has {
		if err := hraft.BootstrapCluster(rc, logs, stable, snaps, trans, cfg.bootstrap()); err != nil {
			closeTrans()
			return nil, fmt.Errorf("raft: bootstrap: %w", err)
		}
	}
	// Heartbeats through the main loop, in order with term changes
	// (heartbeat.go).
	if n.raft, err = hraft.NewRaft(rc, &n.fsm, logs, stable, snaps, serialHeartbeats(trans)); err != nil {
		closeTrans()
		return nil, fmt.Errorf("raft: start: %w", err)
	}
	if err := n.checkMembers(); err != nil {
		n.raft.Shutdown().Error() // closes the transport
		return nil, err
	}
	if n.layer != nil {
		n.layer.setStatus(n.status)
		n.layer.setStepDown(n.answerStepDown)
	}
	if elected != nil {
		go n.handAway(elected)
	}
	ok = true
	return n, nil
}

// memberKey is the stable-store key under which a node records the member
// ID its state belongs to.
var memberKey = []byte("tenure-member-id")

// claimState records this member's ID in stable on first use, and refuses
// state recorded for another member: the term, vote and log of member 1
// copied into member 2's directory (a restore from the wrong backup) would
// make member 2 vote as if it were 1, and vote twice in a term. It does
// not block beyond the store.
func (n *Node) claimState(stable hraft.StableStore) error {
	id, err := stable.Get(memberKey)
	switch {
	case err != nil && err.Error() == "not found": // raft's stores say so
		if err := stable.Set(memberKey, []byte(n.cfg.ID)); err != nil {
			return fmt.Errorf("raft: record the member ID in its state: %w", err)
		}
		return nil
	case err != nil:
		return fmt.Errorf("raft: read the member ID in its state: %w", err)
	case string(id) != n.cfg.ID:
		where := "the given StableStore"
		if n.cfg.LogStore == nil {
			where = n.cfg.Dir
		}
		return invalidf("%s holds the raft state of member %q, not of member %q: each member needs its own (a copy would vote as the other member)", where, id, n.cfg.ID)
	}
	return nil
}

// stateMarker names the file in Config.Dir that records that raft.db
// there held this member's state: written once raft.db holds the member
// ID (claimState), it outlives a raft.db truncated to 0 bytes, deleted or
// replaced by an empty one.
const stateMarker = "tenure-member"

// claimDirState is claimState for the on-disk stores in Config.Dir: it
// refuses to start a member whose raft.db lost the state the marker says
// it had. Such a member would come back with term 0 and no record of its
// vote, and could vote a second time in a term still contested: found by
// truncating raft-1/raft.db to 0 bytes, which raft took for a first start
// and bootstrapped anew. A directory emptied as a whole, marker included,
// cannot be told from a first start here. With injected stores it is
// claimState. It does not block beyond the file system.
func (n *Node) claimDirState(stable hraft.StableStore) error {
	if n.cfg.LogStore != nil {
		return n.claimState(stable)
	}
	marker := filepath.Join(n.cfg.Dir, stateMarker)
	_, statErr := os.Stat(marker)
	if statErr != nil && !errors.Is(statErr, fs.ErrNotExist) {
		return fmt.Errorf("raft: read %s: %w", marker, statErr)
	}
	if _, err := stable.Get(memberKey); statErr == nil && err != nil && err.Error() == "not found" {
		return fmt.Errorf("raft: %s holds no raft state, but %s says member %s had some there: its term and vote are lost (the file was emptied, truncated or replaced), and it could vote twice in a term; restore this member's own raft.db, or, to start it without state anyway, remove %s",
			filepath.Join(n.cfg.Dir, "raft.db"), marker, n.cfg.ID, marker)
	}
	if err := n.claimState(stable); err != nil || statErr == nil {
		return err
	}
	return writeMarker(marker, n.cfg.ID)
}

// writeMarker writes the state marker durably: the file, then its
// directory entry.
func writeMarker(path, id string) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err == nil {
		_, err = f.WriteString(id + "\n")
		if serr := f.Sync(); err == nil {
			err = serr
		}
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err == nil {
		var d *os.File
		if d, err = os.Open(filepath.Dir(path)); err == nil {
			err = d.Sync()
			d.Close()
		}
	}
	if err != nil {
		return fmt.Errorf("raft: record that this member has state in %s: %w", path, err)
	}
	return nil
}

// checkMembers refuses a member list other than the configuration raft
// restored from this member's state, which it was bootstrapped with on
// first start: raft would keep the stored one without a word, so a member
// started with another list (an address moved, a member added) would dial
// and count members other than those it was given. It does not block.
func (n *Node) checkMembers() error {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return fmt.Errorf("raft: read the configuration in this member's state: %w", err)
	}
	stored, given := describeMembers(f.Configuration()), describeMembers(n.cfg.bootstrap())
	if stored == given {
		return nil
	}
	where := "this member's state"
	if n.cfg.LogStore == nil {
		where = n.cfg.Dir
	}
	return invalidf("the member list %s differs from %s, which %s was bootstrapped with; the membership is static: start every member with that list, or move every member's state directory aside to start a new group", given, stored, where)
}

// describeMembers lists conf's servers as ID=address, sorted by ID,
// marking any that is not a voter.
func describeMembers(conf hraft.Configuration) string {
	var s []string
	for _, srv := range conf.Servers {
		d := string(srv.ID) + "=" + string(srv.Address)
		if srv.Suffrage != hraft.Voter {
			d += "(" + srv.Suffrage.String() + ")"
		}
		s = append(s, d)
	}
	slices.Sort(s)
	return strings.Join(s, ",")
}

// handAway is a priority-0 member's answer to raft making it leader: it
// hands leadership to another member at its next tick, within one
// HeartbeatTimeout, and again every HeartbeatTimeout while it still leads
// (a transfer fails while its target is down or behind). Each attempt
// names the next of the other members in turn (LeadershipTransferToServer),
// or the member a live step-down request names: raft's own pick prefers
// the first of equally up-to-date members, which, where two members of
// priority 0 are the most up to date, would hand leadership back and forth
// between them and never to a third that may lead. Not at once: members of
// priority 0 would otherwise hand it around as fast as raft can elect,
// each election a new term and a log entry. It runs until the node closes;
// raft sends on elected (true: it leads) without blocking.
func (n *Node) handAway(elected <-chan bool) {
	t := time.NewTicker(n.cfg.HeartbeatTimeout)
	defer t.Stop()
	var others []Member
	for _, m := range n.cfg.Members {
		if m.ID != n.cfg.ID {
			others = append(others, m)
		}
	}
	for next := 0; ; {
		select {
		case <-n.done:
			return
		case <-elected:
			continue // handed away at the next tick
		case <-t.C:
		}
		if n.raft.State() != hraft.Leader {
			continue
		}
		n.cfg.Logger.Info("priority 0: handing raft leadership to another member", "id", n.cfg.ID, "term", n.raft.CurrentTerm())
		ctx, cancel := context.WithTimeout(context.Background(), 2*n.cfg.ElectionTimeout)
		var err error
		if _, _, named := n.transferTarget(n.raft.CurrentTerm()); named || len(others) == 0 {
			err = n.transfer(ctx)
		} else {
			m := others[next%len(others)]
			next++
			err = n.wait(ctx, func() hraft.Future {
				return n.raft.LeadershipTransferToServer(hraft.ServerID(m.ID), hraft.ServerAddress(m.Addr))
			})
			if errors.Is(err, hraft.ErrNotLeader) {
				err = nil // someone else leads already
			}
		}
		if err != nil && !errors.Is(err, tenure.ErrClosed) {
			n.cfg.Logger.Warn("priority 0: cannot hand raft leadership over yet", "id", n.cfg.ID, "err", err)
		}
		cancel()
	}
}

// openStores returns the configured stores, or opens the on-disk ones in
// cfg.Dir (closed with the node), refusing a Dir others may write as
// [peer.PrepareStateDir] does.
func (n *Node) openStores() (hraft.LogStore, hraft.StableStore, hraft.SnapshotStore, error) {
	cfg := n.cfg
	if cfg.LogStore != nil {
		return cfg.LogStore, cfg.StableStore, cfg.SnapshotStore, nil
	}
	// Whoever can write Dir, or move it aside, can take the term and vote
	// back: the same rule as a peer member's state directory.
	if err := peer.PrepareStateDir(cfg.Dir); err != nil {
		return nil, nil, nil, fmt.Errorf("raft: Config.Dir: %w", err)
	}
	bolt, err := raftboltdb.New(raftboltdb.Options{
		Path: filepath.Join(cfg.Dir, "raft.db"),
		// Another process holding the file fails rather than hangs.
		BoltOptions: &bbolt.Options{Timeout: time.Second},
	})
	if errors.Is(err, bberrors.ErrTimeout) {
		return nil, nil, nil, fmt.Errorf("raft: %s is locked by another process: is member %s already running with this state directory? (%w)", filepath.Join(cfg.Dir, "raft.db"), cfg.ID, err)
	}
	if err != nil {
		return nil, nil, nil, fmt.Errorf("raft: open %s: %w", filepath.Join(cfg.Dir, "raft.db"), err)
	}
	n.closer = append(n.closer, bolt)
	snaps, err := hraft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, cfg.Logger)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("raft: snapshot store in %s: %w", cfg.Dir, err)
	}
	return bolt, bolt, snaps, nil
}

// openTransport returns the configured transport, or listens with the
// authenticated TLS transport on this member's address.
func (n *Node) openTransport() (hraft.Transport, error) {
	cfg := n.cfg
	if cfg.Transport != nil {
		return cfg.Transport, nil
	}
	conf, err := clusterTLS(cfg.Secret)
	if err != nil {
		return nil, err
	}
	psk, err := preauthKey(cfg.Secret)
	if err != nil {
		return nil, err
	}
	if n.layer, err = listenTLS(cfg.self().Addr, conf, psk, cfg.Logger); err != nil {
		return nil, err
	}
	return hraft.NewNetworkTransportWithConfig(&hraft.NetworkTransportConfig{
		Stream:  n.layer,
		MaxPool: 3,
		Timeout: max(5*cfg.HeartbeatTimeout, time.Second),
		Logger:  cfg.Logger,
	}), nil
}

// ID is this node's member ID, the identity its elector must use.
func (n *Node) ID() string { return n.cfg.ID }

// Raft is the underlying hashicorp/raft instance, for inspection (State,
// Stats). Changing its membership or shutting it down directly breaks the
// node's guarantees.
func (n *Node) Raft() *hraft.Raft { return n.raft }

// Acquire grants key to this node for the current raft term. It succeeds
// only if identity is this node's ID, this node is the raft leader, and a
// quorum confirms that (a VerifyLeader round) before ctx is done; the
// lease's Term is the raft term, which is durable and only grows, and is
// granted at most once per key.
//
// ttl must not exceed the heartbeat timeout: a majority may elect a new
// leader that long after this one last reached it, so a longer grant could
// not be honoured. A larger ttl gives an error wrapping [tenure.ErrInvalid].
//
// On a follower it returns a *[tenure.HeldError] naming the leader it
// knows, or an error wrapping [ErrNoLeader] while it knows none; on a
// leader already holding key, a HeldError naming itself. Acquire blocks for
// at most one quorum round trip, bounded by ctx.
func (n *Node) Acquire(ctx context.Context, key, identity string, ttl time.Duration) (tenure.Lease, error) {
	return n.AcquireClaim(ctx, key, tenure.Claim{Identity: identity, TTL: ttl})
}

// AcquireClaim implements [tenure.Publisher]: [Node.Acquire], and, if
// c.Value is set, it commits c.Value to the raft log in the grant's term
// (one more quorum round trip, bounded by ctx) before granting. Every
// member's [Node.Get] reports the value while that term lasts.
func (n *Node) AcquireClaim(ctx context.Context, key string, c tenure.Claim) (tenure.Lease, error) {
	if err := tenure.CheckClaim(key, c); err != nil {
		return tenure.Lease{}, err
	}
	identity, ttl := c.Identity, c.TTL
	if err := n.checkKey(key); err != nil {
		return tenure.Lease{}, err
	}
	if identity != n.cfg.ID {
		return tenure.Lease{}, invalidf("identity %q is not this node's ID %q", identity, n.cfg.ID)
	}
	if _, kind, _ := peer.SplitKey(key); kind != peer.KindMain {
		// Leadership control: the node serves its candidate slots itself
		// (registering is a no-op) and takes step-down requests through
		// RequestStepDown, never as a grant.
		if kind == peer.KindControl {
			return tenure.Lease{}, invalidf("the control key %q is the node's own; ask for a step-down with tenure.RequestStepDown", key)
		}
		if n.closed.Load() {
			return tenure.Lease{}, tenure.ErrClosed
		}
		return tenure.Lease{Key: key, Identity: identity, Term: 1, TTL: ttl, Token: "1", Value: c.Value}, nil
	}
	if ttl > n.cfg.HeartbeatTimeout {
		return tenure.Lease{}, invalidf("ttl %s exceeds the heartbeat timeout %s: the majority may elect another leader that soon after losing touch with this one; use a ttl of at most %s or a longer heartbeat timeout (timeout= in a peer:// URL)", ttl, n.cfg.HeartbeatTimeout, n.cfg.HeartbeatTimeout)
	}
	if n.closed.Load() {
		return tenure.Lease{}, tenure.ErrClosed
	}
	if n.raft.State() != hraft.Leader {
		return tenure.Lease{}, n.notLeader(key)
	}
	if n.cfg.priority() == tenure.NeverLead {
		return tenure.Lease{}, fmt.Errorf("%w (member %q has priority 0 and hands raft leadership away)", ErrSteppingDown, n.cfg.ID)
	}
	term := n.raft.CurrentTerm()
	n.mu.Lock()
	g := n.grant
	n.mu.Unlock()
	switch {
	case g.held && g.term == term:
		return tenure.Lease{}, &tenure.HeldError{Record: tenure.Record{Key: key, Holder: n.cfg.ID, Term: term}}
	case g.term >= term:
		n.transfer(ctx)
		return tenure.Lease{}, fmt.Errorf("%w (key %q was released in term %d)", ErrSteppingDown, key, term)
	}
	if err := n.verify(ctx, term); err != nil {
		if errors.Is(err, tenure.ErrLost) {
			return tenure.Lease{}, n.notLeader(key)
		}
		return tenure.Lease{}, err
	}
	if err := n.checkPeerTimeouts(ctx, ttl); err != nil {
		return tenure.Lease{}, err
	}
	if c.Value != "" {
		if err := n.publish(ctx, term, c.Value); err != nil {
			if errors.Is(err, tenure.ErrLost) {
				return tenure.Lease{}, n.notLeader(key)
			}
			return tenure.Lease{}, err
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.grant.term >= term {
		// A concurrent Acquire won this term.
		return tenure.Lease{}, &tenure.HeldError{Record: tenure.Record{Key: key, Holder: n.cfg.ID, Term: term}}
	}
	n.grant = grant{term: term, held: true}
	return tenure.Lease{Key: key, Identity: identity, Term: term, TTL: ttl, Value: c.Value}, nil
}

// Renew confirms that l is still this node's grant and that this node is
// still the leader of l.Term with a quorum (a VerifyLeader round within
// ctx). It returns an error matching [tenure.ErrLost] if l was released, is
// not this node's, or leadership of its term has ended (raft never gives a
// term back, so that is final); a ctx error or other failure is transient.
// Renew blocks for at most one quorum round trip, bounded by ctx.
func (n *Node) Renew(ctx context.Context, l tenure.Lease) error {
	if _, kind, _ := peer.SplitKey(l.Key); kind != peer.KindMain && l.Key != "" {
		return n.derivedLease(l)
	}
	if err := n.current(l); err != nil {
		return err
	}
	if err := n.verify(ctx, l.Term); err != nil {
		if errors.Is(err, tenure.ErrLost) {
			n.drop(l)
		}
		return err
	}
	return n.current(l) // released concurrently?
}

// Release ends l at once on this node and hands raft leadership to another
// member (LeadershipTransfer), so a new leader, with a new term, can take
// the key without waiting for an election timeout. It returns an error
// matching [tenure.ErrLost] and changes nothing if l is not this node's
// current grant. If the handover fails or ctx ends first, the grant is
// still ended and the error says why; until a new term begins this node
// grants nothing (see [ErrSteppingDown]). Release blocks until the handover
// completed or ctx is done.
func (n *Node) Release(ctx context.Context, l tenure.Lease) error {
	if _, kind, _ := peer.SplitKey(l.Key); kind != peer.KindMain && l.Key != "" {
		return n.derivedLease(l) // a candidate slot or a step-down's grant: nothing to give back
	}
	if err := n.current(l); err != nil {
		return err
	}
	n.mu.Lock()
	g := n.grant
	if !g.held || g.term != l.Term {
		n.mu.Unlock()
		return lostf(l, "released concurrently")
	}
	n.grant = grant{term: l.Term}
	n.mu.Unlock()
	return n.transfer(ctx)
}

// Get returns the leader as this node sees it: Holder is the raft leader's
// ID ("" while this node knows none) and Term the current raft term. The
// raft leader holds the node's key, whether or not its elector has
// acquired it yet; TTL and Remaining are 0 because a follower cannot know
// them. Value is the value the leader published in the current term (see
// [Node.AcquireClaim]) once this node applied it, else "": it appears a
// moment after the holder, never before. Get does not block on the
// network.
func (n *Node) Get(ctx context.Context, key string) (tenure.Record, error) {
	if err := n.checkKey(key); err != nil {
		return tenure.Record{}, err
	}
	if n.closed.Load() {
		return tenure.Record{}, tenure.ErrClosed
	}
	if err := ctx.Err(); err != nil {
		return tenure.Record{}, err
	}
	if base, kind, slot := peer.SplitKey(key); kind != peer.KindMain {
		if kind == peer.KindSlot {
			if r, ok := n.askSlot(ctx, key, slot); ok {
				return r, nil
			}
		}
		return n.derivedRecord(key, base, kind, slot), nil
	}
	return n.record(key), nil
}

func (n *Node) record(key string) tenure.Record {
	id, term := leaderNow(n.raft)
	if id == n.cfg.ID && n.cfg.priority() == tenure.NeverLead {
		id = "" // it hands leadership away and never grants
	}
	r := tenure.Record{Key: key, Holder: id, Term: term}
	if r.Holder != "" {
		r.Value = n.fsm.published(r.Term)
	}
	return r
}

// Close shuts the raft member down and closes its transport and stores.
// Grants it held end with it: a majority elects a new leader after the
// election timeout. Calls after Close return [tenure.ErrClosed]; watches
// end. Close blocks until raft has stopped and is safe to call twice.
func (n *Node) Close() error {
	if !n.closed.CompareAndSwap(false, true) {
		return nil
	}
	close(n.done)
	n.futMu.Lock()
	n.closing = true
	n.futMu.Unlock()
	n.inflight.Wait()
	err := n.raft.Shutdown().Error()
	if cerr := n.closeResources(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raft: close: %w", err)
	}
	return nil
}

func (n *Node) closeResources() error {
	var errs []error
	if n.layer != nil {
		errs = append(errs, n.layer.Close())
	}
	for _, c := range n.closer {
		errs = append(errs, c.Close())
	}
	return errors.Join(errs...)
}

// current checks that l is this node's live grant and that raft still has
// this node leading l.Term.
func (n *Node) current(l tenure.Lease) error {
	if err := tenure.CheckAcquire(l.Key, l.Identity, l.TTL); err != nil {
		return err
	}
	if n.closed.Load() {
		return tenure.ErrClosed
	}
	if l.Identity != n.cfg.ID {
		return lostf(l, "it belongs to %q, not this node %q", l.Identity, n.cfg.ID)
	}
	n.mu.Lock()
	g, key := n.grant, n.key
	n.mu.Unlock()
	if l.Key != key || !g.held || g.term != l.Term {
		return lostf(l, "it is not this node's current grant")
	}
	if n.raft.State() != hraft.Leader || n.raft.CurrentTerm() != l.Term {
		n.drop(l)
		_, leader := n.raft.LeaderWithID()
		return lostf(l, "this node no longer leads term %d (now term %d, leader %q)", l.Term, n.raft.CurrentTerm(), leader)
	}
	return nil
}

// checkKey validates key and that it is the node's key or one of its
// leadership-control keys: Config.Key, or else the first key used, to
// which the node binds.
func (n *Node) checkKey(key string) error {
	if err := tenure.CheckKey(key); err != nil {
		return err
	}
	key, _, _ = peer.SplitKey(key)
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.key == "" {
		n.key = key
	}
	if key != n.key {
		return invalidf("this raft node elects for key %q, not %q (one cluster per key)", n.key, key)
	}
	return nil
}

// drop forgets l after its term's leadership ended.
func (n *Node) drop(l tenure.Lease) {
	n.mu.Lock()
	if n.grant.term == l.Term {
		n.grant = grant{term: l.Term}
	}
	n.mu.Unlock()
}

// verify runs a VerifyLeader round bounded by ctx and then checks that this
// node still leads term. Losing leadership gives an error matching
// tenure.ErrLost; ctx ending gives ctx's error (transient).
func (n *Node) verify(ctx context.Context, term uint64) error {
	if err := n.wait(ctx, n.raft.VerifyLeader); err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("raft: no quorum confirmed leadership of term %d in time: %w", term, err)
		}
		if errors.Is(err, hraft.ErrRaftShutdown) || errors.Is(err, tenure.ErrClosed) {
			return tenure.ErrClosed
		}
		return fmt.Errorf("%w: raft: leadership of term %d ended: %v", tenure.ErrLost, term, err)
	}
	if n.raft.State() != hraft.Leader || n.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: raft: leadership of term %d ended (now term %d)", tenure.ErrLost, term, n.raft.CurrentTerm())
	}
	return nil
}

// publish commits value to the raft log in term, bounded by ctx; losing
// leadership first gives an error matching tenure.ErrLost.
func (n *Node) publish(ctx context.Context, term uint64, value string) error {
	err := n.wait(ctx, func() hraft.Future { return n.raft.Apply([]byte(value), 0) })
	switch {
	case err == nil:
	case ctx.Err() != nil:
		return fmt.Errorf("raft: publishing the value in term %d: %w", term, err)
	case errors.Is(err, tenure.ErrClosed) || errors.Is(err, hraft.ErrRaftShutdown):
		return tenure.ErrClosed
	default:
		return fmt.Errorf("%w: raft: publishing the value in term %d: %v", tenure.ErrLost, term, err)
	}
	if n.raft.State() != hraft.Leader || n.raft.CurrentTerm() != term {
		return fmt.Errorf("%w: raft: leadership of term %d ended (now term %d)", tenure.ErrLost, term, n.raft.CurrentTerm())
	}
	return nil
}

// transfer hands leadership to another member, bounded by ctx: to the
// member a live step-down request of the current term names, if any
// (LeadershipTransferToServer), else to whichever raft picks. If the
// hand-over to the named member fails (it is down, or cannot catch up
// within an election timeout), the request's window no longer waits for
// it: this and every later hand-over of the term go to the other members
// in turn, so that the key is not left unled for the rest of the window.
// If raft's own pick fails, the other members are tried in turn too.
func (n *Node) transfer(ctx context.Context) error {
	term := n.raft.CurrentTerm()
	m, gone, named := n.transferTarget(term)
	var err error
	switch {
	case !named:
		// Raft picks the most up-to-date member, which may be one that
		// is down: it would pick it again at every retry.
		if err = n.transferTo(ctx, n.raft.LeadershipTransfer); err == nil || errors.Is(err, tenure.ErrClosed) || ctx.Err() != nil {
			return err
		}
	case !gone:
		err = n.transferTo(ctx, func() hraft.Future {
			return n.raft.LeadershipTransferToServer(hraft.ServerID(m.ID), hraft.ServerAddress(m.Addr))
		})
		if err == nil || errors.Is(err, tenure.ErrClosed) || ctx.Err() != nil {
			return err
		}
		n.cfg.Logger.Warn("step-down: the member named cannot take over; handing over to another", "id", n.cfg.ID, "term", term, "to", m.ID, "err", err)
		n.targetGone(term)
	}
	for _, o := range n.cfg.Members {
		if o.ID == n.cfg.ID || o.ID == m.ID {
			continue
		}
		if err = n.transferTo(ctx, func() hraft.Future {
			return n.raft.LeadershipTransferToServer(hraft.ServerID(o.ID), hraft.ServerAddress(o.Addr))
		}); err == nil || errors.Is(err, tenure.ErrClosed) || ctx.Err() != nil {
			return err
		}
	}
	return err
}

// transferTo waits for the leadership transfer submit starts, bounded by
// ctx. Another member leading already counts as done.
func (n *Node) transferTo(ctx context.Context, submit func() hraft.Future) error {
	if err := n.wait(ctx, submit); err != nil {
		if errors.Is(err, hraft.ErrNotLeader) {
			return nil // someone else leads already
		}
		if errors.Is(err, tenure.ErrClosed) {
			return err
		}
		return fmt.Errorf("raft: hand leadership over: %w", err)
	}
	return nil
}

// notLeader is Acquire's answer on a node that does not lead.
func (n *Node) notLeader(key string) error {
	r := n.record(key)
	if r.Holder == "" || r.Holder == n.cfg.ID {
		return fmt.Errorf("%w (node %q, term %d)", ErrNoLeader, n.cfg.ID, r.Term)
	}
	return &tenure.HeldError{Record: r}
}

// wait submits a request to raft with submit and waits for its answer, ctx
// or Close. A request abandoned on ctx is still answered by raft within its
// own timeouts (a verification ends at the latest when the leader steps
// down), and Close waits for that.
func (n *Node) wait(ctx context.Context, submit func() hraft.Future) error {
	n.futMu.Lock()
	if n.closing {
		n.futMu.Unlock()
		return tenure.ErrClosed
	}
	n.inflight.Add(1)
	f := submit()
	n.futMu.Unlock()
	done := make(chan error, 1)
	go func() {
		defer n.inflight.Done()
		done <- f.Error()
	}()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return context.Cause(ctx)
	}
}

// derivedLease is Renew and Release of a derived key's lease (a candidate
// slot): fine while the node is open and the lease is this node's.
func (n *Node) derivedLease(l tenure.Lease) error {
	if err := n.checkKey(l.Key); err != nil {
		return err
	}
	if n.closed.Load() {
		return tenure.ErrClosed
	}
	if l.Identity != n.cfg.ID {
		return lostf(l, "it belongs to %q, not this node %q", l.Identity, n.cfg.ID)
	}
	return nil
}

func lostf(l tenure.Lease, format string, args ...any) error {
	return fmt.Errorf("%w: raft: lease on %q in term %d: "+format,
		append([]any{tenure.ErrLost, l.Key, l.Term}, args...)...)
}

// Defaults implements [tenure.Defaulter]: the node campaigns as its member
// ID, with a TTL equal to the heartbeat timeout, the longest Acquire accepts.
func (n *Node) Defaults() (identity string, ttl time.Duration) {
	return n.cfg.ID, n.cfg.HeartbeatTimeout
}

var _ tenure.Defaulter = (*Node)(nil)
