package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/tenurehq/tenure"
)

// newFlagSet returns a flag set that reports errors instead of printing
// them, so every bad flag becomes one "tenure: ..." line.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet("tenure "+name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	return fs
}

// given reports whether flag name was set on fs's command line (as
// opposed to left at its default), once fs is parsed.
func given(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// parseFlags parses args into fs. It returns done=true with the exit code
// when parsing ended the command: -h prints help (text, then fs's flags) to
// stdout and exits 0; a bad flag is one line on stderr and exit 2.
func parseFlags(fs *flag.FlagSet, args []string, help string, stdout, stderr io.Writer) (code int, done bool) {
	err := fs.Parse(args)
	if err == nil {
		return 0, false
	}
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(stdout, help)
		fs.SetOutput(stdout)
		fs.PrintDefaults()
		return exitOK, true
	}
	return fail(stderr, usageErrorf("%s: %v", strings.TrimPrefix(fs.Name(), "tenure "), err)), true
}

// The environment variables that stand in for flags not given.
const (
	envStore     = "TENURE_STORE"     // --store
	envKey       = "TENURE_KEY"       // --key
	envID        = "TENURE_ID"        // tenure run --id
	envAdvertise = "TENURE_ADVERTISE" // tenure run --advertise
)

// orEnvFrom returns flag, or, if it is empty, the environment variable
// name, and where the value came from, for messages: flagName, or "$"+name
// when the variable supplied it. An operator who never gave the flag must
// be told which variable is wrong.
func orEnvFrom(flag, flagName, name string) (value, from string) {
	if flag != "" {
		return flag, flagName
	}
	if v := os.Getenv(name); v != "" {
		return v, "$" + name
	}
	return "", flagName
}

// refuseGivenEmpty rejects --key or --id (those of names fs has) given
// empty, as by --key "$KEY" with $KEY unset: it would fall back to
// $TENURE_KEY or $TENURE_ID, which tenure run sets in CMD's environment,
// so that tenure step-down --key "$OTHER" in a CMD would step down the key
// of the tenure run that started it, and a tenure run there would campaign
// for that key under its leader's identity. As with --store given empty,
// only leaving the flag out means the environment.
func refuseGivenEmpty(fs *flag.FlagSet, names ...string) error {
	env := map[string]string{"key": envKey, "id": envID}
	var err error
	fs.Visit(func(f *flag.Flag) {
		if err == nil && slices.Contains(names, f.Name) && f.Value.String() == "" {
			err = usageErrorf("--%s is given but empty; leave it out to take $%s", f.Name, env[f.Name])
		}
	})
	return err
}

// maxStoreFile bounds what --store-file reads: a URL, not a file's worth.
const maxStoreFile = 64 << 10

// storeFlags are --store and --store-file, shared by the subcommands that
// use a store.
type storeFlags struct {
	url, file string
	fs        *flag.FlagSet // to tell a flag given empty from one not given
}

func addStoreFlags(fs *flag.FlagSet) *storeFlags {
	sf := &storeFlags{fs: fs}
	fs.StringVar(&sf.url, "store", "", "store `URL`, such as file:///var/lib/tenure (default: --store-file, else $"+envStore+", else the local store's default directory). A URL with a password belongs in --store-file or $"+envStore+": every user can read a command line with ps")
	fs.StringVar(&sf.file, "store-file", "", "read the store URL from `PATH`, a file only its owner can read (chmod 600)")
	return sf
}

// storeSource is a store URL and where it came from, for messages.
type storeSource struct {
	url  string
	from string // "--store", "--store-file PATH", "$TENURE_STORE", or "" for the default
}

