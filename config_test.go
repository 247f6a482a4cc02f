package tenure_test

import (
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

func TestConfigValidate(t *testing.T) {
	valid := func() tenure.Config {
		return tenure.Config{Store: memory.New(nil), Key: "job", Identity: "a", TTL: 15 * time.Second}.WithDefaults()
	}
	cases := []struct {
		name  string
		edit  func(*tenure.Config)
		field string // the field the message must name
		value string // and the value it must quote
	}{
		{"nil store", func(c *tenure.Config) { c.Store = nil }, "Config.Store", "nil"},
		{"empty key", func(c *tenure.Config) { c.Key = "" }, "Config.Key", "empty"},
		{"long key", func(c *tenure.Config) { c.Key = strings.Repeat("k", tenure.MaxKeyLen+1) }, "Config.Key", "257 bytes"},
		{"control character in key", func(c *tenure.Config) { c.Key = "a\nb" }, "Config.Key", `"a\nb"`},
		{"empty identity", func(c *tenure.Config) { c.Identity = "" }, "Config.Identity", "empty"},
		{"invalid UTF-8 identity", func(c *tenure.Config) { c.Identity = "\xff" }, "Config.Identity", `"\xff"`},
		{"zero TTL", func(c *tenure.Config) { c.TTL = 0 }, "Config.TTL", "0s"},
		{"negative TTL", func(c *tenure.Config) { c.TTL = -time.Second }, "Config.TTL", "-1s"},
		{"TTL 1ns", func(c *tenure.Config) { c.TTL = time.Nanosecond }, "Config.TTL", "1ns) must be from 100ms to 24h0m0s"},
		{"TTL 1ms", func(c *tenure.Config) { c.TTL = time.Millisecond }, "Config.TTL", "1ms) must be from 100ms to 24h0m0s"},
		{"TTL just under the minimum", func(c *tenure.Config) { c.TTL = tenure.MinTTL - 1 }, "Config.TTL", "99.999999ms"},
		{"TTL just over the maximum", func(c *tenure.Config) { c.TTL = tenure.MaxTTL + 1 }, "Config.TTL", "24h0m0.000000001s"},
		{"TTL 2562047h", func(c *tenure.Config) { c.TTL = 2562047 * time.Hour }, "Config.TTL", "2562047h0m0s"},
		{"jitter > max", func(c *tenure.Config) { c.Jitter = 3 }, "Config.Jitter", "3"},
		{"jitter NaN", func(c *tenure.Config) { c.Jitter = math.NaN() }, "Config.Jitter", "NaN"},
		{"jitter +Inf", func(c *tenure.Config) { c.Jitter = math.Inf(1) }, "Config.Jitter", "+Inf"},
		{"retry interval > TTL", func(c *tenure.Config) { c.RetryInterval = 1000 * time.Hour }, "Config.RetryInterval", "1000h0m0s"},
		{"zero renew deadline", func(c *tenure.Config) { c.RenewDeadline = 0 }, "Config.RenewDeadline", "0s"},
		{"renew deadline = TTL", func(c *tenure.Config) { c.RenewDeadline = c.TTL }, "Config.RenewDeadline", "15s"},
		{"renew deadline > TTL", func(c *tenure.Config) { c.RenewDeadline = 20 * time.Second }, "Config.RenewDeadline", "20s"},
		{"jitter < 1", func(c *tenure.Config) { c.Jitter = 0.5 }, "Config.Jitter", "0.5"},
		{"zero renew interval", func(c *tenure.Config) { c.RenewInterval = 0 }, "Config.RenewInterval", "0s"},
		{"renew interval × jitter ≥ deadline", func(c *tenure.Config) { c.RenewInterval = 9 * time.Second }, "Config.RenewInterval", "9s"},
		{"zero retry interval", func(c *tenure.Config) { c.RetryInterval = 0 }, "Config.RetryInterval", "0s"},
		{"negative retry interval", func(c *tenure.Config) { c.RetryInterval = -time.Millisecond }, "Config.RetryInterval", "-1ms"},
		{"zero request timeout", func(c *tenure.Config) { c.RequestTimeout = 0 }, "Config.RequestTimeout", "0s"},
		{"request timeout > deadline", func(c *tenure.Config) { c.RequestTimeout = 11 * time.Second }, "Config.RequestTimeout", "11s"},
		{"negative stall timeout", func(c *tenure.Config) { c.StallTimeout = -time.Second }, "Config.StallTimeout", "-1s"},
		{"negative stop timeout", func(c *tenure.Config) { c.StopTimeout = -2 * time.Second }, "Config.StopTimeout", "-2s"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cfg := valid()
			c.edit(&cfg)
			err := cfg.Validate()
			if !errors.Is(err, tenure.ErrInvalid) {
				t.Fatalf("Validate = %v, want an error wrapping ErrInvalid", err)
			}
			if msg := err.Error(); !strings.Contains(msg, c.field) || !strings.Contains(msg, c.value) {
				t.Errorf("message %q does not name %s and its value %s", msg, c.field, c.value)
			}
			// New validates what it will use: the same config is refused
			// unless the broken field is one WithDefaults fills in.
			if _, nerr := tenure.New(cfg); nerr == nil && cfg.WithDefaults().Validate() != nil {
				t.Errorf("New accepted a config whose defaults do not validate")
			}
		})
	}
}

