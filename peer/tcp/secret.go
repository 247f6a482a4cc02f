package tcp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"syscall"

	"github.com/tenurehq/tenure"
)

// MinSecretLen is the shortest shared secret accepted, in bytes (after
// trimming surrounding whitespace): 32 bytes, the HMAC-SHA256 key size.
const MinSecretLen = 32

// MaxSecretLen bounds the secret file read.
const MaxSecretLen = 4096

// Secret is the group's shared key. It prints as "xxxxx" in every format and
// log, so a Config can be logged without leaking it; the bytes are only
// reachable through [Secret.Bytes].
type Secret struct {
	b []byte
}

// NewSecret returns a secret holding a copy of b. It returns an error
// wrapping [tenure.ErrInvalid] if b is shorter than [MinSecretLen].
func NewSecret(b []byte) (Secret, error) {
	if len(b) < MinSecretLen {
		return Secret{}, invalidf("the shared secret is %d bytes; at least %d are required", len(b), MinSecretLen)
	}
	if len(b) > MaxSecretLen {
		return Secret{}, invalidf("the shared secret is %d bytes; at most %d are allowed", len(b), MaxSecretLen)
	}
	return Secret{b: bytes.Clone(b)}, nil
}

// MinSecretBits is the least estimated entropy, in bits, that
// [LoadSecret] accepts in a secret file (see [EstimateEntropy]).
const MinSecretBits = 96

// LoadSecret reads a shared secret from path: the file's content with
// surrounding whitespace (a trailing newline) removed, at least
// [MinSecretLen] bytes. Generate one with
//
//	head -c 48 /dev/urandom | base64 > /etc/tenure/peer.secret
//	chmod 600 /etc/tenure/peer.secret
//
// It refuses, each with a one-line error wrapping [tenure.ErrInvalid]
// that never shows the content:
//   - a file that is not a regular file, or is readable or writable by
//     group or others (mode & 0o066 != 0): the error names the path, and
//     for the mode the fix "chmod 600 PATH";
//   - a secret whose estimated entropy ([EstimateEntropy]) is below
//     [MinSecretBits]: the error names the path and the fix
//     "head -c 48 /dev/urandom | base64 > PATH";
//   - a missing, unreadable, short or oversized file: the error says
//     "the secret file", without the path.
func LoadSecret(path string) (Secret, error) {
	return loadSecret(path, secretNaming{
		the:     "the secret file",
		subject: "secret file " + path,
		chmod:   "run: chmod 600 " + path,
		regen:   "generate one with: head -c 48 /dev/urandom | base64 > " + path,
	})
}

// LoadSecretParam is [LoadSecret] for a path given as the value of
// parameter param of a URL (peer:// URLs' secret-file). Its errors name the
// parameter instead of the path, since [tenure.Redact] hides the values of
// such parameters and a path shown as "xxxxx" makes a fix like
// "chmod 600 xxxxx" useless: "the file named by secret-file is accessible
// by group or others (mode 0644); run chmod 600 on it".
func LoadSecretParam(path, param string) (Secret, error) {
	the := "the file named by " + param
	return loadSecret(path, secretNaming{
		the:     the,
		subject: the,
		chmod:   "run chmod 600 on it",
		regen:   "write a new one into it with: head -c 48 /dev/urandom | base64",
	})
}

// secretNaming is how loadSecret's errors refer to the file.
type secretNaming struct {
	the     string // in errors that must not show the path: "the secret file"
	subject string // in the others: "secret file /etc/tenure/peer.secret"
	chmod   string // the fix for a file others can read
	regen   string // the fix for a weak secret
}

func loadSecret(path string, n secretNaming) (Secret, error) {
	if path == "" {
		return Secret{}, invalidf("no secret file given (set secret-file)")
	}
	// O_NONBLOCK: a FIFO in the file's place must not hang the open.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return Secret{}, invalidf("cannot open %s: %v", n.the, scrubPathErr(err))
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return Secret{}, invalidf("cannot stat %s: %v", n.the, scrubPathErr(err))
	}
	if !fi.Mode().IsRegular() {
		return Secret{}, invalidf("%s is not a regular file (%s)", n.subject, fi.Mode().Type())
	}
	if fi.Mode().Perm()&0o066 != 0 {
		return Secret{}, invalidf("%s is accessible by group or others (mode %#o); %s", n.subject, fi.Mode().Perm(), n.chmod)
	}
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretLen+1))
	if err != nil {
		return Secret{}, invalidf("cannot read %s: %v", n.the, scrubPathErr(err))
	}
	if len(data) > MaxSecretLen {
		return Secret{}, invalidf("%s is longer than %d bytes", n.the, MaxSecretLen)
	}
	data = bytes.TrimSpace(data)
	s, err := NewSecret(data)
	if err != nil {
		return Secret{}, err
	}
	if bits := EstimateEntropy(data); bits < MinSecretBits {
		return Secret{}, invalidf("%s has too little entropy (about %d bits, at least %d needed); %s", n.subject, int(bits), MinSecretBits, n.regen)
	}
	return s, nil
}

// EstimateEntropy estimates the entropy of secret b in bits, to catch
// secrets chosen by hand, not to certify random ones. It is the number of
// symbols left after a greedy LZ77 parse (each repeat of 3 or more bytes
// that occurred earlier, overlapping allowed, counts as one symbol, so
// "abcabcabc..." counts as 4) times the empirical Shannon entropy per byte
// of b (so short alphabets count for little: 32 × 'a' is 0 bits, random hex
// about 3.7 bits a byte). 48 random bytes in base64 estimate about 340
// bits; 32 random hex digits about 100.
func EstimateEntropy(b []byte) float64 {
	if len(b) == 0 {
		return 0
	}
	var counts [256]int
	for _, c := range b {
		counts[c]++
	}
	h := 0.0
	for _, n := range counts {
		if n > 0 {
			p := float64(n) / float64(len(b))
			h -= p * math.Log2(p)
		}
	}
	symbols := 0
	for i := 0; i < len(b); symbols++ {
		best := 0
		for j := 0; j < i; j++ {
			k := 0
			for i+k < len(b) && b[j+k] == b[i+k] {
				k++
			}
			best = max(best, k)
		}
		if best >= 3 {
			i += best
		} else {
			i++
		}
	}
	return float64(symbols) * h
}

// scrubPathErr keeps the operation and cause of a path error but not the
// path, which operators sometimes put secrets in.
func scrubPathErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Op, pe.Err)
	}
	return err
}

// IsZero reports whether s holds no key.
func (s Secret) IsZero() bool { return len(s.b) == 0 }

// Bytes returns the key. Do not log it.
func (s Secret) Bytes() []byte { return s.b }

// String returns "xxxxx".
func (s Secret) String() string { return "xxxxx" }

// GoString returns a redacted form for %#v.
func (s Secret) GoString() string { return "tcp.Secret{xxxxx}" }

// Format prints "xxxxx" for every verb.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, "xxxxx") }

// LogValue keeps the secret out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue("xxxxx") }

// invalidf returns an error wrapping tenure.ErrInvalid.
func invalidf(format string, args ...any) error {
	return fmt.Errorf("%w: peer: "+format, append([]any{tenure.ErrInvalid}, args...)...)
}
