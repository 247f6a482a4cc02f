package peer_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tenurehq/tenure"
	_ "github.com/tenurehq/tenure/peer/lowest"
)

// Three "lowest" members on loopback TCP, and an observer opened from the
// same URL without id: it reports the coordinator the members agree on
// (what `tenure status` and `tenure watch` print) and cannot campaign.
func ExampleObserver() {
	slog.SetDefault(slog.New(slog.DiscardHandler))
	dir, _ := os.MkdirTemp("", "peer-example-")
	defer os.RemoveAll(dir)
	secret := filepath.Join(dir, "peer.secret")
	os.WriteFile(secret, []byte("an-example-secret-of-at-least-32-bytes\n"), 0o600)
	var peers []string
	for id, addr := range freeAddrs(3) {
		peers = append(peers, fmt.Sprintf("%d=%s", id+1, addr))
	}
	common := "peers=" + strings.Join(peers, ",") + "&algorithm=lowest&secret-file=" + secret
	ctx := context.Background()
	for id := 1; id <= 3; id++ {
		member, err := tenure.Open(ctx, fmt.Sprintf("peer://?id=%d&state-dir=%s&%s", id, dir, common))
		if err != nil {
			fmt.Println(err)
			return
		}
		defer member.Close()
	}

	observer, err := tenure.Open(ctx, "peer://?"+common)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer observer.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	watch, err := observer.Watch(ctx, "job")
	if err != nil {
		fmt.Println(err)
		return
	}
	// While the members start, some may briefly lead; "lowest" settles on
	// member 1, and the watch reports each change until then.
	for r := range watch {
		if r.Holder == "1" {
			fmt.Println("the members follow coordinator", r.Holder, "with an epoch:", r.Term > 0)
			break
		}
	}
	_, err = observer.Acquire(ctx, "job", "4", time.Second)
	fmt.Println("the observer may campaign:", !errors.Is(err, tenure.ErrInvalid))
	// Output:
	// the members follow coordinator 1 with an epoch: true
	// the observer may campaign: false
}

// freeAddrs returns n distinct loopback addresses that were free a moment
// ago: every listener stays open until all n are chosen, so the kernel
// cannot offer one port twice.
func freeAddrs(n int) []string {
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			panic(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}
