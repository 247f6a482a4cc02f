package local

import (
	"encoding/hex"
	"testing"
)

// TestOnDiskFormatsPinned pins the bytes of a state file and of a session
// file. If it fails, the on-disk format changed: builds already deployed
// read these files (a rolling upgrade runs both on one directory), and
// refuse only what their version check or strict decoding catches. Bump
// stateVersion or sessionVersion if an older build would misread the new
// files (see the comment at stateVersion), then update the literals.
func TestOnDiskFormatsPinned(t *testing.T) {
	st := state{Key: "k", Holder: "h", Term: 7, TTL: 1e9, Expires: 5e9, BootID: "b", Token: "t", Value: "v", Session: "00112233445566778899aabbccddeeff"}
	wantState := "74656e75726500" + "4c" + "0001" + "000000a0" +
		hex.EncodeToString([]byte(`{"key":"k","holder":"h","term":7,"ttl_ns":1000000000,"expires_ns":5000000000,"boot_id":"b","token":"t","value":"v","session":"00112233445566778899aabbccddeeff"}`))
	if got := hex.EncodeToString(encodeState(st)); got[:len(got)-8] != wantState {
		t.Errorf("state file:\n got %s\nwant %s + its CRC", got, wantState)
	}
	sf := sessionFile{id: "00112233445566778899aabbccddeeff", expires: 5e9, ttl: 1e9, bootID: "b"}
	b := sf.encode()
	const wantSession = "74656e7572650053" + "0001" + "000000012a05f200" + "000000003b9aca00" + "01" + "62"
	if got := hex.EncodeToString(b[:28]); got != wantSession || string(b[91:123]) != sf.id || len(b) != sessionFileLen {
		t.Errorf("session file: got %s... (%d bytes), want %s...", got, len(b), wantSession)
	}
}
