package main

import (
	"context"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionCmd prints one line that says which tenure this is, for a bug
// report or a fleet inventory: the module version it was built as (a
// release tag, a pseudo-version, or "(devel)"), the source revision and
// whether the tree had uncommitted changes when the go command stamped
// them, the Go toolchain and the platform. `tenure --version` is the same.
func versionCmd(_ context.Context, args []string, stdout, stderr io.Writer) int {
	fs := newFlagSet("version")
	if code, done := parseFlags(fs, args, versionHelp, stdout, stderr); done {
		return code
	}
	if err := noArgs(fs); err != nil {
		return fail(stderr, err)
	}
	info, _ := debug.ReadBuildInfo()
	fmt.Fprintln(stdout, versionLine(info))
	return exitOK
}

const versionHelp = `Usage: tenure version

Prints one line: the version this binary was built as, its source revision
(with ", modified" if the tree had uncommitted changes), the Go toolchain
and the platform. "tenure --version" is the same.
`

// versionLine formats info, which may be nil (a binary built without
// module support), as "tenure VERSION ([rev REV[, modified], ]GO OS/ARCH)".
func versionLine(info *debug.BuildInfo) string {
	version := "(unknown)"
	var parts []string
	if info != nil {
		version = info.Main.Version
		var modified bool
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				parts = append(parts, "rev "+s.Value[:min(len(s.Value), 12)])
			case "vcs.modified":
				modified = s.Value == "true"
			}
		}
		if modified && len(parts) > 0 {
			parts = append(parts, "modified")
		}
	}
	parts = append(parts, fmt.Sprintf("%s %s/%s", runtime.Version(), runtime.GOOS, runtime.GOARCH))
	return fmt.Sprintf("tenure %s (%s)", version, strings.Join(parts, ", "))
}
