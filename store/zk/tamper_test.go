package zk_test

import (
	"errors"
	"fmt"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
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
	ctx := ctxT(t, 30*time.Second)
	ss := openSess(t, st, 5*time.Second)
	for _, batch := range []bool{false, true} {
		key := fmt.Sprint("k-", batch)
		l, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := st.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		forged := `{"holder":"x","ttl_ns":9223372036854775807,"session":9223372036854775807,"term":9223372036854775807}`
		if _, err := raw.Set(zk.KeyPath(root, key), []byte(forged), -1); err != nil {
			t.Fatal(err)
		}
		r, err := st.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		var l2 tenure.Lease
		if batch {
			res := ss.(tenure.BatchAcquirer).AcquireBatch(ctx, []tenure.AcquireRequest{{Key: key, Identity: "beta"}})
			l2, err = res[0].Lease, res[0].Err
		} else {
			l2, err = ss.Acquire(ctx, key, "beta", "")
		}
		if err != nil {
			t.Fatalf("batch %v: session Acquire after a forged record: %v", batch, err)
		}
		if l2.Term <= r.Term || l2.Term <= l.Term {
			t.Fatalf("batch %v: Get showed the key at term %d, then the session granted term %d", batch, r.Term, l2.Term)
		}
	}
}
