package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode"

	"github.com/tenurehq/tenure/internal/testserver"
)

// TestBadInput: every bad command line or unusable store gives one line on
// stderr, "tenure: ...", the documented exit code, and consumes no term.
func TestBadInput(t *testing.T) {
	// A case that wrongly falls back to the default local store must not
	// write to the user's.
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	dir := t.TempDir()
	store := "file://" + dir
	notDir := filepath.Join(t.TempDir(), "plain-file")
	if err := os.WriteFile(notDir, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	corrupt := t.TempDir()
	if err := os.WriteFile(filepath.Join(corrupt, "k-job.state"), []byte("not a state file"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := append(badFlagCases(store, corrupt), badStoreCases(store, notDir, corrupt)...)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) { checkRefused(t, tc.args, tc.code, tc.want) })
	}
	// None of it campaigned: the key was never granted.
	var stdout, stderr bytes.Buffer
	if code := runInProcess([]string{"status", "--store", store, "--key", "job"}, &stdout, &stderr); code != exitFree || !strings.Contains(stdout.String(), "never granted") {
		t.Fatalf("after the bad inputs: status %d %q %q; want a never-granted key", code, stdout.String(), stderr.String())
	}
}

// badInput is a command line that must be refused: its exit code, and
// what its one line on stderr says.
type badInput struct {
	name string
	args []string
	code int
	want string // in the stderr line
}

