package history

import (
	"strings"
	"testing"
	"time"
)

func TestCheck(t *testing.T) {
	const s = time.Second
	for _, c := range []struct {
		name  string
		ivs   []Interval
		rules []string
		worst time.Duration
	}{
		{"handovers", []Interval{{"a", 1, 0, 5 * s}, {"b", 2, 5 * s, 12 * s}, {"a", 3, 12 * s, Live}}, nil, 0},
		{"overlap", []Interval{{"a", 1, 0, 5 * s}, {"b", 2, 4 * s, 20 * s}}, []string{RuleOverlap}, s},
		{"overlap hidden behind a short term", []Interval{{"a", 1, 0, 15 * s}, {"b", 2, s, 2 * s}, {"b", 3, 14 * s, 20 * s}},
			[]string{RuleOverlap, RuleOverlap}, s},
		{"open interval overlaps to the end", []Interval{{"a", 1, 0, Live}, {"b", 2, 10 * s, 12 * s}}, []string{RuleOverlap}, 2 * s},
		{"same term twice", []Interval{{"a", 1, 0, 5 * s}, {"b", 1, 5 * s, 20 * s}}, []string{RuleTerms}, 0},
		{"term going back", []Interval{{"a", 4, 0, 5 * s}, {"b", 3, 6 * s, 20 * s}}, []string{RuleTerms}, 0},
		{"unsorted input", []Interval{{"b", 2, 5 * s, 6 * s}, {"a", 1, 0, 5 * s}}, nil, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			vs := Check(c.ivs, 30*s, nil)
			var rules []string
			for _, v := range vs {
				rules = append(rules, v.Rule)
				if !strings.Contains(v.String(), v.Rule+": ") {
					t.Errorf("String() = %q lacks the rule", v.String())
				}
			}
			if strings.Join(rules, ",") != strings.Join(c.rules, ",") {
				t.Fatalf("Check = %v, want rules %v", vs, c.rules)
			}
			if got := MaxOverlap(c.ivs, 30*s); got != c.worst {
				t.Fatalf("MaxOverlap = %s, want %s", got, c.worst)
			}
		})
	}
}

func TestCheckExcuse(t *testing.T) {
	const s = time.Second
	ivs := []Interval{{"a", 1, 0, 4 * s}, {"b", 2, 2 * s, Live}}
	var got [3]time.Duration
	excuse := func(earlier Interval, from, to time.Duration) bool {
		got = [3]time.Duration{time.Duration(earlier.Term), from, to}
		return earlier.ID == "a"
	}
	if vs := Check(ivs, 10*s, excuse); len(vs) != 0 {
		t.Fatalf("Check = %v, want the overlap excused", vs)
	}
	if got != [3]time.Duration{1, 2 * s, 4 * s} {
		t.Fatalf("excuse saw term/from/to %v, want 1, 2s, 4s", got)
	}
}
