package azblob_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	sdk "github.com/Azure/azure-sdk-for-go/sdk/storage/azblob"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/container"
	"github.com/Azure/azure-sdk-for-go/sdk/storage/azblob/lease"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/testserver"
	"github.com/tenurehq/tenure/store/azblob"
	"github.com/tenurehq/tenure/storetest"
)

// testNewerFormat: a key's blob leased by a hypothetical newer tenure,
// whose metadata is of format 99 with the term under another name. This
// build read it as held by its holder at term 0, below the key's term 1,
// and would have granted the key at a term it had passed once the lease
// ended. Get and Acquire now refuse it in one line naming the key and
// the format. A grant of this build writes format 1, and a blob without
// the field, as earlier builds wrote it, reads as before.
func testNewerFormat(t *testing.T, srv *testserver.AzuriteServer) {
	prefix := randomName(t)
	st := storetest.OpenClosing(t, tenure.Open, storeURL(srv, "newer", prefix))
	ctx := storetest.Context(t, 30*time.Second)
	l, err := st.Acquire(ctx, "k", "v1", ttl)
	if err != nil {
		t.Fatal(err)
	}
	cred, err := sdk.NewSharedKeyCredential(testserver.AzuriteAccount, testserver.AzuriteKey)
	if err != nil {
		t.Fatal(err)
	}
	c, err := container.NewClientWithSharedKeyCredential(srv.Endpoint+"/newer", cred, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := c.NewBlobClient(azblob.BlobName(prefix, "k"))
	p, err := b.GetProperties(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if f := p.Metadata["Tenureformat"]; f == nil || *f != "1" {
		t.Fatalf("metadata of a grant of this build: %v; want tenureformat 1", p.Metadata)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	// A released blob as builds before the format wrote it still reads.
	if _, err := b.SetMetadata(ctx, map[string]*string{"tenurekey": to("k"), "tenureterm": to("1")}, nil); err != nil {
		t.Fatal(err)
	}
	l, err = st.Acquire(ctx, "k", "v1", ttl)
	if err != nil || l.Term != 2 {
		t.Fatalf("Acquire of a blob without tenureformat at term 1: %+v, %v; want term 2", l, err)
	}
	if err := st.Release(ctx, l); err != nil {
		t.Fatal(err)
	}
	meta := map[string]*string{"tenureformat": to("99"), "tenurekey": to("k"), "tenureholder": to("v99"), "tenureepoch": to("500")}
	if _, err := b.SetMetadata(ctx, meta, nil); err != nil {
		t.Fatal(err)
	}
	lc, err := lease.NewBlobClient(b, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lc.AcquireLease(ctx, 60, nil); err != nil {
		t.Fatal(err)
	}
	r, err := st.Get(ctx, "k")
	if err == nil {
		t.Fatalf("Get of a blob of format 99: %+v; want a refusal", r)
	}
	storetest.Tampered(t, "Get", err, "k", nil)
	_, err = st.Acquire(ctx, "k", "v1", ttl)
	var held *tenure.HeldError
	if errors.As(err, &held) {
		t.Fatalf("Acquire of a blob of format 99: %v; want a refusal", err)
	}
	storetest.Tampered(t, "Acquire", err, "k", nil)
	if !strings.Contains(err.Error(), `"99"`) {
		t.Fatalf("Acquire: %v; want it to name format 99", err)
	}
}
