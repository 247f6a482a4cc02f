package azblob_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/azblob"
	"github.com/tenurehq/tenure/storetest"
)

const ttl = azblob.MinTTL

// storeURL returns an azblob URL for container and prefix on srv, with the
// development account's key in the URL (as a test may; users should use the
// environment).
func storeURL(srv *testserver.AzuriteServer, container, prefix string, params ...string) string {
	u := url.URL{
		Scheme: "azblob",
		User:   url.UserPassword(testserver.AzuriteAccount, testserver.AzuriteKey),
		Host:   container,
		Path:   "/" + prefix,
	}
	q := url.Values{"endpoint": {srv.Endpoint}}
	for i := 0; i+1 < len(params); i += 2 {
		q.Set(params[i], params[i+1])
	}
	u.RawQuery = q.Encode()
	return u.String()
}

func randomName(t testing.TB) string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return strings.ToLower(strings.NewReplacer("/", "-", "_", "-").Replace(t.Name())) + "-" + hex.EncodeToString(b[:])
}

// TestAzurite runs everything that needs the service against one Azurite
// server: the parallel group first, then the tests that stop or restart
// the server, one at a time.
func TestAzurite(t *testing.T) {
	srv := testserver.Azurite(t)
	// Restarts by the conformance suite must not cut the other parallel
	// tests' requests: those hold restart for reading while they run.
	var restart sync.RWMutex
	t.Run("group", func(t *testing.T) {
		t.Run("Conformance", func(t *testing.T) {
			t.Parallel()
			prefix := randomName(t)
			raw := storeURL(srv, "conformance", prefix)
			storetest.Run(t, storetest.Options{
				Tamper:    tamperOn(t, srv, "conformance", prefix),
				Open:      func(t testing.TB) tenure.Store { return storetest.OpenClosing(t, tenure.Open, raw) },
				TTL:       ttl,
				MaxTTL:    azblob.MaxTTL,
				Tolerance: time.Second,
				Restart: func(t testing.TB) {
					restart.Lock()
					defer restart.Unlock()
					srv.Restart(t)
				},
			})
		})
		parallel := func(name string, f func(t *testing.T, srv *testserver.AzuriteServer)) {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				restart.RLock()
				defer restart.RUnlock()
				f(t, srv)
			})
		}
		parallel("TTLRange", testTTLRange)
		parallel("BlobNames", testBlobNames)
		parallel("PrefixesAreIndependent", testPrefixes)
		parallel("CredentialsNeverInErrors", testCredentials)
		parallel("ExampleCoordinatorHandoff", testExampleCoordinator)
		parallel("ExpiredLeaseIsNotRevived", testExpiredNotRevived)
		parallel("TermsNeverReset", testTermsNeverReset)
		parallel("TermAtMaximum", testTermAtMaximum)
		parallel("CorruptMetadata", testCorruptMetadata)
		parallel("NewerFormat", testNewerFormat)
	})
	t.Run("RecoversAfterRestart", func(t *testing.T) { testRecoversAfterRestart(t, srv) })
}

func testTTLRange(t *testing.T, srv *testserver.AzuriteServer) {
	st := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "ttl", randomName(t)))
	ctx := storetest.Context(t, 30*time.Second)
	for _, d := range []time.Duration{time.Second, 14 * time.Second, 61 * time.Second, 15500 * time.Millisecond} {
		_, err := st.Acquire(ctx, "k", "a", d)
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Fatalf("Acquire with TTL %s: got %v, want ErrInvalid", d, err)
		}
		if !strings.Contains(err.Error(), "15s") || !strings.Contains(err.Error(), "1m0s") {
			t.Errorf("Acquire with TTL %s: error %q does not name the allowed range", d, err)
		}
	}
	if r, err := st.Get(ctx, "k"); err != nil || r.Term != 0 {
		t.Fatalf("rejected TTLs granted something: %+v, %v", r, err)
	}
	for _, d := range []time.Duration{azblob.MinTTL, azblob.MaxTTL} {
		l, err := st.Acquire(ctx, "k", "a", d)
		if err != nil {
			t.Fatalf("Acquire with TTL %s: %v", d, err)
		}
		if r, err := st.Get(ctx, "k"); err != nil || r.TTL != d || r.Holder != "a" {
			t.Fatalf("Get after Acquire with TTL %s = %+v, %v", d, r, err)
		}
		if err := st.Release(ctx, l); err != nil {
			t.Fatal(err)
		}
	}
}

