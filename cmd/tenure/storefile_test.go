package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// writeStoreFile writes content to a new file of the given mode.
func writeStoreFile(t *testing.T, content string, mode os.FileMode) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "store-url")
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestStoreFileAndEnv: --store-file and $TENURE_STORE name the store for
// every subcommand that takes --store, so a password need not be on the
// command line, where ps shows it to every user.
func TestStoreFileAndEnv(t *testing.T) {
	unsetEnv(t, envStore)
	dir := t.TempDir()
	good := writeStoreFile(t, "file://"+dir+"\n", 0o600)
	for _, tc := range []struct {
		name string
		args []string
		env  string
	}{
		{"status --store-file", []string{"status", "--store-file", good, "--key", "job"}, ""},
		{"watch --store-file", []string{"watch", "--store-file", good, "--key", "job", "-h"}, ""},
		{"status $TENURE_STORE", []string{"status", "--key", "job"}, "file://" + dir},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(envStore, tc.env)
			var stdout, stderr bytes.Buffer
			code := runInProcess(tc.args, &stdout, &stderr)
			if tc.args[len(tc.args)-1] == "-h" {
				if code != exitOK || !strings.Contains(stdout.String(), "-store-file") {
					t.Errorf("help: code %d, %q: want --store-file described", code, stdout.String())
				}
				return
			}
			if code != exitFree || !strings.Contains(stdout.String(), "never granted") {
				t.Errorf("code %d, stdout %q, stderr %q: want the file store's free key", code, stdout.String(), stderr.String())
			}
		})
	}
	// run, end to end: the command runs on the store the file names, and
	// status through the environment sees the term it was granted.
	var stdout, stderr bytes.Buffer
	if code := runInProcess([]string{"run", "--store-file", good, "--key", "job", "--quiet", "--", "true"}, &stdout, &stderr); code != exitOK {
		t.Fatalf("run --store-file: code %d, stderr %q", code, stderr.String())
	}
	t.Setenv(envStore, "file://"+dir)
	stdout.Reset()
	if code := runInProcess([]string{"status", "--key", "job"}, &stdout, &stderr); code != exitFree || !strings.Contains(stdout.String(), "last term 1") {
		t.Fatalf("status via %s after run: code %d, %q", envStore, code, stdout.String())
	}
}

// TestStoreSourcePrecedence: --store, then --store-file, then
// $TENURE_STORE; --store with --store-file is a usage error.
func TestStoreSourcePrecedence(t *testing.T) {
	file := writeStoreFile(t, "fromfile://x", 0o600)
	status := func(args ...string) (int, string) {
		var stdout, stderr bytes.Buffer
		code := runInProcess(append([]string{"status", "--key", "job"}, args...), &stdout, &stderr)
		return code, stderr.String()
	}
	t.Setenv(envStore, "fromenv://x")
	if code, e := status(); code != exitUsage || !strings.Contains(e, `"fromenv"`) || !strings.Contains(e, "(the store URL came from $TENURE_STORE)") {
		t.Errorf("env only: %d %q", code, e)
	}
	if code, e := status("--store-file", file); code != exitUsage || !strings.Contains(e, `"fromfile"`) || !strings.Contains(e, "(the store URL came from --store-file "+file+")") {
		t.Errorf("file over env: %d %q", code, e)
	}
	if code, e := status("--store", "fromflag://x"); code != exitUsage || !strings.Contains(e, `"fromflag"`) {
		t.Errorf("flag over env: %d %q", code, e)
	}
	if code, e := status("--store", "fromflag://x", "--store-file", file); code != exitUsage || !strings.Contains(e, "--store and --store-file are both given") {
		t.Errorf("flag and file: %d %q", code, e)
	}
}

// TestStoreFileRefused: a store file others can read, or that is not one
// line of a regular file, is refused with one line naming the problem and
// never its contents; the command does nothing.
func TestStoreFileRefused(t *testing.T) {
	unsetEnv(t, envStore)
	const secret = "redis://:hunter2@127.0.0.1:1/0"
	fifo := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"group-readable", writeStoreFile(t, secret, 0o640), "can be read or written by others (mode 0640): it holds credentials; run chmod 600"},
		{"world-readable", writeStoreFile(t, secret, 0o644), "run chmod 600"},
		{"group-writable", writeStoreFile(t, secret, 0o620), "(mode 0620)"},
		{"missing", filepath.Join(t.TempDir(), "none"), "no such file or directory"},
		{"directory", t.TempDir(), "is not a regular file"},
		{"fifo", fifo, "is not a regular file"},
		{"empty", writeStoreFile(t, "\n", 0o600), "is empty"},
		{"two lines", writeStoreFile(t, secret+"\n"+secret+"\n", 0o600), "holds more than one line"},
		{"too long", writeStoreFile(t, strings.Repeat("x", maxStoreFile+1), 0o600), "a store URL is at most"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for _, args := range [][]string{
				{"status", "--store-file", tc.path, "--key", "job"},
				{"watch", "--store-file", tc.path, "--key", "job"},
				{"run", "--store-file", tc.path, "--key", "job", "--", "true"},
			} {
				var stdout, stderr bytes.Buffer
				code := runInProcess(args, &stdout, &stderr)
				line := stderr.String()
				if code != exitUsage || !strings.Contains(line, tc.want) || strings.Count(line, "\n") != 1 || strings.Contains(line, "hunter2") || stdout.Len() != 0 {
					t.Errorf("%s: code %d, stderr %q: want exit 2 and one line saying %q", args[0], code, line, tc.want)
				}
			}
		})
	}
}

// TestStoreFileSecretNotPrinted: a store named by file or environment that
// fails at run time is described without its secret, and says where its
// URL came from.
func TestStoreFileSecretNotPrinted(t *testing.T) {
	const u = "redis://hunter2@127.0.0.1:1/0"
	file := writeStoreFile(t, u+"\n", 0o600)
	for _, tc := range []struct {
		args []string
		env  string
		from string
	}{
		{[]string{"status", "--store-file", file, "--key", "job"}, "", "cannot read key"},
		{[]string{"status", "--key", "job"}, u, "cannot read key"},
		{[]string{"status", "--key", "job"}, "host=db password=hunter2", "tenure: invalid argument: store URL is a keyword=value list"},
	} {
		t.Setenv(envStore, tc.env)
		var stdout, stderr bytes.Buffer
		code := runInProcess(tc.args, &stdout, &stderr)
		if code == exitOK || strings.Contains(stderr.String(), "hunter2") || !strings.Contains(stderr.String(), tc.from) {
			t.Errorf("%v with %s=%q: code %d, stderr %q", tc.args, envStore, tc.env, code, stderr.String())
		}
	}
}
