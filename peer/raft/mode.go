package raft

import (
	"context"
	"log/slog"
	"path/filepath"
	"strconv"
	"strings"
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

// modeParams are the URL parameters the raft mode adds to peer's.
var modeParams = []string{"election-timeout", "leader-lease-timeout"}

func init() { peer.RegisterMode(Mode, openMode) }

// openMode is the [peer.OpenMode] of raft: a member, or an observer when
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
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return New(cfg)
}

// slogWriter hands each line raft logs to a slog logger, at error level
// for raft's errors and warning level otherwise.
type slogWriter struct{ l *slog.Logger }

func (w slogWriter) Write(p []byte) (int, error) {
	line := strings.TrimSpace(string(p))
	if rest, ok := strings.CutPrefix(line, "[ERROR]"); ok {
		w.l.Error(strings.TrimSpace(rest))
	} else {
		w.l.Warn(strings.TrimSpace(strings.TrimPrefix(line, "[WARN]")))
	}
	return len(p), nil
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
	}
	for _, m := range pc.Group.Members() {
		cfg.Members = append(cfg.Members, Member{ID: strconv.FormatUint(m.ID, 10), Addr: m.Addr})
	}
	for k, v := range pc.Params {
		var dst *time.Duration
		switch k {
		case "election-timeout":
			dst = &cfg.ElectionTimeout
		case "leader-lease-timeout":
			dst = &cfg.LeaderLeaseTimeout
		default:
			return Config{}, invalidf("unknown URL parameter %q (raft adds %v to peer's)", k, modeParams)
		}
		d, err := time.ParseDuration(v[len(v)-1])
		if len(v) != 1 || err != nil || d <= 0 {
			return Config{}, invalidf("parameter %s=%q is not one positive duration", k, v)
		}
		*dst = d
	}
	if pc.Logger != nil {
		cfg.Logger = hclog.New(&hclog.LoggerOptions{
			Name: "raft", Level: hclog.Warn, DisableTime: true, Output: slogWriter{pc.Logger},
		})
	}
	return cfg, nil
}
