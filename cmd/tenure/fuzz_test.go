package main

import (
	"bytes"
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/storetest"
)

// sideEffects reports whether raw names a store whose opening changes
// the machine (the local store creates its directory, a peer binds ports):
// the fuzzers leave those alone.
func sideEffects(raw string) bool {
	u, err := url.Parse(strings.TrimSpace(raw))
	return err == nil && (u.Scheme == "file" || u.Scheme == "peer")
}

// cancelled is a context that is already done, so every store gives up at
// its first request instead of dialling fuzzed hosts.
func cancelled() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

// checkOutput fails t unless a command's result is one of the documented
// exit codes with, on failure, exactly one "tenure: " line on stderr.
func checkOutput(t *testing.T, args []string, code int, stderr string) {
	t.Helper()
	switch code {
	case exitOK, exitFree:
	case exitRuntime, exitUsage:
		if !strings.HasPrefix(stderr, "tenure: ") || strings.Count(stderr, "\n") != 1 {
			t.Fatalf("%q: exit %d with stderr %q: want one \"tenure: \" line", args, code, stderr)
		}
	default:
		t.Fatalf("%q: exit code %d", args, code)
	}
}

// FuzzCLIStoreSecret gives `tenure status`, `tenure watch` and the
// `tenure run` command line a store URL with a secret in a secret
// position, by --store, by --store-file and by $TENURE_STORE, and checks
// that nothing printed ever contains the secret, that no input panics,
// and that failures are one line with a documented exit code.
func FuzzCLIStoreSecret(f *testing.F) {
	f.Setenv("XDG_STATE_HOME", f.TempDir())
	for _, s := range storetest.SecretSeeds("redis", "rediss", "postgres", "etcd", "zk", "azblob", "memory", "nope", "") {
		f.Add(s.Form, s.Scheme, s.User, s.Host, s.Path, s.Extra)
	}
	f.Fuzz(func(t *testing.T, form uint8, scheme, user, host, path, extra string) {
		raw := storetest.SecretURL(form, scheme, user, host, path, extra)
		if sideEffects(raw) {
			t.Skip()
		}
		file := filepath.Join(t.TempDir(), "store")
		if err := os.WriteFile(file, []byte(raw+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, args := range [][]string{
			{"status", "--store", raw, "--key", "job"},
			{"status", "--store-file", file, "--key", "job", "--json"},
			{"watch", "--store", raw, "--key", "job"},
		} {
			var stdout, stderr bytes.Buffer
			code := run(cancelled(), args, &stdout, &stderr)
			storetest.NoSecret(t, strings.Join(args, " "), stdout.String(), stderr.String())
			checkOutput(t, args, code, stderr.String())
		}
		os.Setenv(envStore, raw)
		var stdout, stderr bytes.Buffer
		code := run(cancelled(), []string{"status", "--key", "job"}, &stdout, &stderr)
		os.Unsetenv(envStore)
		storetest.NoSecret(t, "TENURE_STORE="+raw, stdout.String(), stderr.String())
		checkOutput(t, []string{"status"}, code, stderr.String())
		// tenure run's command line, short of opening the store.
		stdout.Reset()
		stderr.Reset()
		_, code, done := parseRun([]string{"--store", raw, "--key", "job", "--", "true"}, &stdout, &stderr)
		storetest.NoSecret(t, "run --store "+raw, stdout.String(), stderr.String())
		if done {
			checkOutput(t, []string{"run"}, code, stderr.String())
		}
	})
}

// FuzzCLIFlags feeds arbitrary command lines (arguments separated by NUL)
// to status, watch and the parser of run: no panic, a documented exit
// code, one line on failure.
func FuzzCLIFlags(f *testing.F) {
	f.Setenv("XDG_STATE_HOME", f.TempDir())
	unsetEnv(f, envStore)
	for _, seed := range []string{
		"--key\x00job",
		"--key\x00job\x00--ttl\x001ms\x00--\x00true",
		"--key\x00job\x00--ttl\x002562047h\x00--grace\x002562047h\x00--\x00true",
		"--key\x00job\x00--ttl\x001ns",
		"--store\x00memory://x\x00--key\x00job\x00--json",
		"--store\x00host=db password=hunter2\x00--key\x00job",
		"--store-file\x00/nonexistent\x00--key\x00job",
		"--store\x00a\x00--store-file\x00b\x00--key\x00job",
		"-ttl=-1s\x00-key=a\x01b",
		"--id\x00" + strings.Repeat("x", 300) + "\x00--key\x00k\x00--\x00true",
		"--grace\x00-1s\x00--key\x00k\x00--\x00true",
		"--json=maybe",
		"-h",
	} {
		for cmd := range uint8(3) {
			f.Add(cmd, seed)
		}
	}
	f.Fuzz(func(t *testing.T, cmd uint8, line string) {
		args := strings.Split(line, "\x00")
		for _, a := range args {
			if sideEffects(strings.TrimPrefix(strings.TrimPrefix(a, "-store="), "--store=")) || strings.Contains(strings.ToLower(a), "file:") || strings.Contains(strings.ToLower(a), "peer:") {
				t.Skip()
			}
		}
		var stdout, stderr bytes.Buffer
		switch cmd % 3 {
		case 0:
			args = append([]string{"status"}, args...)
			checkOutput(t, args, run(cancelled(), args, &stdout, &stderr), stderr.String())
		case 1:
			args = append([]string{"watch"}, args...)
			checkOutput(t, args, run(cancelled(), args, &stdout, &stderr), stderr.String())
		case 2:
			if _, code, done := parseRun(args, &stdout, &stderr); done {
				checkOutput(t, args, code, stderr.String())
			}
		}
	})
}