// resolve returns the store URL: --store, else the contents of
// --store-file, else $TENURE_STORE, else "" (the default local store).
// lookupEnv is [os.LookupEnv] outside tests. Giving both --store and
// --store-file is a usage error, and so is giving either one empty
// ("--store $URL" with $URL unset) or setting $TENURE_STORE to nothing or
// white space (a template that rendered nothing): falling back to the
// default local store there would elect a leader on every machine. Only
// an unset $TENURE_STORE means the local store. Errors never quote the
// URL.
func (sf *storeFlags) resolve(lookupEnv func(string) (string, bool)) (storeSource, error) {
	var empty error
	sf.fs.Visit(func(f *flag.Flag) {
		if (f.Name == "store" || f.Name == "store-file") && strings.TrimSpace(f.Value.String()) == "" && empty == nil {
			empty = usageErrorf("--%s is given but empty; leave it out to use $"+envStore+" or the local store", f.Name)
		}
	})
	switch {
	case empty != nil:
		return storeSource{}, empty
	case sf.url != "" && sf.file != "":
		return storeSource{}, usageErrorf("--store and --store-file are both given; use one")
	case sf.url != "":
		return storeSource{url: sf.url, from: "--store"}, nil
	case sf.file != "":
		u, err := readStoreFile(sf.file)
		if err != nil {
			return storeSource{}, err
		}
		return storeSource{url: u, from: "--store-file " + sf.file}, nil
	}
	env, set := lookupEnv(envStore)
	if u := strings.TrimSpace(env); u != "" {
		return storeSource{url: u, from: "$" + envStore}, nil
	} else if set {
		// Set to nothing or white space, as by a templated value that
		// rendered empty: as with an empty flag, the local store would
		// elect everywhere.
		return storeSource{}, usageErrorf("$%s is set but blank; set it to the store URL, or unset it to use the local store", envStore)
	}
	return storeSource{}, nil
}

// readStoreFile reads a store URL from path: a regular file, not readable
// or writable by group or others, holding one line (a trailing newline and
// surrounding spaces are dropped). Its errors are usage errors and never
// quote the file's contents.
func readStoreFile(path string) (string, error) {
	// O_NONBLOCK: a FIFO must not hang the command; it is refused below.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return "", usageErrorf("--store-file: %v", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return "", usageErrorf("--store-file: %v", err)
	}
	switch {
	case !fi.Mode().IsRegular():
		return "", usageErrorf("--store-file %s is not a regular file", path)
	case fi.Mode().Perm()&0o077 != 0:
		return "", usageErrorf("--store-file %s can be read or written by others (mode %04o): it holds credentials; run chmod 600 %s", path, fi.Mode().Perm(), path)
	case fi.Size() > maxStoreFile:
		return "", usageErrorf("--store-file %s is %d bytes; a store URL is at most %d", path, fi.Size(), maxStoreFile)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxStoreFile+1))
	if err != nil {
		return "", usageErrorf("--store-file: %v", err)
	}
	if len(b) > maxStoreFile {
		return "", usageErrorf("--store-file %s is longer than %d bytes", path, maxStoreFile)
	}
	u := strings.TrimSpace(string(b))
	switch {
	case u == "":
		return "", usageErrorf("--store-file %s is empty; it must hold the store URL", path)
	case strings.ContainsAny(u, "\n\r"):
		return "", usageErrorf("--store-file %s holds more than one line; it must hold only the store URL", path)
	}
	return u, nil
}

// openStore opens the store src names, or the default local store when it
// names none, through tenure.Open. Its errors never quote a secret.
func openStore(ctx context.Context, src storeSource) (tenure.Store, error) {
	raw := src.url
	if raw == "" {
		var err error
		if raw, err = defaultStoreURL(); err != nil {
			return nil, fmt.Errorf("no --store given and no default local store: %w", err)
		}
	}
	s, err := tenure.Open(ctx, raw)
	if err != nil {
		// tenure.Open's errors say what is wrong without any secret; name
		// the store if they do not, and where a URL not given on the
		// command line came from.
		if red := tenure.Redact(raw); !strings.Contains(err.Error(), red) && !errors.Is(err, tenure.ErrInvalid) && !errors.Is(err, tenure.ErrUnknownScheme) {
			err = fmt.Errorf("store %s: %w", red, err)
		}
		if src.from != "" && src.from != "--store" {
			err = fmt.Errorf("%w (the store URL came from %s)", err, src.from)
		}
		return nil, err
	}
	return s, nil
}

// about names what err is about: "NAME: err", without the "tenure: " that
// the library's errors begin with (fail adds its own, once). err stays
// wrapped, for errors.Is.
func about(name string, err error) error { return &aboutError{name, err} }

type aboutError struct {
	name string
	err  error
}

func (e *aboutError) Error() string {
	return e.name + ": " + strings.TrimPrefix(e.err.Error(), "tenure: ")
}

func (e *aboutError) Unwrap() error { return e.err }

