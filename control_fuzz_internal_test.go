package tenure

import (
	"testing"
	"time"
)

// FuzzSlotValues decodes what a registration slot's, a control key's or a
// preference key's record may hold: anyone who can write to the store can put any value
// there. Neither decoder panics; a registration is only accepted with a
// priority an elector can have; and whatever either accepts reads the
// same once encoded again, so what the elector acts on is what it would
// itself have written.
func FuzzSlotValues(f *testing.F) {
	for _, v := range []string{
		encodeCandidate(1, time.UnixMilli(1_700_000_000_000)),
		encodeCandidate(MaxPriority, time.UnixMilli(-1)),
		"candidate 5000 1", "candidate -1 1", "candidate 1", "candidate  2\t3",
		encodeControl(7, "b"), encodeControl(1, ""), encodeControl(2, "two words"),
		"step-down 01 x", "step-down 18446744073709551616 a", "step-down -1 a",
		encodePreference(Preference{Holder: "b", Delay: time.Second}), encodePreference(Preference{Holder: "two words"}),
		"prefer 1s ", "prefer -1s a", "prefer 2562047h47m16.854775807s a", "prefer 1x a",
		"", " ", "\x00candidate 1 1",
	} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := Record{Key: "k~x", Holder: "h", Term: 3, Value: v, TTL: time.Second, Remaining: time.Second}
		if c, ok := parseCandidate(r); ok {
			if c.Priority < NeverLead || c.Priority > MaxPriority {
				t.Fatalf("parseCandidate(%q) accepted priority %d", v, c.Priority)
			}
			r2 := r
			r2.Value = encodeCandidate(c.Priority, c.Since)
			c2, ok := parseCandidate(r2)
			if !ok || c2.Priority != c.Priority || !c2.Since.Equal(c.Since) || c2.Identity != c.Identity {
				t.Fatalf("parseCandidate(%q) = %+v, but its encoding %q reads %+v, %v", v, c, r2.Value, c2, ok)
			}
		}
		if g, ok := parseControl(r); ok {
			r2 := r
			r2.Value = encodeControl(g.term, g.to)
			if g2, ok := parseControl(r2); !ok || g2 != g {
				t.Fatalf("parseControl(%q) = %+v, but its encoding %q reads %+v, %v", v, g, r2.Value, g2, ok)
			}
		}
		if p, ok := parsePreference(r); ok {
			if p.Holder == "" || p.Delay < 0 {
				t.Fatalf("parsePreference(%q) accepted %+v", v, p)
			}
			r2 := r
			r2.Value = encodePreference(p)
			if p2, ok := parsePreference(r2); !ok || p2 != p {
				t.Fatalf("parsePreference(%q) = %+v, but its encoding %q reads %+v, %v", v, p, r2.Value, p2, ok)
			}
		}
		r.Holder = ""
		if _, ok := parseCandidate(r); ok {
			t.Fatalf("parseCandidate accepted %q with no holder", v)
		}
		if _, ok := parseControl(r); ok {
			t.Fatalf("parseControl accepted %q with no holder", v)
		}
		if _, ok := parsePreference(r); ok {
			t.Fatalf("parsePreference accepted %q with no holder", v)
		}
	})
}
