package tenure_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// derivedKeys are keys that leadership control keeps beside a key (base,
// what), and keys that only look alike (base ""), which are keys of their
// own.
var derivedKeys = []struct{ key, base, what string }{
	{"job~tenure-control", "job", "the control key"},
	{"job~tenure-prefer", "job", "the preference key"},
	{"job~tenure-candidate-03", "job", "candidate slot 03"},
	{"job~tenure-candidate-00", "job", "candidate slot 00"},
	{fmt.Sprintf("job%s%02d", tenure.CandidateSuffix, tenure.CandidateSlots-1), "job", fmt.Sprintf("candidate slot %02d", tenure.CandidateSlots-1)},
	{"a~tenure-control~tenure-prefer", "a~tenure-control", "the preference key"},
	{"job~tenure-candidate-3", "", ""},
	{fmt.Sprintf("job%s%02d", tenure.CandidateSuffix, tenure.CandidateSlots), "", ""},
	{"job~tenure-candidate-ab", "", ""},
	{"job~tenure-candidate-+1", "", ""},
	{"job~tenure-candidate-", "", ""},
	{"job~tenure-prefer-x", "", ""},
	{"~tenure-control", "", ""},
	{"~tenure-prefer", "", ""},
	{"~tenure-candidate-03", "", ""},
	{"job", "", ""},
}

// TestDerivedKeyIsRefused: a key that leadership control keeps beside
// another key is refused, with ErrInvalid naming the key and its base, by
// Config.Validate (with or without Control), New, RequestStepDown and
// Prefer; keys that only look alike stay valid. Before, only the length was
// checked: an elector could hold job's control key or a candidate slot as a
// lease beside job's electors, and Prefer on job~tenure-prefer held
// job~tenure-prefer~tenure-prefer, which no elector reads.
func TestDerivedKeyIsRefused(t *testing.T) {
	for _, tc := range derivedKeys {
		t.Run(tc.key, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				check := func(what string, err error, valid error) {
					t.Helper()
					if tc.base == "" {
						if errors.Is(err, tenure.ErrInvalid) || (valid != nil && !errors.Is(err, valid)) {
							t.Errorf("%s of %q: %v; want it accepted (%v)", what, tc.key, err, valid)
						}
						return
					}
					want := fmt.Sprintf("%q is %s of %q", tc.key, tc.what, tc.base)
					if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
						t.Errorf("%s of %q: %v; want ErrInvalid saying %s", what, tc.key, err, want)
					}
				}
				store := memory.New(nil)
				cfg := config(store, "a")
				cfg.Key = tc.key
				check("Config.Validate", cfg.WithDefaults().Validate(), nil)
				_, err := tenure.New(cfg)
				check("New", err, nil)
				cfg.Control = &tenure.Control{Priority: 1}
				check("Config.Validate with Control", cfg.WithDefaults().Validate(), nil)
				_, err = tenure.RequestStepDown(context.Background(), store, tc.key, tenure.StepDownRequest{})
				check("RequestStepDown", err, tenure.ErrNoLeader)
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err = tenure.Prefer(ctx, store, tc.key, "op", ttl, tenure.Preference{Holder: "b", Logger: slog.New(slog.DiscardHandler)})
				check("Prefer", err, context.DeadlineExceeded)
			})
		})
	}
}

// TestDerivedKeyReadIsRefused: the reads that derive further keys from
// their key, Candidates and ReadPreference, refuse a derived key with
// ErrInvalid naming it and its base, before reading anything; keys that
// only look alike are read as any key. Before, Candidates of
// job~tenure-prefer read job~tenure-prefer~tenure-candidate-NN, which
// nobody writes, and answered "none" without a word. A plain Get of a
// derived key stays allowed: it shows the raw record.
func TestDerivedKeyReadIsRefused(t *testing.T) {
	ctx := context.Background()
	store := memory.New(nil)
	for _, tc := range derivedKeys {
		t.Run(tc.key, func(t *testing.T) {
			check := func(what string, err error) {
				t.Helper()
				if tc.base == "" {
					if err != nil {
						t.Errorf("%s of %q: %v; want it read", what, tc.key, err)
					}
					return
				}
				want := fmt.Sprintf("%q is %s of %q, reserved by leadership control; use %q", tc.key, tc.what, tc.base, tc.base)
				if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
					t.Errorf("%s of %q: %v; want ErrInvalid saying %s", what, tc.key, err, want)
				}
			}
			_, err := tenure.Candidates(ctx, store, tc.key)
			check("Candidates", err)
			_, _, err = tenure.ReadPreference(ctx, store, tc.key)
			check("ReadPreference", err)
			if _, err := store.Get(ctx, tc.key); err != nil {
				t.Errorf("Get of %q: %v; want the raw record", tc.key, err)
			}
		})
	}
}