// badFlagCases are TestBadInput's bad flags, arguments and commands, on
// the local store at store (corrupt: one whose state file is corrupt, for
// a flag that must be refused before the store is read).
func badFlagCases(store, corrupt string) []badInput {
	run := []string{"run", "--store", store, "--key", "job"}
	return []badInput{
		{"no command", nil, exitUsage, "no command given"},
		{"unknown command", []string{"elect"}, exitUsage, `unknown command "elect"`},
		{"unknown flag", append(run, "--bogus", "--", "true"), exitUsage, "flag provided but not defined: -bogus"},
		{"bad duration", append(run, "--ttl", "ten", "--", "true"), exitUsage, `invalid value "ten" for flag -ttl`},
		{"zero ttl", append(run, "--ttl", "0s", "--", "true"), exitUsage, "--ttl 0s must be positive"},
		{"ttl 1ns", append(run, "--ttl", "1ns", "--", "true"), exitUsage, "--ttl 1ns is out of range: want 500ms to 24h0m0s"},
		{"ttl 1ms", append(run, "--ttl", "1ms", "--", "true"), exitUsage, "--ttl 1ms is out of range: want 500ms to 24h0m0s"},
		{"ttl under the CLI's minimum", append(run, "--ttl", "200ms", "--", "true"), exitUsage, "--ttl 200ms is out of range: want 500ms to 24h0m0s"},
		{"ttl 2562047h", append(run, "--ttl", "2562047h", "--", "true"), exitUsage, "--ttl 2562047h0m0s is out of range"},
		{"ttl over a day", append(run, "--ttl", "25h", "--", "true"), exitUsage, "--ttl 25h0m0s is out of range"},
		{"grace overflowing", append(run, "--ttl", "3s", "--grace", "2562047h", "--", "true"), exitUsage, "--grace 2562047h0m0s is too long for --ttl 3s"},
		{"demo ttl 1ms", []string{"demo", "--ttl", "1ms"}, exitUsage, "--ttl 1ms is out of range"},
		{"negative grace", append(run, "--grace", "-1s", "--", "true"), exitUsage, "--grace -1s must not be negative"},
		{"negative exec timeout", []string{"watch", "--store", store, "--key", "job", "--exec", "true", "--exec-timeout", "-1s"}, exitUsage, "--exec-timeout -1s must not be negative"},
		{"grace too long", append(run, "--ttl", "3s", "--grace", "1s", "--", "true"), exitUsage, "--grace 1s is too long for --ttl 3s"},
		{"missing key", []string{"run", "--store", store, "--", "true"}, exitUsage, "--key is required"},
		{"bad key", []string{"run", "--store", store, "--key", "a\x01b", "--", "true"}, exitUsage, "control character"},
		{"bad id", append(run, "--id", strings.Repeat("x", 300), "--", "true"), exitUsage, "identity is 300 bytes"},
		{"empty command", run, exitUsage, "no command given"},
		{"empty command after --", append(run, "--"), exitUsage, "no command given"},
		{"command not found", append(run, "--", "no-such-command-tenure-test"), exitUsage, `command "no-such-command-tenure-test" not found`},
		// There, but not a program: not "not found".
		{"command not executable", append(run, "--", corrupt+"/k-job.state"), exitUsage, `command "` + corrupt + `/k-job.state" cannot be run: permission denied`},
		{"command a directory", append(run, "--", corrupt), exitUsage, `command "` + corrupt + `" cannot be run: is a directory`},
		{"corrupt state, status", []string{"status", "--store", "file://" + corrupt, "--key", "job"}, exitRuntime, `cannot read key "job"`},
		{"empty --exec", []string{"watch", "--store", store, "--key", "job", "--exec", " "}, exitUsage, `invalid value " " for flag -exec: it must be a command`},
		{"corrupt state, watch", []string{"watch", "--store", "file://" + corrupt, "--key", "job"}, exitRuntime, `cannot read key "job"`},
		{"status without key", []string{"status", "--store", store}, exitUsage, "--key is required"},
		// "tenure: status: ...", not "tenure: tenure status: ...".
		{"status extra argument", []string{"status", "--store", store, "--key", "job", "extra"}, exitUsage, `tenure: status: unexpected argument "extra"`},
		{"watch extra argument", []string{"watch", "--store", store, "--key", "job", "extra"}, exitUsage, `tenure: watch: unexpected argument "extra"`},
		{"prefer without an ID", []string{"prefer", "--store", store, "--key", "job"}, exitUsage, `tenure: prefer takes one argument`},
		{"prefer --ttl under run's floor", []string{"prefer", "--store", store, "--key", "job", "--ttl", "100ms", "b"}, exitUsage, `--ttl 100ms is out of range: want 500ms to`},
		{"watch bad flag", []string{"watch", "--json=maybe", "--key", "job"}, exitUsage, "invalid boolean value"},
		{"empty --store-file, status", []string{"status", "--store-file=", "--key", "job"}, exitUsage, "--store-file is given but empty"},
		{"escape in a flag's name", []string{"status", "--store", store, "--key", "job", "-\x1b[2J"}, exitUsage, `flag provided but not defined: -\x1b[2J`},
		// --http that no machine can listen on: a bad command line, found
		// before the store is opened.
		{"--http port out of range", append(run, "--http", ":99999", "--", "true"), exitUsage, `--http ":99999": address 99999: invalid port`},
		{"--http unclosed bracket", append(run, "--http", "[::1", "--", "true"), exitUsage, `--http "[::1": address [::1: missing ']' in address`},
		// --exec-timeout bounds --exec's runs: alone it would do nothing.
		{"--exec-timeout without --exec", []string{"watch", "--store", store, "--key", "job", "--exec-timeout", "5s"}, exitUsage, "--exec-timeout 5s is given without --exec"},
		{"--http without a port", []string{"watch", "--store", store, "--key", "job", "--http", "localhost"}, exitUsage, `--http "localhost": address localhost: missing port in address`},
		{"--http with a newline", []string{"watch", "--store", "file://" + corrupt, "--key", "job", "--http", "a\nb:80x"}, exitUsage, `--http "a\nb:80x"`},
		{"escape in --http", append(run, "--http", "\x1b[2J", "--", "true"), exitUsage, `--http "\x1b[2J"`},
		// A stray space names another lease: " job" would have a leader
		// of its own beside "job"'s.
		{"--key with a trailing space", []string{"run", "--store", store, "--key", "job ", "--", "true"}, exitUsage, `--key "job " begins or ends with white space: it would name another lease than "job"`},
		{"--key only a space", []string{"status", "--store", store, "--key", " "}, exitUsage, `--key " " is only white space`},
		// Quoted back as given: the one-line error once folded runs of
		// spaces, and said " " for three.
		{"--key of three spaces", []string{"status", "--store", store, "--key", "   "}, exitUsage, `--key "   " is only white space`},
		{"--key with two spaces inside", []string{"status", "--store", store, "--key", "a  b "}, exitUsage, `--key "a  b " begins or ends with white space: it would name another lease than "a  b"`},
		{"--id with a leading tab", append(run, "--id", "\tweb-0", "--", "true"), exitUsage, `--id "\tweb-0" begins or ends with white space: it would be another identity than "web-0"`},
		{"--group with a space", []string{"shard", "--store", store, "--group", "g ", "--members", "a,b", "--id", "a", "--shards", "1", "--", "true"}, exitUsage, `--group "g " begins or ends with white space: it would name another group than "g"`},
		{"step-down --to a space", []string{"step-down", "--store", store, "--key", "job", "--to", " "}, exitUsage, `--to " " is only white space`},
		{"prefer a padded ID", []string{"prefer", "--store", store, "--key", "job", "web-0 "}, exitUsage, `ID "web-0 " begins or ends with white space`},
		{"step-down --to an unknown ID, nobody leads", []string{"step-down", "--store", store, "--key", "job", "--to", "web-9"}, exitFree, `nobody leads "job"; nothing to step down`},
		{"demo bad candidates", []string{"demo", "--candidates", "1"}, exitUsage, "--candidates 1"},
	}
}

