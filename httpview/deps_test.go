package httpview

import (
	"os/exec"
	"strings"
	"testing"
)

// httpview is mounted by every program that serves a view, so it stays
// light: the standard library and tenure only. Metrics libraries plug in
// through Options.Metrics.
func TestImportsOnlyTheStandardLibraryAndTenure(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	for _, dep := range strings.Fields(string(out)) {
		first, _, _ := strings.Cut(dep, "/")
		if strings.Contains(first, ".") && !strings.HasPrefix(dep, "github.com/tenurehq/tenure") {
			t.Errorf("httpview depends on %s", dep)
		}
	}
}
