package zk_test

import (
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/tenurehq/tenure"
)

// A grant of a hypothetical newer format (a format field this build does
// not know, the holder under another name) whose lease node a live session
// owns reads as held, by "(unknown)", at the key node's Mzxid; once that
// session ends, the next grant's term is above it. No format marker is
// needed for this: the key is held while a session owns its lease node,
// and terms are zxids, so no field of the key node's data can make a key
// look free or its term go back.
func TestNewerFormatGrantHeld(t *testing.T) {
	srv := server(t)
	raw := rawConn(t, srv)
	root := "/newer-" + strconv.FormatInt(time.Now().UnixNano(), 36) // its nodes outlive the test
	if _, err := raw.Create(root, nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	if _, err := raw.Create(root+"/k", []byte(`{"format":99,"owner":"v99","ttl":"30s"}`), 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	holder := rawConn(t, srv)
	if _, err := holder.Create(root+"/k/lease", nil, gozk.FlagEphemeral, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatal(err)
	}
	_, stat, err := raw.Get(root + "/k")
	if err != nil {
		t.Fatal(err)
	}
	st := open(t, "zk://"+srv.Addr+root)
	ctx := ctxT(t, 10*time.Second)
	_, err = st.Acquire(ctx, "k", "older", time.Second)
	var held *tenure.HeldError
	if !errors.As(err, &held) || held.Record.Holder != "(unknown)" || held.Record.Term < uint64(stat.Mzxid) {
		t.Fatalf("Acquire over a newer-format grant: %v; want HeldError naming (unknown) at term >= %d", err, stat.Mzxid)
	}
	_, _, gone, err := raw.ExistsW(root + "/k/lease")
	if err != nil {
		t.Fatal(err)
	}
	holder.Close() // ends its session, and with it the lease node
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal("the lease node outlived its session's close")
	}
	l, err := st.Acquire(ctx, "k", "older", time.Second)
	if err != nil || l.Term <= held.Record.Term {
		t.Fatalf("Acquire once the newer grant ended: %+v, %v; want a term above %d", l, err, held.Record.Term)
	}
}

// TestRecordFieldsPinned pins the JSON fields of a grant's key node. If it
// fails, the record changed: builds already deployed read it (a rolling
// upgrade runs both on one ensemble), and no field may make them see a
// live grant as free or a term lower (see TestNewerFormatGrantHeld);
// update the list once that is so.
func TestRecordFieldsPinned(t *testing.T) {
	srv := server(t)
	raw := rawConn(t, srv)
	root := "/pinned-" + strconv.FormatInt(time.Now().UnixNano(), 36) // its nodes outlive the test
	st := open(t, "zk://"+srv.Addr+root)
	ctx := ctxT(t, 10*time.Second)
	if _, err := st.AcquireClaim(ctx, "k", tenure.Claim{Identity: "alpha", TTL: time.Second, Value: "v"}); err != nil {
		t.Fatal(err)
	}
	data, _, err := raw.Get(root + "/k")
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	const want = "holder session ttl_ns value version"
	if got := strings.Join(slices.Sorted(maps.Keys(m)), " "); got != want {
		t.Errorf("fields of the key node: %s, want %s", got, want)
	}
}
