package local

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"strings"
	"testing"
	"time"
)

func sampleStates() []state {
	return []state{
		{Key: "k", Term: 1},
		{Key: "jobs/nightly", Holder: "host-a:1234", Term: 42, TTL: int64(15 * time.Second),
			Expires: 123456789012345, BootID: "940f8d4b-1ba0-4b49-9109-5ad020364d1b", Token: "00112233445566778899aabbccddeeff"},
		{Key: "ünïcode ✓", Holder: "<&>\"'", Term: 1<<64 - 1, TTL: 1, Expires: 1<<63 - 1, BootID: "b", Token: "t"},
	}
}

func TestStateRoundTrip(t *testing.T) {
	for _, st := range sampleStates() {
		got, err := decodeState(encodeState(st))
		if err != nil {
			t.Fatalf("decode(encode(%+v)): %v", st, err)
		}
		if got != st {
			t.Fatalf("decode(encode(%+v)) = %+v", st, got)
		}
	}
}

func TestDecodeStateRejects(t *testing.T) {
	valid := encodeState(sampleStates()[1])
	flip := func(i int) []byte {
		b := bytes.Clone(valid)
		b[i] ^= 0x20
		return b
	}
	version := bytes.Clone(valid)
	version[len(stateMagic)+1] = 2
	cases := map[string]struct {
		data []byte
		want string
	}{
		"empty":           {nil, "shorter than"},
		"truncated":       {valid[:len(valid)/2], "truncated"},
		"no checksum":     {valid[:len(valid)-4], "truncated"},
		"trailing byte":   {append(bytes.Clone(valid), 0), "trailing"},
		"bad magic":       {flip(0), "bad magic"},
		"unknown version": {version, "version 2"},
		"body bit flip":   {flip(headerLen + 5), "checksum"},
		"crc bit flip":    {flip(len(valid) - 1), "checksum"},
		"garbage":         {bytes.Repeat([]byte("garbage!"), 20), "bad magic"},
		"zero term":       {encodeState(state{Key: "k"}), "term is 0"},
		"held no token":   {encodeState(state{Key: "k", Holder: "h", Term: 1, TTL: 1, BootID: "b"}), "without ttl, token"},
		"bad key":         {encodeState(state{Key: "", Term: 1}), "key is empty"},
	}
	for name, c := range cases {
		_, err := decodeState(c.data)
		if err == nil {
			t.Errorf("%s: decoded without error", name)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: error %q, want one line mentioning %q", name, err, c.want)
		}
	}
}

// FuzzDecodeState checks that the decoder never panics, and that whatever it
// accepts encodes back to a file that decodes to the same record. Each input
// is tried as a whole file and, so that the fuzzer reaches the JSON decoder
// past the checksum, as a body framed with a valid header and checksum.
func FuzzDecodeState(f *testing.F) {
	for _, st := range sampleStates() {
		b := encodeState(st)
		f.Add(b)
		f.Add(b[:len(b)-1])
	}
	f.Add([]byte(stateMagic + "\x00\x01\x00\x00\x00\x02{}\x00\x00\x00\x00"))
	f.Add([]byte(`{"key":"k","holder":"","term":3,"ttl_ns":0,"expires_ns":0,"boot_id":"","token":""}`))
	f.Add([]byte(`{"key":"k","holder":"h","term":1,"ttl_ns":5,"expires_ns":9,"boot_id":"b","token":"t"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		checkDecode(t, data)
		checkDecode(t, frame(data))
	})
}

// frame wraps body in a valid header and checksum.
func frame(body []byte) []byte {
	b := []byte(stateMagic)
	b = binary.BigEndian.AppendUint16(b, stateVersion)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)))
	b = append(b, body...)
	return binary.BigEndian.AppendUint32(b, crc32.Checksum(body, castagnoli))
}

func checkDecode(t *testing.T, data []byte) {
	st, err := decodeState(data)
	if err != nil {
		if st != (state{}) {
			t.Fatalf("failed decode returned a record: %+v", st)
		}
		if strings.Contains(err.Error(), "\n") {
			t.Fatalf("error spans lines: %q", err)
		}
		return
	}
	enc := encodeState(st)
	again, err := decodeState(enc)
	if err != nil {
		t.Fatalf("re-decoding an accepted record %+v: %v", st, err)
	}
	if again != st {
		t.Fatalf("round trip changed %+v into %+v", st, again)
	}
	if !bytes.Equal(encodeState(again), enc) {
		t.Fatal("encoding is not deterministic")
	}
}
