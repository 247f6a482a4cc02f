package tenure_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// A RenewDeadline set short on its own used to fail with an error about
// RenewInterval or RequestTimeout, fields the caller never set (their
// defaults come from the TTL), without saying so.
func TestShortRenewDeadlineErrorNamesTheDefaults(t *testing.T) {
	for _, c := range []struct {
		rd   time.Duration
		want []string
	}{
		{200 * time.Millisecond, []string{"Config.RenewInterval was left to its default, TTL/3"}},
		{150 * time.Millisecond, []string{"Config.RenewInterval was left to its default, TTL/3", "Config.RequestTimeout was left to its default, TTL/5"}},
	} {
		cfg := tenure.Config{Store: memory.New(nil), Key: "k", Identity: "a", TTL: time.Second, RenewDeadline: c.rd}
		_, err := tenure.New(cfg)
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Fatalf("RenewDeadline %s: New = %v, want ErrInvalid", c.rd, err)
		}
		for _, w := range c.want {
			if !strings.Contains(err.Error(), w) {
				t.Errorf("RenewDeadline %s: New = %v, want it to say %q", c.rd, err, w)
			}
		}
		// What the hint suggests works.
		cfg.RenewInterval, cfg.RequestTimeout = c.rd/4, c.rd/3
		if _, err := tenure.New(cfg); err != nil {
			t.Errorf("RenewDeadline %s with RenewInterval %s, RequestTimeout %s: %v", c.rd, cfg.RenewInterval, cfg.RequestTimeout, err)
		}
	}
	_, err := tenure.NewSession(tenure.SessionConfig{Store: memory.New(nil), TTL: time.Second, RenewDeadline: 100 * time.Millisecond})
	if want := "SessionConfig.RenewInterval was left to its default, TTL/3 (25ms would do); SessionConfig.RequestTimeout was left to its default, TTL/5"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("NewSession with a short RenewDeadline = %v, want it to say %q", err, want)
	}
	// A field the caller set is not blamed on a default.
	_, err = tenure.New(tenure.Config{Store: memory.New(nil), Key: "k", Identity: "a", TTL: time.Second, RenewInterval: 900 * time.Millisecond})
	if err == nil || strings.Contains(err.Error(), "default") {
		t.Errorf("RenewInterval set too long: New = %v, want no word of defaults", err)
	}
}
