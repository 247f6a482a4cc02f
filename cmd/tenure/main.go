package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/internal/ctxerr"
	"github.com/tenurehq/tenure/internal/termsafe"
)

// Exit codes shared by every subcommand. `tenure run` otherwise passes its
// command's exit code through; `tenure status` exits exitFree for a free key.
const (
	exitOK      = 0
	exitRuntime = 1 // something went wrong at run time (store, process)
	exitUsage   = 2 // bad command line: nothing was done
	exitFree    = 3 // tenure status: nobody holds the key
	// tenure run --try or --wait: the key stayed held by another candidate
	// (75 is sysexits' EX_TEMPFAIL: try again later).
	exitHeld = 75
)

func main() {
	if len(os.Args) > 1 {
		oneProcFor(os.Args[1])
		adoptFor(os.Args[1])
	}
	os.Exit(run(context.Background(), os.Args[1:], os.Stdout, os.Stderr))
}

// oneProcFor runs the long-lived commands, run and watch, on one P
// (GOMAXPROCS 1) unless $GOMAXPROCS says otherwise. They mostly wait: for
// the store, a timer, a signal, a scrape. With more Ps, every wake-up has
// idle Ps to look for work on and threads to start or park, which is most
// of what an idle leader costs (BenchmarkHTTPIdle: about a fifth of its
// CPU on this 2-core machine). CMD's environment is not touched, so CMD
// keeps every core.
func oneProcFor(command string) {
	if (command == "run" || command == "watch") && os.Getenv("GOMAXPROCS") == "" {
		runtime.GOMAXPROCS(1)
	}
}

// usage is the top-level help text.
const usage = `tenure runs a command on exactly one machine at a time, by leader election.

Usage:
  tenure demo                          watch a live failover demo (no setup)
  tenure run    [flags] --key KEY -- CMD [ARGS...]
                                       run CMD only while leading KEY
  tenure shard  [flags] --group G --members A,B,C (--shards N | --keys LIST) -- CMD [ARGS...]
                                       run CMD once per key of G this member leads
  tenure status [flags] --key KEY      who leads KEY (exit 0 held, 3 free)
  tenure watch  [flags] --key KEY      print every change of leader of KEY
  tenure step-down [flags] --key KEY [--to ID]
                                       make the leader of KEY hand over
  tenure prefer [flags] --key KEY ID   prefer ID as KEY's holder while it runs
  tenure version                       print the version (also --version)

Run "tenure COMMAND -h" or "tenure help COMMAND" for a command's flags.
Stores are named by URL:
  file:///var/lib/tenure   the local store (default: file:// = %s)
  memory://NAME            in-process only, for testing
Registered schemes: %s
The URL comes from --store URL, else --store-file PATH (chmod 600), else
$TENURE_STORE, else the local store; --store or --store-file given empty, or
$TENURE_STORE set but blank, is an error. Put a URL with a password in the file
or the environment: every user can read a command line with ps.
`

// subcommand is one tenure subcommand: it gets the arguments after its
// name and returns the process exit code.
type subcommand func(ctx context.Context, args []string, stdout, stderr io.Writer) int

// subcommands are the subcommands run dispatches to by name, all but the
// supervisor (superviseCmdName), which takes no context and no stdout.
var subcommands = map[string]subcommand{
	"run":         runCmd,
	"shard":       shardCmd,
	"status":      statusCmd,
	"watch":       watchCmd,
	"step-down":   stepDownCmd,
	"prefer":      preferCmd,
	"demo":        demoCmd,
	"version":     versionCmd,
	workerCmdName: workerCmd,
}

// run is the whole program: it parses args, runs one subcommand and returns
// the process exit code. Everything it prints goes to stdout and stderr.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		return fail(stderr, usageErrorf(`no command given; run "tenure help" for usage`))
	}
	name, rest := args[0], args[1:]
	if cmd, ok := subcommands[name]; ok {
		return cmd(ctx, rest, stdout, stderr)
	}
	switch name {
	case superviseCmdName:
		return superviseCmd(rest, stderr)
	case "help", "-h", "-help", "--help":
		if len(rest) > 0 && name == "help" {
			// tenure help COMMAND is tenure COMMAND -h.
			if cmd, ok := subcommands[rest[0]]; ok && rest[0] != workerCmdName && len(rest) == 1 {
				return cmd(ctx, []string{"-h"}, stdout, stderr)
			}
			return fail(stderr, usageErrorf("help %s: want one command (demo, run, shard, status, step-down, prefer, watch or version)", strings.Join(rest, " ")))
		}
		printUsage(stdout)
		return exitOK
	case "-version", "--version":
		return versionCmd(ctx, rest, stdout, stderr)
	}
	return fail(stderr, usageErrorf("unknown command %q (want demo, run, shard, status, step-down, prefer, watch or version)", name))
}

func printUsage(w io.Writer) {
	fmt.Fprintf(w, usage, defaultDirForHelp(), strings.Join(tenure.Schemes(), ", "))
}

// usageError is a bad command line: exit code 2.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// terminalSafe reports whether s can be printed to a terminal as it is:
// valid UTF-8 without unprintable runes.
func terminalSafe(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsFunc(s, termsafe.Unprintable)
}

// printable returns s with every rune that is not printable, and every
// byte that is not valid UTF-8, replaced by its Go escape (\x1b, \a, \xff),
// so that text from a store cannot drive the terminal it is printed to.
func printable(s string) string {
	if terminalSafe(s) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, n := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && n == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case termsafe.Unprintable(r):
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+n])
		}
		i += n
	}
	return b.String()
}

func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// oneLine joins the lines of msg with one space, dropping the white space
// around each line break or tab (an SDK's error may span indented lines),
// and trims its ends. Runs of spaces within a line are kept: they may be part
// of what the user gave, quoted back ("--key \"   \" is only white space").
func oneLine(msg string) string {
	var b strings.Builder
	for _, l := range strings.FieldsFunc(msg, func(r rune) bool { return r == '\n' || r == '\r' || r == '\t' || r == '\v' || r == '\f' }) {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(l)
	}
	return b.String()
}

// fail prints err as the single line "tenure: <what was wrong>" and returns
// its exit code: exitUsage for command-line and argument errors (including
// errors wrapping tenure.ErrInvalid and tenure.ErrUnknownScheme),
// exitRuntime otherwise. Control characters and invalid UTF-8 in err (a
// record rewritten with the store's own client can put any bytes there)
// oneShotWait bounds how long a command that asks the store once
// (status, step-down, prefer, watch's first read) waits for its answer.
const oneShotWait = 30 * time.Second

// unanswered says that the store did not answer within oneShotWait when
// err is that deadline (ctx's, passed, as ctxerr judges it: a socket
// deadline set from ctx can fire before ctx's own timer): a store client
// that retries on its own (etcd's) otherwise reports only "context
// deadline exceeded".
func unanswered(ctx context.Context, err error) error {
	if errors.Is(err, context.DeadlineExceeded) && errors.Is(ctxerr.Err(ctx), context.DeadlineExceeded) {
		return fmt.Errorf("the store did not answer within %s: %w", oneShotWait, err)
	}
	return err
}

// are printed escaped, never raw.
func fail(stderr io.Writer, err error) int {
	msg := printable(oneLine(strings.TrimPrefix(err.Error(), "tenure: ")))
	fmt.Fprintf(stderr, "tenure: %s\n", msg)
	var ue *usageError
	if errors.As(err, &ue) || errors.Is(err, tenure.ErrInvalid) || errors.Is(err, tenure.ErrUnknownScheme) {
		return exitUsage
	}
	return exitRuntime
}
