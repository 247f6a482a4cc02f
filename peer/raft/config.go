package raft

import (
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/go-hclog"
	hraft "github.com/hashicorp/raft"
	"github.com/tenurehq/tenure"
)

// Default timings. They are hashicorp/raft's defaults: a follower that hears
// nothing from the leader for HeartbeatTimeout (randomised up to twice that)
// starts an election, and a leader that hears from no quorum for
// LeaderLeaseTimeout steps down.
const (
	DefaultHeartbeatTimeout   = time.Second
	DefaultElectionTimeout    = time.Second
	DefaultLeaderLeaseTimeout = 500 * time.Millisecond
)

// MinMembers is the smallest cluster [New] accepts: with fewer than three
// voters a single failure stops every election.
const MinMembers = 3

// MinSecretLen is the shortest shared secret [New] accepts, in bytes.
const MinSecretLen = 16

// Member is one voter of the cluster.
type Member struct {
	// ID names the member. It is the identity the member's elector must use
	// and the Holder that [Node.Get] reports while it leads.
	ID string
	// Addr is the member's host:port for raft traffic. The member listens on
	// it and the others dial it, so it must be reachable by all of them (not
	// 0.0.0.0).
	Addr string
}

// Config configures one [Node]. Every member of a cluster must be given the
// same Members (the static bootstrap configuration) and the same Secret.
type Config struct {
	// ID is this node's member ID; it must appear in Members. Required.
	ID string
	// Members lists every voter, this node included; at least [MinMembers].
	// Required.
	Members []Member
	// Dir holds the raft log, the durable term and vote, and snapshots. It
	// is created (mode 0700) if missing. On Unix it must be the user's and
	// closed to writes by group and others, and the directories above it
	// root's or the user's and closed to writes by others unless sticky
	// (see [github.com/tenurehq/tenure/peer.PrepareStateDir]): whoever can
	// rewrite or move it can take the term back. Required unless LogStore,
	// StableStore and SnapshotStore are all set.
	Dir string
	// Secret authenticates every raft connection (see the package
	// documentation); at least [MinSecretLen] bytes. Required unless
	// Transport is set.
	Secret []byte

	// Key, if set, is the only key the node answers for; if empty, the first
	// key used binds the node. Other keys give an error wrapping
	// [tenure.ErrInvalid]: the holder is the raft leader, so a cluster
	// serves one logical key.
	Key string

	// HeartbeatTimeout, ElectionTimeout and LeaderLeaseTimeout are raft's
	// timings; zero takes the defaults above. Every Acquire's ttl must be at
	// most HeartbeatTimeout (see [Node.Acquire]).
	HeartbeatTimeout   time.Duration
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration

	// Priority is this member's priority, from 0 to [tenure.MaxPriority];
	// nil takes [tenure.DefaultPriority]. Raft elects by its own rules
	// (the most up-to-date log), so a priority above 0 does not rank
	// members; it is reported to observers and candidate lists, and a
	// leader's tenure.Control.YieldAfter hands over to a member of a
	// higher one (LeadershipTransferToServer). A member of priority 0
	// never leads: it stays a voter (it votes and counts in the quorum,
	// which a nonvoter would not, and the static bootstrap configuration
	// must be the same on every member), grants no lease, and if raft
	// makes it leader it hands leadership to another member within a
	// HeartbeatTimeout (LeadershipTransferToServer, naming each other
	// member in turn, one attempt every HeartbeatTimeout while it still
	// leads). Its status answers say it never leads, so an observer
	// reports the key free meanwhile.
	Priority *int

	// Logger receives raft's logs. Default: warnings and errors to stderr.
	Logger hclog.Logger

	// Transport, LogStore, StableStore and SnapshotStore replace the
	// authenticated TCP transport and the on-disk stores, for in-process
	// clusters (tests, simulations) built on [hraft.NewInmemTransport] and
	// [hraft.NewInmemStore]. A node does not close stores it was given; raft
	// closes the transport when the node closes. The node installs no
	// heartbeat handler on it (SetHeartbeatHandler): heartbeats go through
	// Consumer to raft's main loop (see heartbeat.go).
	Transport     hraft.Transport
	LogStore      hraft.LogStore
	StableStore   hraft.StableStore
	SnapshotStore hraft.SnapshotStore
}

