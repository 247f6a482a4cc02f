package azblob_test

import (
	"context"
	"testing"
	"time"

	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/bloberror"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

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
