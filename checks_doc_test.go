package tenure_test

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
)

// The limits CheckKey, CheckValue and CheckClaim promise, at their edges.
func TestCheckFunctionsKeepTheirDocumentedLimits(t *testing.T) {
	valid := []struct {
		name string
		err  error
	}{
		{"key of MaxKeyLen bytes", tenure.CheckKey(strings.Repeat("k", tenure.MaxKeyLen))},
		{"empty value", tenure.CheckValue("")},
		{"value of MaxValueLen bytes", tenure.CheckValue(strings.Repeat("v", tenure.MaxValueLen))},
		{"UTF-8 value", tenure.CheckValue("höst:8080")},
		{"claim", tenure.CheckClaim("k", tenure.Claim{Identity: "a", TTL: tenure.MinTTL, Value: "v"})},
	}
	for _, c := range valid {
		if c.err != nil {
			t.Errorf("%s: %v, want valid", c.name, c.err)
		}
	}
	invalid := []struct {
		name string
		err  error
	}{
		{"empty key", tenure.CheckKey("")},
		{"key over MaxKeyLen", tenure.CheckKey(strings.Repeat("k", tenure.MaxKeyLen+1))},
		{"key with a newline", tenure.CheckKey("a\nb")},
		{"key with DEL", tenure.CheckKey("a\x7fb")},
		{"key not UTF-8", tenure.CheckKey("a\xffb")},
		{"value over MaxValueLen", tenure.CheckValue(strings.Repeat("v", tenure.MaxValueLen+1))},
		{"value with a C1 control", tenure.CheckValue("a\u0085b")},
		{"claim without identity", tenure.CheckClaim("k", tenure.Claim{TTL: tenure.MinTTL})},
		{"claim with TTL 0", tenure.CheckClaim("k", tenure.Claim{Identity: "a"})},
		{"claim with a bad value", tenure.CheckClaim("k", tenure.Claim{Identity: "a", TTL: tenure.MinTTL, Value: "\x00"})},
	}
	for _, c := range invalid {
		if !errors.Is(c.err, tenure.ErrInvalid) {
			t.Errorf("%s: %v, want an error wrapping ErrInvalid", c.name, c.err)
		}
	}
	if s := tenure.Schemes(); !slices.IsSorted(s) || !slices.Contains(s, "memory") {
		t.Errorf("Schemes() = %q, want sorted and listing memory (registered by an import of this test)", s)
	}
}
