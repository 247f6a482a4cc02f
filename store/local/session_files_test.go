//go:build linux

package local

import (
	"bytes"
	"testing"
)

func sampleSession() sessionFile {
	return sessionFile{id: "00112233445566778899aabbccddeeff", expires: 123456789012345, ttl: 15e9,
		bootID: "940f8d4b-1ba0-4b49-9109-5ad020364d1b"}
}

func TestSessionFileRoundTrip(t *testing.T) {
	sf := sampleSession()
	data := sf.encode()
	if len(data) != sessionFileLen {
		t.Fatalf("encoded %d bytes, want %d", len(data), sessionFileLen)
	}
	got, err := decodeSession(data)
	if err != nil || got != sf {
		t.Fatalf("decode(encode(%+v)) = %+v, %v", sf, got, err)
	}
	// Every single-byte change is refused.
	for i := range data {
		bad := bytes.Clone(data)
		bad[i] ^= 0x20
		if got, err := decodeSession(bad); err == nil {
			t.Fatalf("byte %d flipped: decoded %+v", i, got)
		}
	}
	for _, bad := range [][]byte{nil, data[:len(data)-1], append(bytes.Clone(data), 0)} {
		if _, err := decodeSession(bad); err == nil {
			t.Fatalf("%d bytes decoded", len(bad))
		}
	}
}

// FuzzDecodeSession checks that the session file decoder never panics and
// that whatever it accepts is a valid session that encodes to the same
// bytes: no two files mean one session, and nothing it accepts is
// something the holder could not have written.
//
//	go test -fuzz=FuzzDecodeSession ./store/local
func FuzzDecodeSession(f *testing.F) {
	data := sampleSession().encode()
	f.Add(data)
	f.Add(data[:len(data)-1])
	f.Add([]byte{})
	f.Add([]byte(sessionMagic))
	f.Fuzz(func(t *testing.T, data []byte) {
		sf, err := decodeSession(data)
		if err != nil {
			return
		}
		if !validSessionID(sf.id) || sf.ttl <= 0 || sf.expires < 0 || sf.bootID == "" {
			t.Fatalf("decoded an invalid session %+v", sf)
		}
		if again := sf.encode(); !bytes.Equal(again, data) {
			t.Fatalf("decoded %+v from %x, which encodes as %x", sf, data, again)
		}
	})
}
