//go:build linux

package local

import (
	"strings"
	"testing"
)

func TestBaseName(t *testing.T) {
	cases := map[string]string{
		"simple":                 "k-simple",
		"a/b c":                  "k-a%2Fb%20c",
		"..":                     "k-..",
		"%2F":                    "k-%252F",
		"é":                      "k-%C3%A9",
		"h-0123":                 "k-h-0123",
		"a.holder.7":             "k-a.holder.7",
		strings.Repeat("x", 200): "h-",
	}
	seen := map[string]string{}
	for key, want := range cases {
		got := baseName(key)
		if !strings.HasPrefix(got, want) || (want != "h-" && got != want) {
			t.Errorf("baseName(%q) = %q, want %q", key, got, want)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("keys %q and %q share the name %q", key, other, got)
		}
		seen[got] = key
		if len(got)+len(".holder.18446744073709551615") > 255 {
			t.Errorf("baseName(%q) = %q is too long for a file name", key, got)
		}
	}
	if baseName(strings.Repeat("x", 200)) == baseName(strings.Repeat("x", 201)) {
		t.Error("two long keys share a name")
	}
	if !isHolderName("k-a.holder.7", "k-a") || isHolderName("k-a.holder.7.state", "k-a") ||
		isHolderName("k-a.holder.", "k-a") || isHolderName("k-a.holder.7.lock", "k-a") {
		t.Error("isHolderName accepts another key's file or rejects its own")
	}
}
