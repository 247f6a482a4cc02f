package shard_test

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/syncbuf"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

// TestMembersGivenOtherListsAreLogged: a member started with other
// members or keys than the rest (a rolling update half done, a typo in one
// host's flags) disagrees with them on who owns which key; the leases keep
// that safe, but keys can stay unled. Each member publishes a fingerprint
// of its members and keys with its liveness grant (shown by tenure status
// --key GROUP/members/ID), and the others log a warning naming it, once.
// Members given the same lists in another order log nothing.
func TestMembersGivenOtherListsAreLogged(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(tenure.SystemClock)
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		logs := map[string]*syncbuf.Buffer{}
		start := func(id string, members, keys []string) *shard.Sharder {
			logs[id] = &syncbuf.Buffer{}
			s, err := shard.New(shard.Config{Store: store, Group: "g", Identity: id, Members: members, Keys: keys,
				TTL: time.Second, Logger: slog.New(slog.NewTextHandler(logs[id], &slog.HandlerOptions{Level: slog.LevelWarn}))})
			if err != nil {
				t.Fatal(err)
			}
			wg.Go(func() { _ = s.Run(ctx, func(ctx context.Context, _ string) error { <-ctx.Done(); return nil }) })
			return s
		}
		start("a", []string{"a", "b", "c"}, shard.Numbered(8))
		start("b", []string{"c", "b", "a"}, []string{"7", "6", "5", "4", "3", "2", "1", "0"})
		start("c", []string{"a", "b", "c"}, shard.Numbered(9)) // one key more
		time.Sleep(5 * time.Second)
		synctest.Wait()
		rec, err := store.Get(ctx, "g/members/a")
		if err != nil || rec.Holder != "a" || !strings.HasPrefix(rec.Value, "members=3 keys=8 sha256=") {
			t.Errorf("a's liveness record = %+v, %v; want held by a, publishing its members and keys", rec, err)
		}
		cancel()
		wg.Wait()
		for id, want := range map[string][]string{"a": {"member=c"}, "b": {"member=c"}, "c": {"member=a", "member=b"}} {
			out := logs[id].String()
			for _, w := range want {
				if n := strings.Count(out, w); n != 1 {
					t.Errorf("member %s logged %d warnings about %s, want 1:\n%s", id, n, w, out)
				}
			}
			if strings.Count(out, "level=WARN") != len(want) {
				t.Errorf("member %s logged other warnings than about %v:\n%s", id, want, out)
			}
			if id != "c" && !strings.Contains(out, "keys=9") {
				t.Errorf("member %s's warning does not show c's config (keys=9):\n%s", id, out)
			}
		}
	})
}
