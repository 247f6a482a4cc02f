package tenure_test

import (
	"os/exec"
	"strings"
	"testing"
)

// goList returns the dependencies of a package pattern, per go list -deps.
func goList(t *testing.T, args ...string) []string {
	t.Helper()
	out, err := exec.Command("go", append([]string{"list"}, args...)...).Output()
	if err != nil {
		t.Skipf("go list unavailable: %v", err)
	}
	return strings.Fields(string(out))
}

// The root package is what every importer pays for: standard library only.
func TestRootImportsOnlyTheStandardLibrary(t *testing.T) {
	for _, dep := range goList(t, "-deps", ".") {
		if dep == "github.com/tenurehq/tenure" {
			continue
		}
		if first, _, _ := strings.Cut(dep, "/"); strings.Contains(first, ".") {
			t.Errorf("the root package depends on %s; it must use the standard library only", dep)
		}
	}
}

// A store package must not drag in another store's SDK.
func TestStoresDoNotImportEachOther(t *testing.T) {
	stores := goList(t, "./store/...")
	for _, s := range stores {
		for _, dep := range goList(t, "-deps", s) {
			if dep != s && strings.HasPrefix(dep, "github.com/tenurehq/tenure/store/") {
				t.Errorf("%s imports %s; stores must stay independent", s, dep)
			}
		}
	}
}
