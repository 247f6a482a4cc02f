package peer_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/peer"
)

// FuzzParseURL: parsing a peer URL never panics, and the secret never
// appears in its error, whatever the other parameters.
func FuzzParseURL(f *testing.F) {
	f.Add("id=2&peers=1=127.0.0.1:7001,2=127.0.0.1:7002&algorithm=bully&heartbeat=100ms&timeout=500ms&no-preempt=1&key=k")
	f.Add("peers=1=h:1&algorithm=raft&raft-heartbeat-timeout=1s")
	f.Add("id=&peers=1=h:1,1=h:2&heartbeat=-1s&timeout=x&no-preempt=maybe&secret-file=/etc/passwd")
	f.Add("id=99999999999999999999999&peers=%zz&state-dir=/tmp&id=2")
	secret := filepath.Join(f.TempDir(), "peer.secret")
	if err := os.WriteFile(secret, []byte(testSecret+"\n"), 0o600); err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, query string) {
		for _, q := range []string{query, query + "&secret-file=" + url.QueryEscape(secret)} {
			u, err := url.Parse("peer://?" + q)
			if err != nil {
				continue
			}
			if _, err := peer.ParseURL(u); err != nil {
				if strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "\n") {
					t.Fatalf("ParseURL(%q): the error shows the secret or spans lines: %q", q, err)
				}
			}
		}
	})
}