// checkKeyFlag validates the key, which came from (--key or $TENURE_KEY).
func checkKeyFlag(key, from string) error {
	if key == "" {
		return usageErrorf("--key is required (or $" + envKey + ")")
	}
	if err := tenure.CheckKey(key); err != nil {
		return about(from, err)
	}
	return checkTrimmed(from, "name another lease than", key)
}

// checkIDFlag validates a candidate ID given for key (from: where it came
// from): an identity tenure grants ([tenure.CheckAcquire]), with no white
// space around it (checkTrimmed).
func checkIDFlag(key, id, from string) error {
	if err := tenure.CheckAcquire(key, id, time.Second); err != nil {
		return about(from, err)
	}
	return checkTrimmed(from, anotherID, id)
}

// checkTTLRange rejects a lease duration flag (name: --ttl, --window)
// outside tenure.MinTTL to tenure.MaxTTL.
func checkTTLRange(name string, d time.Duration) error {
	if d < tenure.MinTTL || d > tenure.MaxTTL {
		return usageErrorf("%s %s is out of range: want %s to %s", name, d, tenure.MinTTL, tenure.MaxTTL)
	}
	return nil
}

// checkKeyArgs takes *key from $TENURE_KEY when --key was not given,
// then checks the command line of a subcommand that takes no positional
// arguments (noArgs) and the key (checkKeyFlag), in that order. from is
// where the key came from, for messages: "--key" or "$TENURE_KEY".
func checkKeyArgs(fs *flag.FlagSet, key *string) (from string, err error) {
	if err := refuseGivenEmpty(fs, "key"); err != nil {
		return "--key", err
	}
	*key, from = orEnvFrom(*key, "--key", envKey)
	if err := noArgs(fs); err != nil {
		return from, err
	}
	return from, checkKeyFlag(*key, from)
}

// checkControlledKey rejects a key longer than tenure.MaxControlledKeyLen,
// which leaves no room for the suffix of the keys kept next to it (the
// message names who needs the room and what the room is for), and a key
// that is itself one of those kept next to another key (tenure.BaseKey,
// which the library refuses too, less helpfully for a flag): a preference
// set on job~tenure-prefer would be a grant of
// job~tenure-prefer~tenure-prefer, which no elector reads, and a tenure
// run or step-down of job's control key would work on it as if it were a
// lease, beside job's electors.
//
// from is where the key came from ("--key" or "$TENURE_KEY"), which the
// message names.
func checkControlledKey(key, from, who, room string) error {
	if len(key) > tenure.MaxControlledKeyLen {
		return usageErrorf("%s is %d bytes; %s needs at most %d (room for %s)", from, len(key), who, tenure.MaxControlledKeyLen, room)
	}
	return refuseDerived(key, from, "not a lease")
}

// refuseDerived rejects key, from from ("--key" or "$TENURE_KEY"), if it is
// one of the keys kept next to another key (tenure.BaseKey), saying what
// it is not and which key to give instead: "use --key BASE" or "set
// $TENURE_KEY to BASE".
func refuseDerived(key, from, notA string) error {
	base, what, ok := tenure.BaseKey(key)
	if !ok {
		return nil
	}
	use := fmt.Sprintf("use --key %q", base)
	if from != "--key" {
		use = fmt.Sprintf("set %s to %q", from, base)
	}
	return usageErrorf("%s %q is %s of %q, %s: %s", from, key, what, base, notA, use)
}

// checkCandidatesKey rejects, for flag (--candidates), a key that is itself
// one kept next to another key (tenure.BaseKey): it has no candidates or
// preference of its own, and the library would read keys derived from it
// that nobody writes. A plain read of such a key's own record (tenure
// status without --candidates, tenure watch) stays allowed: it shows the
// raw record.
func checkCandidatesKey(flag, key, from string) error {
	if err := refuseDerived(key, from, "not a lease with candidates"); err != nil {
		return usageErrorf("%s: %v", flag, err)
	}
	return nil
}

// anotherID is checkTrimmed's other for an identity.
const anotherID = "be another identity than"

// checkTrimmed rejects a key, identity or group name s (from: where it came
// from) that begins or ends with white space, or is nothing else. The
// library takes " job" as a name of its own, another lease than "job": a
// stray space in one machine's unit file or $TENURE_KEY would elect a
// second leader, for what its operator thinks is the same job. other says
// what the padded s would be, such as "name another lease than": the error
// ends "it would " + other + the trimmed s.
func checkTrimmed(from, other, s string) error {
	switch t := strings.TrimSpace(s); {
	case t == s:
		return nil
	case t == "":
		return usageErrorf("%s %q is only white space", from, s)
	default:
		return usageErrorf("%s %q begins or ends with white space: it would %s %q", from, s, other, t)
	}
}