// withDefaults fills in zero timings and the logger.
func (c Config) withDefaults() Config {
	if c.HeartbeatTimeout == 0 {
		c.HeartbeatTimeout = DefaultHeartbeatTimeout
	}
	if c.ElectionTimeout == 0 {
		c.ElectionTimeout = max(DefaultElectionTimeout, c.HeartbeatTimeout)
	}
	if c.LeaderLeaseTimeout == 0 {
		c.LeaderLeaseTimeout = min(DefaultLeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	if c.Logger == nil {
		c.Logger = hclog.New(&hclog.LoggerOptions{Name: "tenure-raft", Level: hclog.Warn, Output: os.Stderr})
	}
	return c
}

// validate reports the first problem in c (after withDefaults), wrapping
// tenure.ErrInvalid. It never quotes the secret.
func (c Config) validate() error {
	if err := checkID("Config.ID", c.ID); err != nil {
		return err
	}
	if len(c.Members) < MinMembers {
		return invalidf("Config.Members has %d members; raft needs at least %d to survive a failure", len(c.Members), MinMembers)
	}
	ids, addrs := map[string]bool{}, map[string]bool{}
	for i, m := range c.Members {
		if err := checkID(fmt.Sprintf("Config.Members[%d].ID", i), m.ID); err != nil {
			return err
		}
		if ids[m.ID] {
			return invalidf("Config.Members: ID %q appears twice", m.ID)
		}
		if addrs[m.Addr] {
			return invalidf("Config.Members: address %q appears twice", m.Addr)
		}
		ids[m.ID], addrs[m.Addr] = true, true
		if c.Transport == nil {
			if _, _, err := net.SplitHostPort(m.Addr); err != nil {
				return invalidf("Config.Members[%d].Addr %q is not host:port", i, m.Addr)
			}
		} else if m.Addr == "" {
			return invalidf("Config.Members[%d].Addr is empty", i)
		}
	}
	if !ids[c.ID] {
		return invalidf("Config.ID %q is not one of Config.Members", c.ID)
	}
	if c.Key != "" {
		if err := tenure.CheckKey(c.Key); err != nil {
			return fmt.Errorf("Config.Key: %w", err)
		}
	}
	stores := c.LogStore != nil && c.StableStore != nil && c.SnapshotStore != nil
	someStores := c.LogStore != nil || c.StableStore != nil || c.SnapshotStore != nil
	switch {
	case someStores && !stores:
		return invalidf("Config.LogStore, StableStore and SnapshotStore must be set together")
	case !stores && c.Dir == "":
		return invalidf("Config.Dir is empty")
	case c.Transport == nil && len(c.Secret) < MinSecretLen:
		return invalidf("Config.Secret is %d bytes; at least %d are required", len(c.Secret), MinSecretLen)
	case c.HeartbeatTimeout < 5*time.Millisecond:
		return invalidf("Config.HeartbeatTimeout (%s) must be at least 5ms", c.HeartbeatTimeout)
	case c.ElectionTimeout < c.HeartbeatTimeout:
		return invalidf("Config.ElectionTimeout (%s) must not be shorter than Config.HeartbeatTimeout (%s)", c.ElectionTimeout, c.HeartbeatTimeout)
	case c.Priority != nil && (*c.Priority < tenure.NeverLead || *c.Priority > tenure.MaxPriority):
		return invalidf("Config.Priority (%d) must be from %d (never lead) to %d", *c.Priority, tenure.NeverLead, tenure.MaxPriority)
	case c.LeaderLeaseTimeout <= 0 || c.LeaderLeaseTimeout > c.HeartbeatTimeout:
		return invalidf("Config.LeaderLeaseTimeout (%s) must be positive and at most Config.HeartbeatTimeout (%s)", c.LeaderLeaseTimeout, c.HeartbeatTimeout)
	}
	return nil
}

// priority is c.Priority, or tenure.DefaultPriority if nil.
func (c Config) priority() int {
	if c.Priority == nil {
		return tenure.DefaultPriority
	}
	return *c.Priority
}

// raftConfig is the hashicorp/raft configuration for c.
func (c Config) raftConfig() *hraft.Config {
	rc := hraft.DefaultConfig()
	rc.LocalID = hraft.ServerID(c.ID)
	rc.HeartbeatTimeout = c.HeartbeatTimeout
	rc.ElectionTimeout = c.ElectionTimeout
	rc.LeaderLeaseTimeout = c.LeaderLeaseTimeout
	rc.CommitTimeout = min(rc.CommitTimeout, c.HeartbeatTimeout/10)
	rc.Logger = c.Logger
	rc.NoLegacyTelemetry = true
	return rc
}

// bootstrap is the static cluster configuration from the member list.
func (c Config) bootstrap() hraft.Configuration {
	var conf hraft.Configuration
	for _, m := range c.Members {
		conf.Servers = append(conf.Servers, hraft.Server{
			Suffrage: hraft.Voter, ID: hraft.ServerID(m.ID), Address: hraft.ServerAddress(m.Addr),
		})
	}
	return conf
}

func (c Config) self() Member {
	for _, m := range c.Members {
		if m.ID == c.ID {
			return m
		}
	}
	return Member{}
}

// checkID applies tenure's identity rules to a member ID.
func checkID(field, id string) error {
	if err := tenure.CheckAcquire("member", id, time.Second); err != nil {
		return fmt.Errorf("%s: %w", field, err)
	}
	return nil
}

func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: raft: "+format, append([]any{tenure.ErrInvalid}, args...)...)
}