func TestConfigDefaultsValidate(t *testing.T) {
	for _, ttl := range []time.Duration{tenure.MinTTL, time.Second, tenure.DefaultTTL, time.Minute, tenure.MaxTTL} {
		c := tenure.Config{Store: memory.New(nil), Key: "job", Identity: "a", TTL: ttl}.WithDefaults()
		if err := c.Validate(); err != nil {
			t.Errorf("defaults for TTL %s: %v", ttl, err)
		}
		if c.RenewDeadline >= c.TTL || c.RequestTimeout > c.RenewDeadline || c.StopTimeout != c.TTL-c.RenewDeadline {
			t.Errorf("defaults for TTL %s break the timing rules: %+v", ttl, c)
		}
	}
	c := tenure.Config{Store: memory.New(nil), Key: "job", Identity: "a"}.WithDefaults()
	if c.TTL != tenure.DefaultTTL || c.Jitter != tenure.DefaultJitter || c.Clock == nil || c.Logger == nil || c.Rand == nil {
		t.Errorf("zero config defaults: %+v", c)
	}
	if _, err := tenure.New(tenure.Config{Store: memory.New(nil), Key: "job", Identity: "a"}); err != nil {
		t.Errorf("New with only the required fields: %v", err)
	}
	// Fields set explicitly survive WithDefaults.
	c = tenure.Config{TTL: 9 * time.Second, RenewDeadline: 5 * time.Second, Jitter: 1.1}.WithDefaults()
	if c.RenewDeadline != 5*time.Second || c.Jitter != 1.1 || c.RenewInterval != 3*time.Second {
		t.Errorf("WithDefaults overwrote set fields: %+v", c)
	}
}

// TestConfigExtremeTTLFromDefaults: a TTL near the top of time.Duration is
// refused for what it is. Before the bounds, TTL*2/3 overflowed and
// WithDefaults produced a negative renew deadline.
func TestConfigExtremeTTLFromDefaults(t *testing.T) {
	for _, ttl := range []time.Duration{2562047 * time.Hour, math.MaxInt64, math.MaxInt64 / 2, math.MaxInt64/2 + 1, tenure.MaxTTL} {
		c := tenure.Config{Store: memory.New(nil), Key: "job", Identity: "a", TTL: ttl}.WithDefaults()
		for name, d := range map[string]time.Duration{"RenewDeadline": c.RenewDeadline, "RenewInterval": c.RenewInterval,
			"RetryInterval": c.RetryInterval, "RequestTimeout": c.RequestTimeout, "StopTimeout": c.StopTimeout} {
			if d <= 0 || d >= ttl {
				t.Errorf("TTL %s: default %s = %s, want in (0, TTL)", ttl, name, d)
			}
		}
		err := c.Validate()
		if ttl > tenure.MaxTTL && (err == nil || !strings.Contains(err.Error(), "Config.TTL")) {
			t.Errorf("TTL %s: Validate = %v, want an error naming Config.TTL", ttl, err)
		}
		if ttl <= tenure.MaxTTL && err != nil {
			t.Errorf("TTL %s: %v", ttl, err)
		}
	}
}

// rangedStore is a store that accepts only 15 to 60 s, like Azure leases.
type rangedStore struct{ tenure.Store }

func (rangedStore) TTLRange() (time.Duration, time.Duration) { return 15 * time.Second, time.Minute }

func TestConfigStoreTTLRange(t *testing.T) {
	st := rangedStore{memory.New(nil)}
	for ttl, ok := range map[time.Duration]bool{10 * time.Second: false, 15 * time.Second: true, time.Minute: true, 61 * time.Second: false} {
		err := tenure.Config{Store: st, Key: "job", Identity: "a", TTL: ttl}.WithDefaults().Validate()
		if ok != (err == nil) {
			t.Errorf("TTL %s on a 15s..1m store: %v", ttl, err)
		}
		if err != nil && !strings.Contains(err.Error(), "from 15s to 1m0s for this store") {
			t.Errorf("TTL %s: %q does not name the store's range", ttl, err)
		}
	}
	if lo, hi := tenure.TTLBounds(nil); lo != tenure.MinTTL || hi != tenure.MaxTTL {
		t.Errorf("TTLBounds(nil) = %s, %s", lo, hi)
	}
}
