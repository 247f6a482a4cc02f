package tenure_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// plainStore hides a store's Publisher ability.
type plainStore struct{ tenure.Store }

func TestConfigValue(t *testing.T) {
	base := tenure.Config{Store: memory.New(nil), Key: "job", Identity: "a", TTL: 15 * time.Second}
	for _, c := range []struct {
		name, value, want string
		store             tenure.Store
	}{
		{"over-long value", strings.Repeat("v", tenure.MaxValueLen+1), "Config.Value: ", nil},
		{"control character in value", "a\tb", `Config.Value: tenure: invalid argument: value "a\tb"`, nil},
		{"store that cannot publish", "10.0.0.7:8080", "Config.Value is set but the store (tenure_test.plainStore) cannot publish values", plainStore{memory.New(nil)}},
	} {
		cfg := base
		cfg.Value = c.value
		if c.store != nil {
			cfg.Store = c.store
		}
		err := cfg.WithDefaults().Validate()
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: Validate = %v, want ErrInvalid with %q", c.name, err, c.want)
		}
	}
	for _, v := range []string{"", "10.0.0.7:8080", strings.Repeat("é", tenure.MaxValueLen/2)} {
		cfg := base
		cfg.Value = v
		if err := cfg.WithDefaults().Validate(); err != nil {
			t.Errorf("Validate with Value %.20q: %v", v, err)
		}
	}
	// Without a value, a store that cannot publish is fine.
	cfg := base
	cfg.Store = plainStore{memory.New(nil)}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Errorf("Validate without a value on a plain store: %v", err)
	}
}

// The value in Config is published with the grant: the term handle's lease
// and every observer's record carry it while the elector leads, and it is
// gone once it steps down.
func TestValueIsPublished(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		store := memory.New(nil)
		cfg := config(store.Handle(), "a")
		cfg.Value = "10.0.0.7:8080"
		e := newElector(t, cfg)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		obs := tenure.Observer{Store: store.Handle(), Key: "job"}
		changes := obs.Changes(ctx)
		stop := make(chan struct{})
		done := make(chan error)
		go func() {
			done <- e.Do(ctx, func(ctx context.Context) error {
				term, ok := tenure.TermFrom(ctx)
				if !ok || term.Lease().Value != "10.0.0.7:8080" {
					t.Errorf("the term handle's lease = %+v, want Value 10.0.0.7:8080", term.Lease())
				}
				<-stop
				return nil
			})
		}()
		var seen bool
		for r := range changes {
			if r.Holder == "a" {
				if r.Value != "10.0.0.7:8080" {
					t.Errorf("observer's record = %+v, want Value 10.0.0.7:8080", r)
				}
				if !seen { // deliveries may repeat
					seen = true
					close(stop)
				}
				continue
			}
			if seen && !r.Held() {
				if r.Value != "" {
					t.Errorf("record after the release = %+v, want no Value", r)
				}
				break
			}
		}
		if err := <-done; err != nil {
			t.Errorf("Do: %v", err)
		}
	})
}