// testBlobNames uses keys that would be unsafe as raw blob names: they must
// map to distinct blobs and round-trip through the metadata.
func testBlobNames(t *testing.T, srv *testserver.AzuriteServer) {
	st := storetest.OpenClosing(t, tenure.Open, storeURL(srv, randomName(t)[:20]+"x", "")) // a new container: created on demand
	ctx := storetest.Context(t, 60*time.Second)
	keys := []string{"a/b", "a~2Fb", "a%2Fb", ".", "..", "a/../b", "a.", "x y", "ünïcødé", "A", "a", "~", "a\\b", "?#&="}
	leases := map[string]tenure.Lease{}
	for i, k := range keys {
		id := fmt.Sprintf("holder %d/ü", i)
		l, err := st.Acquire(ctx, k, id, ttl)
		if err != nil {
			t.Fatalf("Acquire(%q): %v", k, err)
		}
		leases[k] = l
	}
	for i, k := range keys {
		r, err := st.Get(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if want := fmt.Sprintf("holder %d/ü", i); r.Holder != want || r.Term != 1 {
			t.Errorf("Get(%q) = %+v, want holder %q term 1 (keys share a blob?)", k, r, want)
		}
	}
	for k, l := range leases {
		if err := st.Release(ctx, l); err != nil {
			t.Errorf("Release(%q): %v", k, err)
		}
	}
}

func testPrefixes(t *testing.T, srv *testserver.AzuriteServer) {
	name := randomName(t)
	a := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "prefixes", name+"/one"))
	b := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "prefixes", name+"/two"))
	ctx := storetest.Context(t, 30*time.Second)
	la, err := a.Acquire(ctx, "k", "a", ttl)
	if err != nil {
		t.Fatal(err)
	}
	lb, err := b.Acquire(ctx, "k", "b", ttl)
	if err != nil {
		t.Fatalf("the same key under another prefix: %v", err)
	}
	for _, c := range []struct {
		st tenure.Store
		l  tenure.Lease
	}{{a, la}, {b, lb}} {
		if err := c.st.Release(ctx, c.l); err != nil {
			t.Fatal(err)
		}
	}
}

