package shard_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/shard"
	"github.com/tenurehq/tenure/store/memory"
)

// TestNewRejectsDerivedLeaseNames: a key or member whose lease would be a
// key leadership control derives from another ([tenure.BaseKey]) is
// refused by New, naming it, as every elector would refuse it. Before,
// New accepted it and Run failed later, after the member had gone live.
func TestNewRejectsDerivedLeaseNames(t *testing.T) {
	for _, tc := range []struct {
		name          string
		members, keys []string
		want          string
	}{
		{"key", []string{"a"}, []string{"0", "x" + tenure.ControlSuffix}, `Config.Keys: key "x~tenure-control": `},
		{"candidate slot", []string{"a"}, []string{"y" + tenure.CandidateSuffix + "03"}, `Config.Keys: key "y~tenure-candidate-03": `},
		{"member", []string{"a", "b" + tenure.ControlSuffix}, []string{"0"}, `Config.Members: member "b~tenure-control": `},
	} {
		_, err := shard.New(shard.Config{Store: memory.New(nil), Group: "g", Identity: "a", Members: tc.members, Keys: tc.keys})
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "reserved by leadership control") {
			t.Errorf("%s: New = %v, want an ErrInvalid with %q", tc.name, err, tc.want)
		}
	}
}
