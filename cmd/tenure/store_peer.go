package main

// Store-less election among peers: --store 'peer://?id=N&peers=1=host:port,...&algorithm=bully|ring|lowest|raft&secret-file=PATH&state-dir=DIR'
// (see package peer). The candidate identity (--id) must be the member ID.
import (
	_ "github.com/tenurehq/tenure/peer"
	_ "github.com/tenurehq/tenure/peer/bully"
	_ "github.com/tenurehq/tenure/peer/lowest"
	_ "github.com/tenurehq/tenure/peer/raft"
	_ "github.com/tenurehq/tenure/peer/ring"
)
