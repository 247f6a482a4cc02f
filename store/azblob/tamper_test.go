package azblob_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/azblob"
	"github.com/tenurehq/tenure/storetest"
)

// tamperOn changes the store's blobs with the Azure SDK, as an operator
// with the account key would (az storage blob lease break / delete). A
// leased blob's metadata cannot be rewritten without its lease ID, so there
// is no OverwriteGrant: Azure itself refuses it.
func tamperOn(t *testing.T, srv *testserver.AzuriteServer, containerName, prefix string) *storetest.Tamper {
	cred, err := sdk.NewSharedKeyCredential(testserver.AzuriteAccount, testserver.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/"+containerName, cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	breakLease := func(tb testing.TB, key string, mustHave bool) {
		tb.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		lc, err := lease.NewBlobClient(c.NewBlobClient(azblob.BlobName(prefix, key)), nil)
		if err != nil {
			tb.Fatal(err)
		}
		_, err = lc.BreakLease(ctx, &lease.BlobBreakOptions{BreakPeriod: to(int32(0))})
		if err != nil && (mustHave || !bloberror.HasCode(err, bloberror.LeaseNotPresentWithLeaseOperation)) {
			tb.Fatalf("break lease: %v", err)
		}
	}
	return &storetest.Tamper{
		DeleteGrant: func(tb testing.TB, key string) { breakLease(tb, key, true) },
		DeleteAll: func(tb testing.TB, key string) {
			breakLease(tb, key, false)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			_, err := c.NewBlobClient(azblob.BlobName(prefix, key)).Delete(ctx, nil)
			if err != nil && !bloberror.HasCode(err, bloberror.BlobNotFound) {
				tb.Fatalf("delete blob: %v", err)
			}
		},
	}
}

func to[T any](v T) *T { return &v }

// testCorruptMetadata breaks a held key's lease and rewrites its blob
// metadata with the Azure SDK so that it no longer reads (a term, holder
// or TTL tenure never writes). The holder's Renew and Release report the
// grant lost (Azure lets nobody else write the metadata of a blob leased
// by tenure, so metadata that does not read means the grant is gone), and
// every call answers one line naming the key.
func testCorruptMetadata(t *testing.T, srv *testserver.AzuriteServer) {
	for i, meta := range []map[string]string{
		{"tenureterm": "x1"},
		{"tenureterm": "9", "tenureholder": "%zz", "tenurettl": "15"},
		{"tenureterm": "9", "tenureholder": "alpha", "tenurettl": "-15"},
	} {
		prefix := fmt.Sprint(randomName(t), "-", i)
		tm := tamperOn(t, srv, "corrupt", prefix)
		st := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "corrupt", prefix))
		ctx := storetest.Context(t, 30*time.Second)
		l, err := st.Acquire(ctx, "k", "alpha", ttl)
		if err != nil {
			t.Fatal(err)
		}
		tm.DeleteGrant(t, "k") // breaks the lease
		cred, err := sdk.NewSharedKeyCredential(testserver.AzuriteAccount, testserver.AzuriteKey)
		if err != nil {
			t.Fatal(err)
		}
		c, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/corrupt", cred, nil)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]*string{}
		for k, v := range meta {
			m[k] = to(v)
		}
		if _, err := c.NewBlobClient(azblob.BlobName(prefix, "k")).SetMetadata(ctx, m, nil); err != nil {
			t.Fatal(err)
		}
		storetest.Tampered(t, fmt.Sprint("Renew with ", meta), st.Renew(ctx, l), "k", tenure.ErrLost)
		storetest.Tampered(t, fmt.Sprint("Release with ", meta), st.Release(ctx, l), "k", tenure.ErrLost)
		_, err = st.Get(ctx, "k")
		storetest.Tampered(t, fmt.Sprint("Get with ", meta), err, "k", nil)
		_, err = st.Acquire(ctx, "k", "beta", ttl)
		storetest.Tampered(t, fmt.Sprint("Acquire with ", meta), err, "k", nil)
	}
}
