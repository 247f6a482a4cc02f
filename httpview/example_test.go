package httpview_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/httpview"
	"github.com/tenurehq/tenure/store/memory"
)

// A candidate mounts the view with its elector; here the leader task asks
// the view who leads and whether this process is ready.
func Example() {
	store := memory.New(nil)
	cfg := tenure.Config{Store: store, Key: "reports", Identity: "worker-1", TTL: 5 * time.Second,
		Logger: slog.New(slog.DiscardHandler)}

	view, err := httpview.New(httpview.Options{Key: cfg.Key, Store: cfg.Store})
	if err != nil {
		panic(err)
	}
	cfg.OnEvent = view.OnEvent(cfg.OnEvent)
	elector, err := tenure.New(cfg)
	if err != nil {
		panic(err)
	}
	if err := view.SetElector(elector); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go view.Run(ctx)
	srv := httptest.NewServer(view)
	defer srv.Close()

	err = elector.Do(ctx, func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL+"/", nil)
		req.Header.Set("Accept", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		var l httpview.Leader
		if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
			return err
		}
		fmt.Printf("name=%s key=%s term=%d is_self=%v lease_duration=%vs\n", l.Name, l.Key, l.Term, l.IsSelf, l.LeaseDuration)

		for _, path := range []string{"/readyz", "/healthz"} {
			resp, err := http.Get(srv.URL + path)
			if err != nil {
				return err
			}
			resp.Body.Close()
			fmt.Println(path, resp.StatusCode)
		}
		return nil
	})
	if err != nil {
		panic(err)
	}
	// Output:
	// name=worker-1 key=reports term=1 is_self=true lease_duration=5s
	// /readyz 200
	// /healthz 200
}

// A program that already follows the key feeds the view the same records
// it uses itself (here it also prints them), so the key is watched once.
func ExampleHandler_Follow() {
	store := memory.New(nil)
	view, err := httpview.New(httpview.Options{Key: "reports", Store: store})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	records := make(chan tenure.Record)
	done := make(chan error)
	go func() { done <- view.Follow(ctx, records) }()

	obs := tenure.Observer{Store: store, Key: "reports"}
	changes := obs.Changes(ctx)
	if _, err := store.AcquireClaim(ctx, "reports", tenure.Claim{Identity: "worker-1", TTL: time.Minute, Value: "10.0.0.7:8080"}); err != nil {
		panic(err)
	}
	for r := range changes {
		records <- r // the view takes it; Follow applies each record before receiving the next
		if r.Held() {
			fmt.Println("seen:", r.Holder, r.Term)
			break
		}
	}
	close(records)
	fmt.Println("Follow returned:", <-done)
	l := view.Current()
	fmt.Println("view:", l.Name, l.Term, l.Value)
	// Output:
	// seen: worker-1 1
	// Follow returned: <nil>
	// view: worker-1 1 10.0.0.7:8080
}