// testCredentials checks that neither the key nor a SAS appears in any
// error or in the printed form of a URL, for errors from the service (wrong
// key), from the network (nothing listening) and from parsing.
func testCredentials(t *testing.T, srv *testserver.AzuriteServer) {
	// A different, valid base64 key: the service rejects the signature.
	wrongKey := strings.Repeat("c2VjcmV0LWtleS1ub3QtdGhlLXJlYWwtb25l", 2) + "AA=="
	dead := fmt.Sprintf("http://127.0.0.1:%d/%s", testserver.FreePort(t), testserver.AzuriteAccount)
	secrets := []string{wrongKey, testserver.AzuriteKey, url.QueryEscape(testserver.AzuriteKey), url.QueryEscape(wrongKey), "c2VjcmV0"}
	urls := map[string]string{
		"wrong key":    "azblob://" + testserver.AzuriteAccount + ":" + url.QueryEscape(wrongKey) + "@creds/p?endpoint=" + url.QueryEscape(srv.Endpoint),
		"server down":  "azblob://" + testserver.AzuriteAccount + ":" + url.QueryEscape(testserver.AzuriteKey) + "@creds/p?endpoint=" + url.QueryEscape(dead) + "&retries=0",
		"bad endpoint": "azblob://" + testserver.AzuriteAccount + ":" + url.QueryEscape(wrongKey) + "@creds/p?endpoint=ftp://x",
		"bad param":    "azblob://" + testserver.AzuriteAccount + ":" + url.QueryEscape(wrongKey) + "@creds/p?colour=blue",
		"bad container": "azblob://" + testserver.AzuriteAccount + ":" + url.QueryEscape(wrongKey) + "@Bad_Name/p?endpoint=" +
			url.QueryEscape(srv.Endpoint),
	}
	for name, raw := range urls {
		check := func(what string, err error) {
			t.Helper()
			if err == nil {
				t.Errorf("%s: %s succeeded, want an error", name, what)
				return
			}
			for _, s := range secrets {
				if strings.Contains(err.Error(), s) {
					t.Errorf("%s: %s error %q contains a secret", name, what, err)
				}
			}
			if strings.Contains(err.Error(), "\n") {
				t.Errorf("%s: %s error %q spans lines", name, what, err)
			}
			t.Logf("%s: %s: %v", name, what, err)
		}
		if shown := tenure.Redact(raw); strings.Contains(shown, url.QueryEscape(wrongKey)) || strings.Contains(shown, url.QueryEscape(testserver.AzuriteKey)) {
			t.Errorf("%s: Redact shows the key: %s", name, shown)
		}
		ctx := storetest.Context(t, 20*time.Second)
		st, err := tenure.Open(ctx, raw)
		if err != nil {
			check("Open", err)
			if !errors.Is(err, tenure.ErrInvalid) {
				t.Errorf("%s: Open error %v does not match ErrInvalid", name, err)
			}
			continue
		}
		_, err = st.Get(ctx, "k")
		check("Get", err)
		_, err = st.Acquire(ctx, "k", "a", ttl)
		check("Acquire", err)
		err = st.Renew(ctx, tenure.Lease{Key: "k", Identity: "a", Term: 1, TTL: ttl, Token: "5f0f9a52-7d0c-4a43-b4a3-4f6f0c6c1a11"})
		check("Renew", err)
		_ = st.Close()
	}
	// A SAS travels in the request URL, which network errors quote: the
	// store must redact it, against a live and a dead service.
	const sig = "c2lnbmF0dXJlLXNlY3JldA"
	for name, endpoint := range map[string]string{"SAS, live": srv.Endpoint, "SAS, down": dead} {
		st, err := azblob.New(t.Context(), azblob.Options{
			ServiceURL: endpoint, Container: "creds", SAS: "sv=2021-08-06&ss=b&srt=sco&sp=rwdlac&se=2099-01-01T00:00:00Z&sig=" + sig,
			MaxRetries: -1,
		})
		if err != nil {
			t.Fatal(err)
		}
		ctx := storetest.Context(t, 10*time.Second)
		_, err = st.Acquire(ctx, "k", "a", ttl)
		if err == nil {
			t.Fatalf("%s: Acquire with a forged SAS succeeded", name)
		}
		if strings.Contains(err.Error(), sig) {
			t.Errorf("%s: error %q contains the SAS signature", name, err)
		}
		for e := err; e != nil; e = errors.Unwrap(e) {
			if strings.Contains(e.Error(), sig) {
				t.Errorf("%s: wrapped error %q contains the SAS signature", name, e)
			}
		}
		t.Logf("%s: Acquire: %v", name, err)
		_ = st.Close()
	}
}

