package peer_test

import (
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/peer"
	"github.com/tenurehq/tenure/peer/tcp"
	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

func TestParseMembers(t *testing.T) {
	g, err := transport.ParseMembers("3=127.0.0.1:7003, 1=127.0.0.1:7001,2=[::1]:7002")
	if err != nil {
		t.Fatal(err)
	}
	if ids := fmt.Sprint(g.IDs()); ids != "[1 2 3]" || g.Addr(2) != "[::1]:7002" || g.Index(3) != 2 {
		t.Fatalf("group %v: ids %s", g, ids)
	}
	for _, bad := range []string{"", "1", "0=127.0.0.1:1", "x=127.0.0.1:1", "1=127.0.0.1:1,1=127.0.0.1:2",
		"1=127.0.0.1:1,2=127.0.0.1:1", "1=nohostport", "-1=127.0.0.1:1"} {
		if _, err := transport.ParseMembers(bad); !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("ParseMembers(%q) = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestParseURL(t *testing.T) {
	secret := writeSecret(t, testSecret)
	dir := t.TempDir()
	raw := "peer://?id=2&peers=1=127.0.0.1:7001,2=127.0.0.1:7002&algorithm=ring&secret-file=" + secret +
		"&state-dir=" + dir + "&heartbeat=20ms&timeout=100ms&no-preempt=1&key=jobs&priority=0"
	u, _ := url.Parse(raw)
	c, err := peer.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if c.ID != 2 || c.Group.Len() != 2 || c.Algorithm != "ring" || c.Heartbeat.String() != "20ms" ||
		c.Timeout.String() != "100ms" || !c.NoPreempt || c.Key != "jobs" || c.StateDir != dir ||
		c.Options != nil || string(c.Secret.Bytes()) != testSecret || c.Priority == nil || c.MemberPriority() != tenure.NeverLead {
		t.Fatalf("parsed %+v", c)
	}
	if err := c.WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	// The secret shows nowhere: not in the config's renderings, not in logs.
	var logged strings.Builder
	slog.New(slog.NewTextHandler(&logged, nil)).Info("config", "cfg", c, "secret", c.Secret)
	for _, s := range []string{fmt.Sprint(c), fmt.Sprintf("%+v", c), fmt.Sprintf("%#v", c.Secret), logged.String(), tenure.Redact(raw)} {
		if strings.Contains(s, testSecret) || strings.Contains(s, "0123456789abcdef") {
			t.Fatalf("secret leaked: %s", s)
		}
	}
	if strings.Contains(tenure.Redact(raw), secret) {
		t.Fatalf("Redact shows the secret file path: %s", tenure.Redact(raw))
	}
}

func TestParseURLErrors(t *testing.T) {
	secret := writeSecret(t, testSecret)
	short := writeSecret(t, "too-short")
	weak := writeSecret(t, strings.Repeat("password", 4))
	loose := writeSecret(t, testSecret)
	if err := os.Chmod(loose, 0o644); err != nil {
		t.Fatal(err)
	}
	base := "peer://?peers=1=127.0.0.1:7001,2=127.0.0.1:7002&state-dir=/tmp/x&"
	for _, tc := range []struct{ url, want string }{
		{base + "id=&secret-file=" + secret, "not a positive"},
		{base + "id=0&secret-file=" + secret, "not a positive"},
		{base + "id=1&secret-file=" + short, "at least 32"},
		{base + "id=1", "no secret file"},
		{base + "id=1&secret-file=/nonexistent/s", "cannot open the file named by secret-file: open: no such file"},
		// Redact hides the path, so these name the parameter and a fix
		// that works without it.
		{base + "id=1&secret-file=" + loose, "the file named by secret-file is accessible by group or others (mode 0644); run chmod 600 on it"},
		{base + "id=1&secret-file=" + weak, "the file named by secret-file has too little entropy (about 24 bits, at least 96 needed); write a new one into it with: head -c 48 /dev/urandom | base64"},
		{base + "id=1&id=2&secret-file=" + secret, "given 2 times"},
		{base + "id=1&heartbeat=fast&secret-file=" + secret, "heartbeat"},
		{base + "id=1&no-preempt=maybe&secret-file=" + secret, "no-preempt"},
		{base + "id=1&priority=-1&secret-file=" + secret, `parameter priority="-1" is not an integer from 0 (never lead) to 1000`},
		{base + "id=1&priority=1001&secret-file=" + secret, `priority="1001"`},
		{base + "id=1&priority=high&secret-file=" + secret, `priority="high"`},
		// A misspelt parameter is refused, not ignored: ignored, this one
		// would let a member meant never to lead lead.
		{base + "id=1&priorty=0&secret-file=" + secret, `unknown URL parameter "priorty" for algorithm bully (known: id, peers, algorithm,`},
		{base + "id=1&algorithm=ring&no-prempt=1&secret-file=" + secret, `unknown URL parameter "no-prempt" for algorithm ring`},
		{base + "id=1&algorithm=lowest&election-timeout=1s&secret-file=" + secret, `unknown URL parameter "election-timeout" for algorithm lowest`},
		{"peer://host:1/?id=1", "only query parameters"},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		_, err = peer.ParseURL(u)
		if !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want ErrInvalid mentioning %q", tc.url, err, tc.want)
		}
		if err != nil && (strings.Contains(err.Error(), testSecret) || strings.Contains(err.Error(), "password")) {
			t.Errorf("%s: error shows the secret: %v", tc.url, err)
		}
		if p := u.Query().Get("secret-file"); p != "" && err != nil && strings.Contains(err.Error(), p) {
			t.Errorf("%s: error shows the secret file's path, which Redact hides: %v", tc.url, err)
		}
	}
}

func TestValidate(t *testing.T) {
	g, _ := transport.ParseMembers("1=127.0.0.1:7001,2=127.0.0.1:7002")
	s, _ := tcp.NewSecret([]byte(testSecret))
	ok := peer.Config{ID: 1, Group: g, Algorithm: "bully", Secret: s, StateDir: t.TempDir()}
	if err := ok.WithDefaults().Validate(); err != nil {
		t.Fatal(err)
	}
	if ok.MemberPriority() != tenure.DefaultPriority {
		t.Fatalf("a Config without Priority has priority %d; want the default", ok.MemberPriority())
	}
	for name, mut := range map[string]func(*peer.Config){
		"not a member":  func(c *peer.Config) { c.ID = 9 },
		"unknown alg":   func(c *peer.Config) { c.Algorithm = "paxos" },
		"short timeout": func(c *peer.Config) { c.Timeout = c.Heartbeat },
		"no secret":     func(c *peer.Config) { c.Secret = tcp.Secret{} },
		"no state dir":  func(c *peer.Config) { c.StateDir = "" },
		"priority -1":   func(c *peer.Config) { c.Priority = new(-1) },
		"priority 1001": func(c *peer.Config) { c.Priority = new(1001) },
	} {
		c := ok.WithDefaults()
		mut(&c)
		if err := c.Validate(); !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("%s: Validate() = %v, want ErrInvalid", name, err)
		}
	}
}

func TestAlgorithmsRegistered(t *testing.T) {
	got := fmt.Sprint(peer.Algorithms())
	for _, a := range []string{"bully", "lowest", "ring"} {
		if !strings.Contains(got, a) {
			t.Fatalf("Algorithms() = %s, missing %s", got, a)
		}
	}
	defer func() {
		if recover() == nil {
			t.Fatal("registering bully twice did not panic")
		}
	}()
	peer.Register("bully", peer.NodeOpener(func() peer.Algorithm { return nil }))
}

// TestParseURLObserver: a URL without id configures an observer, which
// needs no state-dir but still needs the secret.
func TestParseURLObserver(t *testing.T) {
	secret := writeSecret(t, testSecret)
	u, err := url.Parse("peer://?peers=1=127.0.0.1:7001,2=127.0.0.1:7002&algorithm=lowest&secret-file=" + secret)
	if err != nil {
		t.Fatal(err)
	}
	c, err := peer.ParseURL(u)
	if err != nil {
		t.Fatal(err)
	}
	if !c.IsObserver() || c.ID != wire.ObserverID {
		t.Fatalf("ParseURL without id: ID %d, IsObserver %t; want an observer", c.ID, c.IsObserver())
	}
	if err := c.WithDefaults().Validate(); err != nil {
		t.Fatalf("observer config: %v", err)
	}
	if s := c.String(); !strings.Contains(s, "observer") || strings.Contains(s, testSecret) {
		t.Fatalf("String() = %q", s)
	}
	u, _ = url.Parse("peer://?peers=1=127.0.0.1:7001,2=127.0.0.1:7002")
	if _, err := peer.ParseURL(u); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "secret") {
		t.Fatalf("observer URL without a secret: %v, want ErrInvalid naming the secret", err)
	}
	noAddr, err := transport.NewGroup([]transport.Member{{ID: 1, Addr: "127.0.0.1:7001"}, {ID: 2}})
	if err != nil {
		t.Fatal(err)
	}
	c.Group = noAddr
	if err := c.WithDefaults().Validate(); !errors.Is(err, tenure.ErrInvalid) || !strings.Contains(err.Error(), "member 2") {
		t.Fatalf("observer of a member without an address: %v, want ErrInvalid naming member 2", err)
	}
}
