package main

import (
	"bytes"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersion: `tenure version` and `tenure --version` print the same one
// line, naming the toolchain and platform; an argument is a usage error.
func TestVersion(t *testing.T) {
	want := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	var lines []string
	for _, arg := range []string{"version", "--version", "-version"} {
		r := runTenure(t, arg)
		out := strings.TrimSuffix(r.stdout, "\n")
		if r.code != exitOK || r.stderr != "" || strings.Contains(out, "\n") || !strings.HasPrefix(out, "tenure ") || !strings.Contains(out, want) {
			t.Fatalf("tenure %s: exit %d, stdout %q, stderr %q; want one line naming %s", arg, r.code, r.stdout, r.stderr, want)
		}
		lines = append(lines, out)
	}
	if lines[0] != lines[1] || lines[1] != lines[2] {
		t.Errorf("the version lines differ: %q", lines)
	}
	if r := runTenure(t, "version", "extra"); r.code != exitUsage || !strings.Contains(r.stderr, `unexpected argument "extra"`) {
		t.Errorf("tenure version extra: exit %d, stderr %q; want %d and the argument named", r.code, r.stderr, exitUsage)
	}
}

func TestVersionLine(t *testing.T) {
	platform := runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
	build := func(version string, settings ...string) *debug.BuildInfo {
		info := &debug.BuildInfo{Main: debug.Module{Path: "github.com/tenurehq/tenure", Version: version}}
		for i := 0; i+1 < len(settings); i += 2 {
			info.Settings = append(info.Settings, debug.BuildSetting{Key: settings[i], Value: settings[i+1]})
		}
		return info
	}
	for _, c := range []struct {
		info *debug.BuildInfo
		want string
	}{
		{nil, "tenure (unknown) (" + platform + ")"},
		{build("v1.2.3"), "tenure v1.2.3 (" + platform + ")"},
		{build("(devel)", "vcs.revision", "e94d96eb4222ae6b5373d3cab18c84a4a6ec4c2d", "vcs.modified", "false"),
			"tenure (devel) (rev e94d96eb4222, " + platform + ")"},
		{build("v1.2.4-0.20261124044400-e94d96eb4222+dirty", "vcs.revision", "e94d96eb4222ae6b", "vcs.modified", "true"),
			"tenure v1.2.4-0.20261124044400-e94d96eb4222+dirty (rev e94d96eb4222, modified, " + platform + ")"},
		{build("(devel)", "vcs.revision", "abc"), "tenure (devel) (rev abc, " + platform + ")"},
		{build("(devel)", "vcs.modified", "true"), "tenure (devel) (" + platform + ")"},
	} {
		if got := versionLine(c.info); got != c.want {
			t.Errorf("versionLine(%+v) = %q, want %q", c.info, got, c.want)
		}
	}
	var out bytes.Buffer
	if code := runInProcess([]string{"version", "-h"}, &out, &out); code != exitOK || !strings.Contains(out.String(), "Usage: tenure version") {
		t.Errorf("tenure version -h: exit %d, %q", code, out.String())
	}
}