// badStoreCases are TestBadInput's bad store URLs and unusable stores:
// notDir is a plain file, corrupt a directory with a corrupt state file.
func badStoreCases(store, notDir, corrupt string) []badInput {
	return []badInput{
		{"unknown scheme", []string{"run", "--store", "nope://x", "--key", "job", "--", "true"}, exitUsage, `unknown store scheme "nope"`},
		{"libpq keyword string", []string{"status", "--store", "host=db user=app password=hunter2 dbname=app", "--key", "job"}, exitUsage, "store URL is a keyword=value list, not a URL"},
		{"no scheme", []string{"status", "--store", "db.example/x", "--key", "job"}, exitUsage, "store URL has no scheme"},
		{"unparseable URL", []string{"status", "--store", "redis://:hunter2@cache:port", "--key", "job"}, exitUsage, "store URL cannot be parsed: invalid port"},
		// A query url.URL.Query cannot parse loses the parameter it
		// held: the store would quietly use its default table or prefix.
		{"postgres query with a ';'", []string{"status", "--store", "postgres://app:hunter2@127.0.0.1:1/db?tenure_table=a;b", "--key", "job"}, exitUsage, `the postgres URL "postgres://app:xxxxx@127.0.0.1:1/db?tenure_table=a;b" has a query that cannot be parsed`},
		{"redis query with a bad escape", []string{"status", "--store", "redis://:hunter2@127.0.0.1:1/0?tenure_prefix=%zz", "--key", "job"}, exitUsage, `the redis URL "redis://:xxxxx@127.0.0.1:1/0?tenure_prefix=%zz" has a query that cannot be parsed`},
		{"azblob query with a ';'", []string{"status", "--store", "azblob://c/p?poll=1s;x", "--key", "job"}, exitUsage, `azblob URL "azblob://c/p?poll=1s;x": the query cannot be parsed`},
		{"relative file URL", []string{"status", "--store", "file:relative", "--key", "job"}, exitUsage, "relative path"},
		{"state dir is a file", []string{"run", "--store", "file://" + notDir, "--key", "job", "--", "true"}, exitRuntime, "not a directory"},
		{"corrupt state", []string{"run", "--store", "file://" + corrupt, "--key", "job", "--", "true"}, exitRuntime, `cannot read key "job"`},
		// "--store $URL" with $URL unset: the local store would make every
		// machine a leader.
		{"empty --store", []string{"run", "--store", "", "--key", "job", "--", "true"}, exitUsage, "--store is given but empty"},
		{"blank --store", []string{"status", "--store", " ", "--key", "job"}, exitUsage, "--store is given but empty"},
		{"empty --store-file", []string{"run", "--store-file", "", "--key", "job", "--", "true"}, exitUsage, "--store-file is given but empty"},
		// Terminal escapes in a value that an error quotes.
		{"escape in --store-file", []string{"status", "--store-file", "/nonexistent/\x1b]0;pwned\a", "--key", "job"}, exitUsage, `--store-file: open /nonexistent/\x1b]0;pwned\a`},
	}
}

