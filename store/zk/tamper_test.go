package zk_test

import (
	"errors"
	"strconv"
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
	ss := openSess(t, st, 5*time.Second)
	forged := `{"holder":"x","ttl_ns":9223372036854775807,"session":9223372036854775807,"term":9223372036854775807}`
	storetest.SessionOutgrowsForgedTerm(t, st, ss, func(key string) error {
		_, err := raw.Set(zk.KeyPath(root, key), []byte(forged), -1)
		return err
	})
}

// TestForeignChildOfKeyNode: a node created with zkCli under a key node
// beside (or instead of) its lease node must not count as a grant. Before,
// a key whose grant was released read as still held by its last holder
// for as long as the foreign child stayed, and no Acquire could take it;
// and a holder whose lease node was deleted from outside renewed on.
func TestForeignChildOfKeyNode(t *testing.T) {
	srv := server(t)
	// A root of its own per run: the foreign nodes it creates outlive it
	// on the package's shared server (go test -count=2).
	root := "/foreignchild-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	st, b := open(t, "zk://"+srv.Addr+root), open(t, "zk://"+srv.Addr+root)
	raw := rawConn(t, srv)
	ctx := ctxT(t, 30*time.Second)
	// grantBesideChild grants key to alpha, then creates a node beside
	// its lease node.
	grantBesideChild := func(t *testing.T, key string) tenure.Lease {
		t.Helper()
		l, err := st.Acquire(ctx, key, "alpha", 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := raw.Create(zk.KeyPath(root, key)+"/other", []byte("x"), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
			t.Fatal(err)
		}
		return l
	}
	t.Run("Released", func(t *testing.T) {
		l := grantBesideChild(t, "released")
		if err := st.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
		if r, err := b.Get(ctx, l.Key); err != nil || r.Held() {
			t.Fatalf("Get after the grant was released = %+v, %v; want free", r, err)
		}
		w, err := b.Watch(ctx, l.Key)
		if err != nil {
			t.Fatal(err)
		}
		if r := <-w; r.Held() {
			t.Fatalf("Watch after the grant was released delivered %+v; want free", r)
		}
		l2, err := b.Acquire(ctx, l.Key, "beta", 5*time.Second)
		if err != nil || l2.Term <= l.Term {
			t.Fatalf("Acquire after the grant was released = %+v, %v; want a term above %d", l2, err, l.Term)
		}
		if r, err := st.Get(ctx, l.Key); err != nil || r.Holder != "beta" || r.Term != l2.Term {
			t.Fatalf("Get after beta's grant = %+v, %v; want beta at term %d", r, err, l2.Term)
		}
	})
	t.Run("LeaseDeleted", func(t *testing.T) {
		l := grantBesideChild(t, "deleted")
		if err := st.Renew(ctx, l); err != nil {
			t.Fatalf("Renew with a foreign child beside the lease node: %v", err)
		}
		if err := raw.Delete(zk.KeyPath(root, l.Key)+"/lease", -1); err != nil {
			t.Fatal(err)
		}
		storetest.Tampered(t, "Renew after the lease node was deleted", st.Renew(ctx, l), l.Key, tenure.ErrLost)
		if r, err := b.Get(ctx, l.Key); err != nil || r.Held() {
			t.Fatalf("Get after the lease node was deleted = %+v, %v; want free", r, err)
		}
	})
}
