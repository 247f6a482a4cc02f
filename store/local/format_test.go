package local_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/local"
)

// A record written by a newer build (a format version this build does not
// know, or a field it does not know) is never taken for a free key nor read
// at another term: while another handle holds the key, Acquire and Get of
// a second handle refuse it with one line naming the file and what was
// wrong, wrapping ErrCorrupt. (The rolling-upgrade audit checked that the
// header's version does what state.go says.)
func TestNewerFormatRecordRefused(t *testing.T) {
	cases := map[string]struct {
		version uint16
		extra   string
		want    string
	}{
		"format 99":     {99, "", "format version 99, this build reads version 1"},
		"unknown field": {1, `"fence":7`, `unknown field "fence"`},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			a, b := open(t, dir), open(t, dir)
			l, err := a.Acquire(ctx, "jobs/nightly", "newer", time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if err := local.WriteFormat(dir, l.Key, tc.version, tc.extra); err != nil {
				t.Fatal(err)
			}
			file := filepath.Join(dir, local.BaseName(l.Key)+".state")
			got, err := b.Acquire(ctx, l.Key, "older", time.Minute)
			checkCorrupt(t, "Acquire", got, err, file, tc.want)
			r, err := b.Get(ctx, l.Key)
			checkCorrupt(t, "Get", r, err, file, tc.want)
		})
	}
}

func checkCorrupt(t *testing.T, op string, got any, err error, file, want string) {
	t.Helper()
	var held *tenure.HeldError
	if err == nil || errors.As(err, &held) || !errors.Is(err, local.ErrCorrupt) {
		t.Fatalf("%s of a newer record: %+v, %v; want an error wrapping ErrCorrupt", op, got, err)
	}
	for _, s := range []string{file, want} {
		if !strings.Contains(err.Error(), s) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line naming %q", op, err, s)
		}
	}
}