// testExampleCoordinator runs the package example's code against Azurite
// with two instances: one leads, and when it shuts down it releases the
// lease and the other takes over at once, with a higher term, never both
// at the same time.
func testExampleCoordinator(t *testing.T, srv *testserver.AzuriteServer) {
	raw := storeURL(srv, "example", randomName(t))
	type event struct {
		id    string
		term  uint64
		start bool
		at    time.Time
	}
	var mu sync.Mutex
	var events []event
	active := 0
	started := make(chan string, 4)
	task := func(id string) tenure.Task {
		return func(ctx context.Context) error {
			l, _ := tenure.LeaseFrom(ctx)
			mu.Lock()
			active++
			if active > 1 {
				t.Errorf("%s started leading while another instance leads", id)
			}
			events = append(events, event{id, l.Term, true, time.Now()})
			mu.Unlock()
			started <- id
			err := MyLeaderCoordinatorTask(ctx)
			mu.Lock()
			active--
			events = append(events, event{id, l.Term, false, time.Now()})
			mu.Unlock()
			return err
		}
	}
	cancels := map[string]context.CancelFunc{}
	dones := map[string]chan error{}
	for _, id := range []string{"alpha", "beta"} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		cancels[id], dones[id] = cancel, done
		go func() { done <- runCoordinator(ctx, raw, id, task(id)) }()
	}
	defer func() {
		for id, cancel := range cancels {
			cancel()
			<-dones[id]
		}
	}()
	first := <-started
	second := map[string]string{"alpha": "beta", "beta": "alpha"}[first]
	// Real time passing is the point: for a while the second instance
	// campaigns against a held key and must not start leading (the task
	// checks), and it gets to watch the key before the handoff is measured.
	time.Sleep(time.Second)
	began := time.Now()
	cancels[first]()
	if err := <-dones[first]; !errors.Is(err, context.Canceled) {
		t.Fatalf("%s: Run returned %v, want context.Canceled", first, err)
	}
	dones[first] <- nil // for the deferred wait
	select {
	case id := <-started:
		if id != second {
			t.Fatalf("%s started leading again, want %s", id, second)
		}
	case <-time.After(ttl / 2):
		t.Fatalf("%s did not take over within %s of %s shutting down: the release or the watch did not work", second, ttl/2, first)
	}
	handoff := time.Since(began)
	mu.Lock()
	defer mu.Unlock()
	if len(events) < 3 || events[0].id != first || events[1].start || events[2].id != second || !events[2].start {
		t.Fatalf("events = %+v, want %s start, %s end, %s start", events, first, first, second)
	}
	if events[2].term <= events[0].term {
		t.Fatalf("term went from %d to %d", events[0].term, events[2].term)
	}
	t.Logf("handoff from %s (term %d) to %s (term %d): %s after shutdown began, %s after the old task returned",
		first, events[0].term, second, events[2].term, handoff.Round(time.Millisecond), events[2].at.Sub(events[1].at).Round(time.Millisecond))
}

// testExpiredNotRevived covers a particular of Azure: a blob lease that
// expired can still be renewed with its old ID if nobody leased the blob
// since. The store does not revive it: the grant is over, and the key can
// be taken by another candidate with a higher term.
func testExpiredNotRevived(t *testing.T, srv *testserver.AzuriteServer) {
	a := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "expired", randomName(t)))
	ctx := storetest.Context(t, 60*time.Second)
	l, err := a.Acquire(ctx, "k", "alpha", ttl)
	if err != nil {
		t.Fatal(err)
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ch, err := a.Watch(wctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	for r := range ch { // wait for the service to expire the lease
		if !r.Held() {
			break
		}
	}
	stop()
	if err := a.Renew(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Renew of an expired lease: got %v, want ErrLost", err)
	}
	if r, err := a.Get(ctx, "k"); err != nil || r.Held() || r.Term != l.Term {
		t.Fatalf("after the refused renewal, Get = %+v, %v; want free with term %d", r, err, l.Term)
	}
	l2, err := a.Acquire(ctx, "k", "beta", ttl)
	if err != nil || l2.Term <= l.Term {
		t.Fatalf("Acquire after expiry = %+v, %v; want a term above %d", l2, err, l.Term)
	}
	if err := a.Release(ctx, l); !errors.Is(err, tenure.ErrLost) {
		t.Fatalf("Release of the expired lease after a takeover: got %v, want ErrLost", err)
	}
	if err := a.Release(ctx, l2); err != nil {
		t.Fatal(err)
	}
}