// checkRefused runs args in process and fails t unless the command exits
// with code, prints nothing on stdout, and prints on stderr exactly one
// line, "tenure: ...", that says want.
func checkRefused(t *testing.T, args []string, code int, want string) {
	t.Helper()
	// Bounded, so that a command wrongly accepted (prefer, shard: they
	// run until stopped) fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stdout, stderr bytes.Buffer
	got := run(ctx, args, &stdout, &stderr)
	line := stderr.String()
	if got != code {
		t.Errorf("exit code %d, want %d (stderr %q)", got, code, line)
	}
	if !strings.HasPrefix(line, "tenure: ") || strings.Count(line, "\n") != 1 || !strings.HasSuffix(line, "\n") {
		t.Errorf("stderr %q: want exactly one line starting with \"tenure: \"", line)
	}
	if !strings.Contains(line, want) {
		t.Errorf("stderr %q does not say %q", line, want)
	}
	if n := strings.Count(line, "tenure: "); n > 1 {
		t.Errorf("stderr %q says \"tenure: \" %d times; once, at the start, is enough", line, n)
	}
	if i := strings.IndexFunc(strings.TrimSuffix(line, "\n"), unicode.IsControl); i >= 0 {
		t.Errorf("stderr %q holds a raw control character: it would reach the terminal", line)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing", stdout.String())
	}
}

// TestBadEnvNamed: a bad value from the environment is refused naming the
// variable it came from, not a flag the operator never gave.
func TestBadEnvNamed(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	store := "file://" + t.TempDir()
	run := []string{"run", "--store", store, "--key", "job", "--", "true"}
	cases := []struct {
		name, env, value string
		args             []string
		want             string
	}{
		{"POD_NAME", "POD_NAME", "web\n0", run, "tenure: $POD_NAME (the default --id): "},
		{"POD_NAME too long", "POD_NAME", strings.Repeat("p", 300), run, "tenure: $POD_NAME (the default --id): "},
		{"TENURE_ID", envID, "a\x1b[2Jb", run, "tenure: $TENURE_ID: "},
		{"TENURE_ADVERTISE", envAdvertise, "10.0.0.1\n", run, "tenure: $TENURE_ADVERTISE: "},
		{"TENURE_KEY, run", envKey, "job\n", []string{"run", "--store", store, "--", "true"}, "tenure: $TENURE_KEY: "},
		{"TENURE_KEY, status", envKey, strings.Repeat("k", 300), []string{"status", "--store", store}, "tenure: $TENURE_KEY: "},
		{"POD_NAME blank", "POD_NAME", " ", run, `tenure: $POD_NAME (the default --id) " " is only white space`},
		{"TENURE_KEY padded", envKey, "job\u00a0", []string{"status", "--store", store}, `tenure: $TENURE_KEY "job\u00a0" begins or ends with white space`},
		{"TENURE_STORE blank", envStore, " \n", []string{"run", "--key", "job", "--", "true"}, "tenure: $TENURE_STORE is set but blank"},
		{"TENURE_STORE empty", envStore, "", []string{"run", "--key", "job", "--", "true"}, "tenure: $TENURE_STORE is set but blank"},
		{"TENURE_KEY, step-down", envKey, "a\tb", []string{"step-down", "--store", store}, "tenure: $TENURE_KEY: "},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(tc.env, tc.value)
			checkRefused(t, tc.args, exitUsage, tc.want)
		})
	}
}

