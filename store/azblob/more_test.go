package azblob_test

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/blob"
	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/azblob"
	"github.com/tenurehq/tenure/storetest"
)

// releasedWithTerm has a store on container and prefix acquire and
// release key "k", then sets the key's blob metadata tenureterm to term
// with the Azure SDK, as anyone with the account key can. It returns the
// store, the released lease, the blob (PREFIX/KEY) and a context for the
// test.
func releasedWithTerm(t *testing.T, srv *testserver.AzuriteServer, container, prefix, term string) (tenure.Store, tenure.Lease, *blob.Client, context.Context) {
	t.Helper()
	st := storetest.OpenClosing(t, tenure.Open, storeURL(srv, container, prefix))
	ctx := storetest.Context(t, 30*time.Second)
	l, err := st.Acquire(ctx, "k", "alpha", ttl)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	cred, err := sdk.NewSharedKeyCredential(testserver.AzuriteAccount, testserver.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	client, err := sdk.NewClientWithSharedKeyCredential(srv.Endpoint, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := client.ServiceClient().NewContainerClient(container).NewBlobClient(prefix + "/k")
	if _, err := b.SetMetadata(ctx, map[string]*string{"tenureterm": &term}, nil); err != nil {
		t.Fatalf("set the metadata (is the blob name still PREFIX/KEY?): %v", err)
	}
	return st, l, b, ctx
}

// testTermsNeverReset damages a key's term in the blob metadata: the store
// must refuse to grant the key rather than start terms again from 1.
func testTermsNeverReset(t *testing.T, srv *testserver.AzuriteServer) {
	prefix := randomName(t)
	st, l, b, ctx := releasedWithTerm(t, srv, "reset", prefix, "not-a-number")
	if _, err := st.Acquire(ctx, "k", "beta", ttl); err == nil || errors.Is(err, tenure.ErrHeld) {
		t.Fatalf("Acquire with a damaged term: got %v, want an error", err)
	} else if !strings.Contains(err.Error(), "not-a-number") {
		t.Errorf("error %q does not show the bad term", err)
	}
	if _, err := st.Get(ctx, "k"); err == nil {
		t.Fatal("Get with a damaged term succeeded")
	}
	// A key whose blob was deleted: a store that saw term 1 never hands it
	// out again, and waits out the TTL it saw; a store that saw nothing
	// starts again at 1. Documented, and checked so the documentation stays
	// true.
	if _, err := b.Delete(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if l2, err := st.Acquire(ctx, "k", "beta", ttl); err != nil || l2.Term != l.Term+1 || l2.Wait < l.TTL {
		t.Fatalf("Acquire after the blob was deleted = %+v, %v; want term %d and a Wait of at least %s", l2, err, l.Term+1, l.TTL)
	} else if err := st.Release(ctx, l2); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Delete(ctx, nil); err != nil {
		t.Fatal(err)
	}
	fresh := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "reset", prefix))
	if l3, err := fresh.Acquire(ctx, "k", "gamma", ttl); err != nil || l3.Term != 1 {
		t.Fatalf("Acquire by a store that never saw the key, after the blob was deleted = %+v, %v; want term 1", l3, err)
	}
}

// testRecoversAfterRestart stops the server under an open store: calls fail
// promptly with a clear error, then succeed again once the server is back,
// without reopening the store, and the lease held across the outage is
// still the holder's.
func testRecoversAfterRestart(t *testing.T, srv *testserver.AzuriteServer) {
	st := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "restart", randomName(t)))
	l, err := st.Acquire(storetest.Context(t, 30*time.Second), "k", "alpha", azblob.MaxTTL)
	if err != nil {
		t.Fatal(err)
	}
	srv.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	began := time.Now()
	_, err = st.Get(ctx, "k")
	cancel()
	took := time.Since(began)
	if err == nil || errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Get with the server down: got %v, want a connection error", err)
	}
	if !strings.Contains(err.Error(), "connection refused") || !strings.Contains(err.Error(), "127.0.0.1") {
		t.Errorf("error %q does not say what failed where", err)
	}
	if took > 3*time.Second {
		t.Errorf("Get with the server down took %s despite a 2s context", took)
	}
	if err := st.Renew(storetest.Context(t, 2*time.Second), l); err == nil || errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew with the server down: got %v, want a connection error (not ErrLost: the lease may be fine)", err)
	}
	srv.Start(t)
	// Azurite forgets live leases when it restarts (Azure itself keeps
	// them), so the holder's renewal may find its lease gone: that must be
	// ErrLost, not an error about the connection.
	ctx = storetest.Context(t, 10*time.Second)
	renewErr := st.Renew(ctx, l)
	if renewErr != nil && !errors.Is(renewErr, tenure.ErrLost) {
		t.Fatalf("Renew once the server is back: %v", renewErr)
	}
	r, err := st.Get(ctx, "k")
	if err != nil || r.Term != l.Term {
		t.Fatalf("Get once the server is back = %+v, %v; want term %d", r, err, l.Term)
	}
	if renewErr == nil {
		if r.Holder != "alpha" {
			t.Fatalf("renewed, but Get = %+v", r)
		}
		if err := st.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	} else {
		t.Logf("the lease did not survive the restart: %v", renewErr)
	}
	l2, err := st.Acquire(ctx, "k", "beta", ttl)
	if err != nil || l2.Term <= l.Term {
		t.Fatalf("Acquire once the server is back = %+v, %v; want a term above %d", l2, err, l.Term)
	}
}

