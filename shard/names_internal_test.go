package shard

import (
	"errors"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
)

// TestLeaseNamesAreInjective: among every group CheckGroup accepts, no two
// (group, member) or (group, key) pairs share a lease name, whatever the
// members and keys. Before CheckGroup, group "a" with key "b/members/m"
// and group "a/keys/b" with member "m" both used a/keys/b/members/m, so
// two unrelated groups fought over one lease. Exhaustive over names of up
// to three segments drawn from the separators and ordinary words.
func TestLeaseNamesAreInjective(t *testing.T) {
	names := pathsOf([]string{"a", "b", "keys", "members", ""}, 3)
	type owner struct{ group, kind, name string }
	seen := map[string]owner{}
	accepted, refused := 0, 0
	for _, g := range names {
		if g == "" {
			continue
		}
		if err := CheckGroup(g); err != nil {
			if !errors.Is(err, tenure.ErrInvalid) {
				t.Fatalf("CheckGroup(%q) = %v, want an ErrInvalid", g, err)
			}
			refused++
			continue
		}
		accepted++
		for _, n := range names {
			if n == "" {
				continue
			}
			for _, o := range []owner{{g, "member", n}, {g, "key", n}} {
				lease := MemberLease(g, n)
				if o.kind == "key" {
					lease = KeyLease(g, n)
				}
				if prev, dup := seen[lease]; dup {
					t.Fatalf("lease %q is both %s %q of group %q and %s %q of group %q",
						lease, prev.kind, prev.name, prev.group, o.kind, o.name, o.group)
				}
				seen[lease] = o
			}
		}
	}
	if accepted == 0 || refused == 0 {
		t.Fatalf("CheckGroup accepted %d groups and refused %d; want some of each", accepted, refused)
	}
}

// pathsOf returns every path of 1 to n segments drawn from segs.
func pathsOf(segs []string, n int) []string {
	last := segs
	out := append([]string(nil), segs...)
	for i := 1; i < n; i++ {
		var next []string
		for _, p := range last {
			for _, s := range segs {
				next = append(next, p+"/"+s)
			}
		}
		out = append(out, next...)
		last = next
	}
	return out
}

// TestCheckGroupKeepsValidGroups: the groups still valid name their
// leases as before (a rolling upgrade moves no key), including groups
// that only look like the separators, and the refused ones say why.
func TestCheckGroupKeepsValidGroups(t *testing.T) {
	for _, g := range []string{"jobs", "jobs/eu", "keys", "members/x", "a/keyss", "a/key", "a/Members", "a/keys-b", "a//b", "a/"} {
		if err := CheckGroup(g); err != nil {
			t.Errorf("CheckGroup(%q) = %v, want nil", g, err)
		}
	}
	if got := MemberLease("jobs/eu", "a"); got != "jobs/eu/members/a" {
		t.Errorf("memberKey = %q", got)
	}
	if got := KeyLease("jobs/eu", "3"); got != "jobs/eu/keys/3" {
		t.Errorf("leaseKey = %q", got)
	}
	for g, want := range map[string]string{
		"a/keys/b":    `group "a/keys/b" has the path segment "keys", so its leases could be another group's (a/keys/b/members/ID is also key "b/members/ID" of group "a"); rename the group`,
		"x/y/members": `(x/y/members/members/ID is also member "members/ID" of group "x/y")`,
		"a/keys/":     `(a/keys//members/ID is also key "/members/ID" of group "a")`,
	} {
		err := CheckGroup(g)
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("CheckGroup(%q) = %v, want one line with %q", g, err, want)
		}
	}
}