// TestSecretsNotPrinted: a password in a store URL never reaches the output.
func TestSecretsNotPrinted(t *testing.T) {
	for _, u := range []string{
		"nope://admin:hunter2@db.example:5432/x",
		"file://admin:hunter2@localhost/tmp/x",
		"nope://db.example/x?password=hunter2",
		"host=db user=app password=hunter2 dbname=app",
		"host=db:5432 user=app password=hunter2",
		"redis://:hunter2@cache:port",
		"redis:hunter2@cache",
		"hunter2@cache",
		"postgres://app:hunter2@[::1",
		"nope://h/x?sig=hunter2&sv=1",
		"azblob://c?endpoint=http%3A%2F%2Fh%2F%3Fsig%3Dhunter2",
		"file:///tmp/x?token=hunter2",
	} {
		code, out, stderr := statusOf(u)
		if code != exitUsage || strings.Contains(out, "hunter2") || stderr == "" {
			t.Errorf("status --store %s: code %d, stderr %q: want a usage error without the password", u, code, stderr)
		}
	}
	// Stores that open and then fail at run time: a refused connection.
	// The token in the user position of a Redis URL used to be printed.
	for _, u := range []string{
		"redis://hunter2@127.0.0.1:1/0",
		"redis://hunter2:@127.0.0.1:1/0",
		"rediss://default:hunter2@127.0.0.1:1/0",
		"postgres://app:hunter2@127.0.0.1:1/app?connect_timeout=1",
		"postgres://app@127.0.0.1:1/app?password=hunter2&connect_timeout=1",
	} {
		code, out, stderr := statusOf(u)
		if code == exitOK || strings.Contains(out, "hunter2") || !strings.Contains(stderr, "xxxxx") {
			t.Errorf("status --store %s: code %d, stderr %q: want an error naming the redacted store, without the secret", u, code, stderr)
		}
	}
}

// TestErrorsDoNotGiveAwayAPasswordThatIsAWord: a password that is also a
// word of the error (the store's name, the user's) is hidden only where it
// stands as the password: "tenure/xxxxx: ... on xxxxx://xxxxx:xxxxx@"
// told the reader that the password was "postgres".
func TestErrorsDoNotGiveAwayAPasswordThatIsAWord(t *testing.T) {
	for u, want := range map[string][]string{
		"postgres://postgres:postgres@127.0.0.1:1/app?connect_timeout=1": {"tenure/postgres: ", " on postgres://postgres:xxxxx@127.0.0.1:1/app", "user=postgres "},
		"redis://:redis@127.0.0.1:1/0":                                   {"tenure/redis: ", " on redis://:xxxxx@127.0.0.1:1/0: "},
	} {
		code, _, stderr := statusOf(u)
		for _, w := range want {
			if code != exitRuntime || !strings.Contains(stderr, w) {
				t.Errorf("status --store %s: exit %d, stderr %q; want %d and %q", u, code, stderr, exitRuntime, w)
			}
		}
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"run", "-h"}, {"shard", "-h"}, {"status", "-h"}, {"watch", "-h"},
		{"step-down", "-h"}, {"prefer", "-h"}, {"demo", "-h"}, {"version", "-h"}, {"help", "run"}, {"help", "step-down"}} {
		var stdout, stderr bytes.Buffer
		if code := runInProcess(args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "sage") || stderr.Len() != 0 {
			t.Errorf("tenure %v: code %d, stdout %q, stderr %q", args, code, stdout.String(), stderr.String())
		}
		// A flag's usage that states its default itself must not get the
		// flag package's "(default ...)" too.
		for _, line := range strings.Split(stdout.String(), "\n") {
			if strings.Count(line, "(default") > 1 {
				t.Errorf("tenure %v: a flag states its default twice: %q", args, strings.TrimSpace(line))
			}
		}
	}
}

// TestHelpCommand: tenure help COMMAND prints COMMAND's own help (as
// COMMAND -h does), not the top-level one; help of what is not a command
// is a usage error.
func TestHelpCommand(t *testing.T) {
	var want, got, stderr bytes.Buffer
	runInProcess([]string{"run", "-h"}, &want, &stderr)
	if code := runInProcess([]string{"help", "run"}, &got, &stderr); code != exitOK || got.String() != want.String() {
		t.Errorf("tenure help run: exit %d, stdout %.80q; want tenure run -h's, %.80q", code, got.String(), want.String())
	}
	for _, args := range [][]string{{"help", "nope"}, {"help", "run", "status"}, {"help", workerCmdName}} {
		got.Reset()
		stderr.Reset()
		code := runInProcess(args, &got, &stderr)
		if code != exitUsage || got.Len() != 0 || strings.Count(stderr.String(), "\n") != 1 || !strings.HasPrefix(stderr.String(), "tenure: help ") {
			t.Errorf("tenure %v: exit %d, stdout %q, stderr %q; want %d and one line", args, code, got.String(), stderr.String(), exitUsage)
		}
	}
}

