package tenure_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
)

func TestKillGrace(t *testing.T) {
	c := tenure.Config{TTL: 3 * time.Second}.WithDefaults() // margin 1s
	for _, tc := range []struct {
		grace, want time.Duration
		ok          bool
	}{
		{0, 500 * time.Millisecond, true},
		{999 * time.Millisecond, 999 * time.Millisecond, true},
		{time.Second, 0, false},
		{-time.Nanosecond, 0, false},
		{1 << 62, 0, false},
	} {
		got, err := c.KillGrace(tc.grace)
		if tc.ok != (err == nil) || got != tc.want {
			t.Errorf("KillGrace(%s) = %s, %v; want %s, ok %v", tc.grace, got, err, tc.want, tc.ok)
		}
		if err != nil && !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("KillGrace(%s) error %v does not match ErrInvalid", tc.grace, err)
		}
	}
	long := tenure.Config{TTL: time.Hour}.WithDefaults()
	if g, _ := long.KillGrace(0); g != tenure.DefaultKillGrace {
		t.Errorf("default grace for a 1h TTL = %s, want %s", g, tenure.DefaultKillGrace)
	}
	if m := c.Margin(); m != time.Second {
		t.Errorf("Margin of a 3s TTL = %s, want 1s", m)
	}
}
