package zk_test

import (
	"errors"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/zk"
	"github.com/tenurehq/tenure/storetest"
)

// tamperedStore opens a store under root on the shared server, and a
// tamperOn for the same root.
func tamperedStore(t *testing.T, root string) (*storetest.Tamper, *zk.Store) {
	t.Helper()
	srv := server(t)
	tm := tamperOn(t, srv, root)
	return tm, open(t, "zk://"+srv.Addr+root)
}

// tamperOn changes the store's nodes under root with a plain ZooKeeper
// client, as an operator in zkCli would.
func tamperOn(t *testing.T, srv *testserver.ZKServer, root string) *storetest.Tamper {
	c := rawConn(t, srv)
	must := func(tb testing.TB, err error) {
		tb.Helper()
		if err != nil && !errors.Is(err, gozk.ErrNoNode) {
			tb.Fatalf("tamper: %v", err)
		}
	}
	return &storetest.Tamper{
		DeleteGrant: func(tb testing.TB, key string) {
			must(tb, c.Delete(zk.KeyPath(root, key)+"/lease", -1))
		},
		OverwriteGrant: func(tb testing.TB, key, id string) {
			_, err := c.Set(zk.KeyPath(root, key), []byte(`{"holder":"`+id+`","ttl_ns":1000000000}`), -1)
			must(tb, err)
		},
		DeleteAll: func(tb testing.TB, key string) {
			kp := zk.KeyPath(root, key)
			must(tb, c.Delete(kp+"/lease", -1))
			must(tb, c.Delete(kp, -1))
		},
	}
}

// TestSessionForgedRecordCannotExhaustTerms: a key node whose data was
// rewritten with a plain client to name the largest numbers there are
// cannot put the key's term at the top of its range: the term is the
// Mzxid of the grant's own write, assigned by the server, so a session's
// Acquire and AcquireBatch still grant a term above every term shown.
func TestSessionForgedRecordCannotExhaustTerms(t *testing.T) {
	srv := server(t)
	const root = "/forgedterm"
	st := open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ss := openSess(t, st, 5*time.Second)
	forged := `{"holder":"x","ttl_ns":9223372036854775807,"session":9223372036854775807,"term":9223372036854775807}`
	storetest.SessionOutgrowsForgedTerm(t, st, ss, func(key string) error {
		_, err := raw.Set(zk.KeyPath(root, key), []byte(forged), -1)
		return err
	})
}