func runInProcess(args []string, stdout, stderr *bytes.Buffer) int {
	return run(context.Background(), args, stdout, stderr)
}

// TestUnreachableRedisOneLine: an unreachable Redis is one line on stderr,
// tenure's own; go-redis used to add its own "redis: ... pool.go" lines.
func TestUnreachableRedisOneLine(t *testing.T) {
	r := runTenure(t, "status", "--store", "redis://127.0.0.1:1/0", "--key", "k")
	lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
	if r.code != exitRuntime || len(lines) != 1 || !strings.HasPrefix(lines[0], "tenure: ") {
		t.Fatalf("exit %d, stderr %q; want %d and one line of tenure's", r.code, r.stderr, exitRuntime)
	}
}

// statusOf runs `tenure status --store u --key job` in process; out is its
// stdout and stderr together.
func statusOf(u string) (code int, out, stderr string) {
	var o, e bytes.Buffer
	code = runInProcess([]string{"status", "--store", u, "--key", "job"}, &o, &e)
	return code, o.String() + e.String(), e.String()
}

// TestFailJoinsLines: an error spanning lines, as some SDKs write them
// (indented continuation lines, a tab, a trailing newline), is printed as
// one line, its lines joined by one space; spaces within a line are kept.
func TestFailJoinsLines(t *testing.T) {
	var stderr bytes.Buffer
	fail(&stderr, errors.New("tenure: dial failed:\n\t  connection refused\r\n  (is it running?)\n\n key \"a  b\"\tgone\n"))
	want := "tenure: dial failed: connection refused (is it running?) key \"a  b\" gone\n"
	if got := stderr.String(); got != want {
		t.Fatalf("fail printed %q, want %q", got, want)
	}
}

// TestStoreRefusalOneLine: a store that refuses the key for good refuses
// the control key too; tenure run reports the key's refusal alone, not
// first a warning that step-down requests are ignored.
func TestStoreRefusalOneLine(t *testing.T) {
	dir := t.TempDir()
	store := fmt.Sprintf("peer://?id=1&peers=1=127.0.0.1:%d,2=127.0.0.1:%d&algorithm=bully&secret-file=%s&state-dir=%s",
		testserver.FreePort(t), testserver.FreePort(t), peerSecret(t, dir), dir)
	checkRefused(t, []string{"run", "--key", "jobs", "--id", "2", "--store", store, "--", "true"},
		exitUsage, `identity "2" is not this node's ID "1": a peer node campaigns only for itself`)
}

// TestFlagGivenEmptyIsNotTheEnvironment: --key or --id given empty (--key
// "$KEY" with $KEY unset) is a usage error, not $TENURE_KEY or $TENURE_ID,
// which tenure run sets in its CMD's environment. They used to be taken
// from there: "tenure step-down --key "$OTHER"" in a CMD stepped down the
// key of the tenure run that started it, and a tenure run there campaigned
// for that key under its leader's identity.
func TestFlagGivenEmptyIsNotTheEnvironment(t *testing.T) {
	t.Setenv("XDG_STATE_HOME", t.TempDir())
	t.Setenv(envKey, "job")
	t.Setenv(envID, "me")
	store := "file://" + t.TempDir()
	for _, args := range [][]string{
		{"status", "--store", store, "--key", ""},
		{"watch", "--store", store, "--key="},
		{"step-down", "--store", store, "--key", ""},
		{"prefer", "--store", store, "--key", "", "b"},
		{"run", "--store", store, "--key", "", "--try", "--", "true"},
		{"run", "--store", store, "--id", "", "--try", "--", "true"},
		{"shard", "--store", store, "--group", "g", "--members", "me,b", "--id", "", "--shards", "1", "--", "true"},
	} {
		flag := "--key"
		if slices.Contains(args, "--id") {
			flag = "--id"
		}
		t.Run(strings.Join(args[:1], " ")+" "+flag, func(t *testing.T) {
			checkRefused(t, args, exitUsage, flag+" is given but empty")
		})
	}
}
