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

// A bad key, identity or value is quoted in its error, but a long one
// used to be quoted whole: up to 1,024 bytes, each control byte four
// characters once escaped, on one log line.
func TestCheckErrorsQuoteALongNameShortly(t *testing.T) {
	for _, err := range []error{
		tenure.CheckKey(strings.Repeat("\x00", tenure.MaxKeyLen)),
		tenure.CheckValue(strings.Repeat("\x01", tenure.MaxValueLen)),
		tenure.CheckKey(strings.Repeat("\xff", tenure.MaxKeyLen)),
	} {
		if !errors.Is(err, tenure.ErrInvalid) || len(err.Error()) > 200 {
			t.Errorf("%d-byte error %.120q..., want an ErrInvalid of at most 200 bytes", len(err.Error()), err)
		}
	}
	if err := tenure.CheckKey("job\n"); err == nil || !strings.Contains(err.Error(), `"job\n"`) {
		t.Errorf("CheckKey(job\\n) = %v, want the short key quoted whole", err)
	}
}
