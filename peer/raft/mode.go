package raft

import (
	"context"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
)

// Mode is the name under which this package registers itself with package
// peer, so that
//
//	peer://?id=1&peers=1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001&algorithm=raft&secret-file=/etc/tenure/peer.secret&state-dir=/var/lib/tenure
//
// opens a raft [Node]. Member IDs are the decimal peer IDs; the raft data
// lives in state-dir/raft-<id>; the peer timeout (default 5 heartbeats,
// 500 ms) is raft's heartbeat and election timeout, so an elector's TTL must
// not exceed it (pass `--ttl 500ms` or less to `tenure run`). Optional
// parameters: election-timeout, leader-lease-timeout (Go durations).
//
// The same URL without id (and without state-dir) opens a read-only
// observer that asks the members whom they see leading (see status.go):
//
//	peer://?peers=1=10.0.0.1:7001,2=10.0.0.2:7001,3=10.0.0.3:7001&algorithm=raft&secret-file=/etc/tenure/peer.secret
const Mode = "raft"

// Options are the raft mode's own settings: the [peer.Config.Options] of
// a raft group. Zero durations take the defaults: ElectionTimeout and the
// heartbeat timeout are the peer Timeout, LeaderLeaseTimeout is
// min([DefaultLeaderLeaseTimeout], Timeout). In a peer:// URL they are the
// parameters election-timeout and leader-lease-timeout (Go durations).
type Options struct {
	ElectionTimeout    time.Duration
	LeaderLeaseTimeout time.Duration
}

func init() { peer.Register(Mode, openMode, peer.WithParams(parseParams)) }

// parseParams is the raft mode's [peer.ParamParser]: the one place where
// URL parameters become [Options].
func parseParams(q url.Values) (any, error) {
	var o Options
	for k, v := range q {
		var dst *time.Duration
		switch k {
		case "election-timeout":
			dst = &o.ElectionTimeout
		case "leader-lease-timeout":
			dst = &o.LeaderLeaseTimeout
		default:
			return nil, invalidf("unknown URL parameter %q (raft adds election-timeout and leader-lease-timeout to peer's)", k)
		}
		d, err := time.ParseDuration(v[len(v)-1])
		if len(v) != 1 || err != nil || d <= 0 {
			return nil, invalidf("parameter %s=%q is not one positive duration", k, v)
		}
		*dst = d
	}
	return o, nil
}

// options returns pc's raft options: the zero Options if none were set.
func options(pc peer.Config) (Options, error) {
	switch o := pc.Options.(type) {
	case nil:
		return Options{}, nil
	case Options:
		return o, nil
	default:
		return Options{}, invalidf("Config.Options is a %T, not raft.Options", o)
	}
}

// openMode is the [peer.Opener] of raft: a member, or an observer when
// pc has no ID. It does not wait for an election; ctx bounds only the
// opening.
func openMode(ctx context.Context, pc peer.Config) (tenure.Store, error) {
	if pc.IsObserver() {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		return openObserver(pc)
	}
	cfg, err := fromPeer(pc)
	if err != nil {
		return nil, err
	}
	// state-dir itself, not only its raft-<id>: whoever may write it can
	// move raft-<id> aside and the member's term starts again from 0.
	if err := peer.PrepareStateDir(pc.StateDir); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return New(cfg)
}

// fromPeer translates a peer configuration into a raft one.
func fromPeer(pc peer.Config) (Config, error) {
	if pc.Transport != nil {
		return Config{}, invalidf("the raft mode runs its own transport; Config.Transport must be nil")
	}
	id := strconv.FormatUint(pc.ID, 10)
	cfg := Config{
		ID:               id,
		Dir:              filepath.Join(pc.StateDir, "raft-"+id),
		Secret:           pc.Secret.Bytes(),
		Key:              pc.Key,
		HeartbeatTimeout: pc.Timeout,
		ElectionTimeout:  pc.Timeout,
		Priority:         pc.Priority,
	}
	for _, m := range pc.Group.Members() {
		cfg.Members = append(cfg.Members, Member{ID: strconv.FormatUint(m.ID, 10), Addr: m.Addr})
	}
	opts, err := options(pc)
	if err != nil {
		return Config{}, err
	}
	if opts.ElectionTimeout != 0 {
		cfg.ElectionTimeout = opts.ElectionTimeout
	}
	cfg.LeaderLeaseTimeout = opts.LeaderLeaseTimeout
	if pc.Logger != nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{
			Name: "raft", Level: hclog.Warn, DisableTime: true, Output: newSlogWriter(pc.Logger, time.Now),
		})
	}
	return cfg, nil
}
