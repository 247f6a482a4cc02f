package peer

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
)

// MinSecretLen is the shortest shared secret accepted, in bytes (after
// trimming surrounding whitespace): 32 bytes, the HMAC-SHA256 key size.
const MinSecretLen = 32

// MaxSecretLen bounds the secret file read.
const MaxSecretLen = 4096

// MACLen is the length of an HMAC-SHA256 tag.
const MACLen = sha256.Size

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

// LoadSecret reads a shared secret from path: the file's content with
// surrounding whitespace (a trailing newline) removed, at least
// [MinSecretLen] bytes. Generate one with
//
//	head -c 48 /dev/urandom | base64 > /etc/tenure/peer.secret
//
// Errors name the path but never the content. A file readable by group or
// others is accepted (the caller decides policy); a missing or short file is
// an error wrapping [tenure.ErrInvalid].
func LoadSecret(path string) (Secret, error) {
	if path == "" {
		return Secret{}, invalidf("no secret file given (set secret-file)")
	}
	f, err := os.Open(path)
	if err != nil {
		return Secret{}, invalidf("cannot open the secret file: %v", scrubPathErr(err))
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxSecretLen+1))
	if err != nil {
		return Secret{}, invalidf("cannot read the secret file: %v", scrubPathErr(err))
	}
	if len(data) > MaxSecretLen {
		return Secret{}, invalidf("the secret file is longer than %d bytes", MaxSecretLen)
	}
	return NewSecret(bytes.TrimSpace(data))
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
func (s Secret) GoString() string { return "peer.Secret{xxxxx}" }

// Format prints "xxxxx" for every verb.
func (s Secret) Format(f fmt.State, _ rune) { fmt.Fprint(f, "xxxxx") }

// LogValue keeps the secret out of slog output.
func (s Secret) LogValue() slog.Value { return slog.StringValue("xxxxx") }

// Sign returns the HMAC-SHA256 of data under s.
func (s Secret) Sign(data []byte) []byte {
	m := hmac.New(sha256.New, s.b)
	m.Write(data)
	return m.Sum(nil)
}

// Verify reports, in constant time, whether mac is the HMAC-SHA256 of data
// under s. A zero secret verifies nothing.
func (s Secret) Verify(data, mac []byte) bool {
	if s.IsZero() || len(mac) != MACLen {
		return false
	}
	return hmac.Equal(s.Sign(data), mac)
}
