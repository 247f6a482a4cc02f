package tcp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/tenurehq/tenure/peer/internal/peertest"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

const internalSecret = peertest.Secret

func testGroupKey(t testing.TB, key string) groupKey {
	t.Helper()
	s, err := NewSecret([]byte(internalSecret))
	if err != nil {
		t.Fatal(err)
	}
	g, _ := transport.ParseMembers("1=,2=,3=")
	gk, err := deriveGroupKey(s, key, "bully", g)
	if err != nil {
		t.Fatal(err)
	}
	return gk
}

// testSessions returns the two ends of a connection from dialer 2 to
// acceptor 1, as the handshake would derive them.
func testSessions(gk groupKey, seed byte) (dialer, acceptor *session) {
	nd, na := bytes.Repeat([]byte{seed}, wire.NonceLen), bytes.Repeat([]byte{seed + 1}, wire.NonceLen)
	return newSession(gk, 2, 1, nd, na, true), newSession(gk, 2, 1, nd, na, false)
}

// TestGroupKeys: the group key depends on the key name, the algorithm and
// the member IDs (not addresses); the tag is public and differs with them.
func TestGroupKeys(t *testing.T) {
	s, _ := NewSecret([]byte(internalSecret))
	mk := func(key, alg string, ms ...transport.Member) groupKey {
		g, err := transport.NewGroup(ms)
		if err != nil {
			t.Fatal(err)
		}
		gk, err := deriveGroupKey(s, key, alg, g)
		if err != nil {
			t.Fatal(err)
		}
		return gk
	}
	base := mk("k", "bully", transport.Member{ID: 1, Addr: "a:1"}, transport.Member{ID: 2, Addr: "a:2"})
	same := mk("k", "bully", transport.Member{ID: 2, Addr: "b:2"}, transport.Member{ID: 1, Addr: "b:1"})
	if !bytes.Equal(base.key, same.key) || base.tag != same.tag {
		t.Fatal("the same group written with other addresses derived another key")
	}
	for name, other := range map[string]groupKey{
		"key":       mk("k2", "bully", transport.Member{ID: 1}, transport.Member{ID: 2}),
		"algorithm": mk("k", "ring", transport.Member{ID: 1}, transport.Member{ID: 2}),
		"members":   mk("k", "bully", transport.Member{ID: 1}, transport.Member{ID: 3}),
	} {
		if bytes.Equal(base.key, other.key) || base.tag == other.tag {
			t.Errorf("another %s derived the same key or tag", name)
		}
	}
	if fmt.Sprint(base.key) == "" || bytes.Contains(base.key, []byte(internalSecret[:8])) {
		t.Fatal("the group key shows the secret")
	}
}
