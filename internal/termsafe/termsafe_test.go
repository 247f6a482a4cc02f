package termsafe

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

func TestJSON(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{`"plain"`, `"plain"`},
		{`"été 東京 ✓"`, `"été 東京 ✓"`},                                         // printable: kept
		{"\"a\u202eb\"", `"a\u202eb"`},                                       // bidi override
		{"\"\u200b\u009b\u00ad\"", `"\u200b\u009b\u00ad"`},                   // zero-width space, CSI, soft hyphen
		{"\"\U000e0001\"", `"\udb40\udc01"`},                                 // a tag character, above U+FFFF: a UTF-16 pair
		{"{\"k\":\"\u2066x\u2069\",\"n\":1}", `{"k":"\u2066x\u2069","n":1}`}, // isolates, in an object
	} {
		got := JSON([]byte(tc.in))
		if string(got) != tc.want {
			t.Errorf("JSON(%q) = %s; want %s", tc.in, got, tc.want)
		}
		var a, b any
		if err := json.Unmarshal([]byte(tc.in), &a); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(got, &b); err != nil || !jsonEqual(a, b) {
			t.Errorf("JSON(%q) decodes to %v (%v); want %v", tc.in, b, err, a)
		}
	}
	if p := []byte(`"plain"`); &JSON(p)[0] != &p[0] {
		t.Error("JSON copied text with nothing to escape")
	}
}

func jsonEqual(a, b any) bool {
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return bytes.Equal(x, y)
}

func TestWriter(t *testing.T) {
	var out strings.Builder
	if err := json.NewEncoder(Writer{W: &out}).Encode(map[string]string{"holder": "x\u202ey"}); err != nil {
		t.Fatal(err)
	}
	if want := "{\"holder\":\"x\\u202ey\"}\n"; out.String() != want {
		t.Errorf("Writer wrote %q; want %q", out.String(), want)
	}
}

// FuzzJSON: whatever string a store hands over, its JSON encoding passed
// through JSON decodes to the same string and holds no rune a terminal
// must not get raw.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{"", "job", "a\u202eb", "\u009b31m", "\U000e0001", "\xff\xfe", "\u2028"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		p, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		got := JSON(p)
		if i := bytes.IndexFunc(got, Unprintable); i >= 0 {
			t.Fatalf("JSON(%s) = %s: an unprintable rune at byte %d", p, got, i)
		}
		var back, want string
		_ = json.Unmarshal(p, &want) // s with invalid UTF-8 replaced, as json.Marshal does
		if err := json.Unmarshal(got, &back); err != nil || back != want {
			t.Fatalf("JSON(%s) = %s decodes to %q (%v); want %q", p, got, back, err, want)
		}
	})
}

// Cut keeps valid UTF-8 valid: a long holder in another script is cut
// before a character, not inside one (which a terminal would get as an
// invalid byte, and the CLI would quote whole).
func TestCut(t *testing.T) {
	for _, c := range []struct {
		s         string
		max       int
		head, end string
	}{
		{"short", 10, "short", ""},
		{"exactly10!", 10, "exactly10!", ""},
		{"abcdefghijk", 10, "abcdefghij", "... (11 bytes)"},
		{"ééééé", 5, "éé", "... (10 bytes)"}, // byte 5 is inside the third é
		{"ééééé", 4, "éé", "... (10 bytes)"},
		{"\xff\xfe\xfd", 2, "\xff\xfe", "... (3 bytes)"}, // not UTF-8: cut where asked
		{"€x", 0, "", "... (4 bytes)"},
	} {
		head, more := Cut(c.s, c.max)
		if head != c.head || more != c.end {
			t.Errorf("Cut(%q, %d) = %q, %q; want %q, %q", c.s, c.max, head, more, c.head, c.end)
		}
	}
}

// FuzzCut: the head is a prefix of s of at most max bytes, valid UTF-8
// whenever s is, and no more than one character shorter than max.
func FuzzCut(f *testing.F) {
	f.Add("ééééé", 5)
	f.Add("abc", 0)
	f.Add("\xff€", 2)
	f.Fuzz(func(t *testing.T, s string, max int) {
		if max < 0 || max > 1<<16 {
			return
		}
		head, more := Cut(s, max)
		if !strings.HasPrefix(s, head) || len(head) > max && more != "" {
			t.Fatalf("Cut(%q, %d) = %q, %q: not a prefix within max", s, max, head, more)
		}
		if (more == "") != (len(s) <= max) {
			t.Fatalf("Cut(%q, %d) = %q, %q: size note wrong", s, max, head, more)
		}
		if more != "" && max-len(head) >= utf8.UTFMax {
			t.Fatalf("Cut(%q, %d) = %q: cut %d bytes short", s, max, head, max-len(head))
		}
		if utf8.ValidString(s) && !utf8.ValidString(head) {
			t.Fatalf("Cut(%q, %d) = %q: split a character", s, max, head)
		}
	})
}