// noArgs rejects positional arguments of a subcommand that takes none.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		// "status: ...": fail adds the "tenure: " the flag set's name has.
		return usageErrorf("%s: unexpected argument %q", strings.TrimPrefix(fs.Name(), "tenure "), fs.Arg(0))
	}
	return nil
}

// minRunTTL is the shortest --ttl of tenure run, above tenure.MinTTL: the
// leader must start (or wake) the supervisor and CMD, and get the first
// deadline to the supervisor, within the renew deadline, 2/3 of the TTL.
// Measured on a 2-core machine at load 10: with --ttl 100ms 3 runs of
// "tenure run -- true" in 8 completed (the others lost leadership while
// CMD started), with 500ms 7 in 8, with 1s 8 in 8.
const minRunTTL = 500 * time.Millisecond

// checkTTL rejects a --ttl outside what tenure run accepts on any store
// (minRunTTL to tenure.MaxTTL) or, given a store, on that store.
func checkTTL(d time.Duration, s tenure.Store) error {
	if err := positive("ttl", d); err != nil {
		return err
	}
	lo, hi := tenure.TTLBounds(s)
	lo = max(lo, minRunTTL)
	if d < lo || d > hi {
		where := ""
		if _, ok := s.(tenure.TTLRanger); ok {
			where = " for this store"
		}
		return usageErrorf("--ttl %s is out of range: want %s to %s%s", d, lo, hi, where)
	}
	return nil
}

// positive rejects a duration flag that is not positive.
func positive(name string, d time.Duration) error {
	if d <= 0 {
		return usageErrorf("--%s %s must be positive", name, d)
	}
	return nil
}

// keyCmdOpts is the command line of a subcommand that reads one key:
// tenure status and tenure watch.
type keyCmdOpts struct {
	store     storeSource
	key       string
	json      bool
	httpAddr  string // tenure watch --http
	logFormat string // tenure watch --log-format

	exec        hookFlag      // tenure watch --exec
	execTimeout time.Duration // tenure watch --exec-timeout
	// tenure status --candidates (see candidates.go)
	candidates bool
}

// parseKeyCmd parses and checks the command line of subcommand name,
// which takes the store flags, --key and --json (described by jsonUsage).
func parseKeyCmd(name, help, jsonUsage string, args []string, stdout, stderr io.Writer) (o keyCmdOpts, code int, done bool) {
	fs := newFlagSet(name)
	sf := addStoreFlags(fs)
	fs.StringVar(&o.key, "key", "", "the lease `KEY` (required)")
	fs.BoolVar(&o.json, "json", false, jsonUsage)
	if name == "status" {
		fs.BoolVar(&o.candidates, "candidates", false, candidatesUsage)
	}
	if name == "watch" {
		fs.StringVar(&o.httpAddr, "http", "", httpFlagUsage)
		fs.StringVar(&o.logFormat, "log-format", "text", logFormatUsage)
		fs.Var(&o.exec, "exec", execFlagUsage)
		fs.DurationVar(&o.execTimeout, "exec-timeout", defaultHookTimeout, execTimeoutUsage)
	}
	if code, done := parseFlags(fs, args, help, stdout, stderr); done {
		return o, code, true
	}
	keyFrom, err := checkKeyArgs(fs, &o.key)
	if err == nil && o.candidates {
		err = checkCandidatesKey("--candidates", o.key, keyFrom)
	}
	if err == nil {
		err = checkHTTPAddr(o.httpAddr)
	}
	if err == nil && o.execTimeout < 0 {
		err = usageErrorf("--exec-timeout %s must not be negative (0: no limit)", o.execTimeout)
	}
	if err == nil && o.exec == "" && given(fs, "exec-timeout") {
		// It bounds --exec's runs: alone it would do nothing, and the hook
		// its user meant to bound would never run.
		err = usageErrorf("--exec-timeout %s is given without --exec; give --exec CMD or leave it out", o.execTimeout)
	}
	if err == nil {
		o.store, err = sf.resolve(os.LookupEnv)
	}
	if err != nil {
		return o, fail(stderr, err), true
	}
	return o, 0, false
}
