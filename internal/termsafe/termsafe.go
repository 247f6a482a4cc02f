// Package termsafe keeps text that came from a store from driving the
// terminal it is shown on. A holder or value written into the store from
// outside (with the store's own client) can hold any rune: a C1 control
// such as U+009B (CSI, obeyed by terminals that read C1 controls in
// UTF-8), a bidi override that reorders what follows it, a zero-width
// space. encoding/json and log/slog escape only the runes below U+0020,
// and U+2028 and U+2029; [JSON] escapes the rest of those a terminal must
// not get raw. It uses the standard library only.
package termsafe

import (
	"bytes"
	"fmt"
	"io"
	"unicode"
	"unicode/utf16"
	"unicode/utf8"
)

// Unprintable reports whether r must not reach a terminal raw: it is
// neither printable (unicode.IsPrint) nor a space.
func Unprintable(r rune) bool { return r != ' ' && !unicode.IsPrint(r) }

// JSON returns JSON text p with every rune at or above U+007F that is
// [Unprintable] written as a \u escape (a UTF-16 pair above U+FFFF). JSON
// text holds such runes only inside strings, where the escape stands for
// the same rune, so the result decodes to the same values. p must hold
// whole JSON values. It returns p itself when there is nothing to escape.
func JSON(p []byte) []byte {
	if !bytes.ContainsFunc(p, escaped) {
		return p
	}
	b := make([]byte, 0, len(p)+64)
	for i := 0; i < len(p); {
		r, n := utf8.DecodeRune(p[i:])
		if escaped(r) {
			for _, u := range utf16.AppendRune(nil, r) {
				b = fmt.Appendf(b, `\u%04x`, u)
			}
		} else {
			b = append(b, p[i:i+n]...)
		}
		i += n
	}
	return b
}

// escaped reports whether JSON escapes r. The controls below U+007F are
// escaped by every JSON encoder already.
func escaped(r rune) bool { return r >= 0x7f && Unprintable(r) }

// Writer writes JSON text to W through [JSON]. Each Write must hold whole
// JSON values, as json.Encoder and slog.JSONHandler write them.
type Writer struct{ W io.Writer }

// Write implements io.Writer: it reports len(p) written once the escaped
// text is.
func (w Writer) Write(p []byte) (int, error) {
	if _, err := w.W.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Cut returns s's first max bytes at most, cut before a character so that
// valid UTF-8 stays valid (and at max bytes in text that is not), and, if
// s is longer than max, a note of its size to follow them ("... (N
// bytes)"); else s and "". A holder or value written into the store from
// outside can be megabytes long, which no operator reads.
func Cut(s string, max int) (head, more string) {
	if len(s) <= max {
		return s, ""
	}
	// In valid UTF-8 a character starts at most UTFMax-1 bytes back; in
	// anything else, cut where asked.
	n := max
	for n > 0 && max-n < utf8.UTFMax-1 && !utf8.RuneStart(s[n]) {
		n--
	}
	if !utf8.RuneStart(s[n]) {
		n = max
	}
	return s[:n], fmt.Sprintf("... (%d bytes)", len(s))
}
