package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
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

// storeFlag is the --store flag shared by the subcommands that use a store.
func storeFlag(fs *flag.FlagSet) *string {
	return fs.String("store", "", "store `URL`, such as file:///var/lib/tenure (default: the local store's default directory)")
}

// openStore opens the store named by raw, or the default local store when
// raw is empty, through tenure.Open. Its errors never quote a password.
func openStore(ctx context.Context, raw string) (tenure.Store, error) {
	if raw == "" {
		var err error
		if raw, err = defaultStoreURL(); err != nil {
			return nil, fmt.Errorf("no --store given and no default local store: %w", err)
		}
	}
	s, err := tenure.Open(ctx, raw)
	if err != nil {
		msg := err.Error()
		if red := tenure.Redact(raw); !strings.Contains(msg, red) {
			return nil, fmt.Errorf("store %s: %w", red, err)
		}
		return nil, err
	}
	return s, nil
}

// checkKeyFlag validates the --key flag.
func checkKeyFlag(key string) error {
	if key == "" {
		return usageErrorf("--key is required")
	}
	if err := tenure.CheckKey(key); err != nil {
		return fmt.Errorf("--key: %w", err)
	}
	return nil
}

// noArgs rejects positional arguments of a subcommand that takes none.
func noArgs(fs *flag.FlagSet) error {
	if fs.NArg() > 0 {
		return usageErrorf("%s: unexpected argument %q", fs.Name(), fs.Arg(0))
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
