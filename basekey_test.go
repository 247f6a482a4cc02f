package tenure_test

import (
	"testing"

	"github.com/tenurehq/tenure"
)

// TestBaseKey: BaseKey names the base of every key leadership control
// derives, and of no key that only looks alike.
func TestBaseKey(t *testing.T) {
	for _, tc := range derivedKeys {
		base, what, ok := tenure.BaseKey(tc.key)
		if base != tc.base || what != tc.what || ok != (tc.base != "") {
			t.Errorf("BaseKey(%q) = %q, %q, %t; want %q, %q, %t", tc.key, base, what, ok, tc.base, tc.what, tc.base != "")
		}
	}
	derived := []string{tenure.ControlKey("job"), tenure.PreferKey("job")}
	for i := range tenure.CandidateSlots {
		derived = append(derived, tenure.CandidateKeyForTest("job", i))
	}
	for _, k := range derived {
		if base, _, ok := tenure.BaseKey(k); !ok || base != "job" {
			t.Errorf("BaseKey(%q) = %q, %t; want \"job\", true", k, base, ok)
		}
	}
}
