package main

// Quorum election among peers with raft: --store 'peer://?id=N&peers=1=host:port,...&algorithm=raft&secret-file=PATH&state-dir=DIR'
// (see package peer/raft). The candidate identity must be the member ID and
// --ttl at most the peer timeout (default 500ms).
import _ "github.com/tenurehq/tenure/peer/raft"