// TestServerDown needs no server: nothing listens on the endpoint. Every
// call returns a connection error within its context, and a watch closes.
func TestServerDown(t *testing.T) {
	port := testserver.FreePort(t)
	raw := fmt.Sprintf("azblob://%s:%s@down/p?endpoint=%s", testserver.AzuriteAccount, url.QueryEscape(testserver.AzuriteKey),
		url.QueryEscape(fmt.Sprintf("http://127.0.0.1:%d/%s", port, testserver.AzuriteAccount)))
	st := storetest.OpenClosing(t, tenure.Open, raw)
	for name, call := range map[string]func(context.Context) error{
		"Get":     func(ctx context.Context) error { _, err := st.Get(ctx, "k"); return err },
		"Acquire": func(ctx context.Context) error { _, err := st.Acquire(ctx, "k", "a", ttl); return err },
		"Renew": func(ctx context.Context) error {
			return st.Renew(ctx, tenure.Lease{Key: "k", Identity: "a", Term: 1, TTL: ttl, Token: "5f0f9a52-7d0c-4a43-b4a3-4f6f0c6c1a11"})
		},
	} {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		began := time.Now()
		err := call(ctx)
		cancel()
		if err == nil || errors.Is(err, tenure.ErrLost) || errors.Is(err, tenure.ErrHeld) {
			t.Fatalf("%s: got %v, want a connection error", name, err)
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("127.0.0.1:%d", port)) {
			t.Errorf("%s: error %q does not name the endpoint", name, err)
		}
		if strings.Contains(err.Error(), testserver.AzuriteKey) || strings.Contains(err.Error(), url.QueryEscape(testserver.AzuriteKey)) {
			t.Errorf("%s: error %q contains the key", name, err)
		}
		if d := time.Since(began); d > 4*time.Second {
			t.Errorf("%s took %s with a 3s context", name, d)
		}
	}
	ch, err := st.Watch(context.Background(), "k")
	if err != nil {
		t.Fatal(err)
	}
	select {
	case r, ok := <-ch:
		if ok {
			t.Fatalf("watch delivered %+v with the server down", r)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("watch did not close with the server down")
	}
}

// testTermAtMaximum sets a released key's term in the blob metadata to the
// largest uint64, as the Azure SDK lets anyone with the account key: the
// next grant's term would wrap to 0, below every term handed out, so the
// store must refuse to grant instead.
func testTermAtMaximum(t *testing.T, srv *testserver.AzuriteServer) {
	const maxTerm = "18446744073709551615"
	st, _, _, ctx := releasedWithTerm(t, srv, "maxterm", randomName(t), maxTerm)
	if l2, err := st.Acquire(ctx, "k", "beta", ttl); err == nil {
		t.Fatalf("Acquire after term %s granted term %d", maxTerm, l2.Term)
	} else if !errors.Is(err, tenure.ErrTermsExhausted) || !strings.Contains(err.Error(), maxTerm) {
		t.Fatalf("Acquire after term %s: %v, want ErrTermsExhausted naming the term", maxTerm, err)
	}
}
