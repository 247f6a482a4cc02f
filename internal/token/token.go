// Package token makes the random tokens that stores hand out with their
// grants and sessions, and that test servers use as credentials.
package token

import (
	"crypto/rand"
	"encoding/hex"
)

// Hex returns n random bytes from crypto/rand, hex-encoded (2n characters).
// It does not block and is safe for concurrent use; crypto/rand.Read never
// fails, so neither does Hex.
func Hex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
