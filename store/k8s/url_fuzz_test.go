package k8s

import (
	"context"
	"errors"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/storetest"
)

// writeKubeconfig writes a kubeconfig whose user has token, for a server
// nobody listens on, and returns its path.
func writeKubeconfig(t testing.TB, token string) string {
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:1\n" +
		"users:\n- name: u\n  user:\n    token: " + token + "\ncontexts:\n- name: ctx\n  context:\n    cluster: c\n    user: u\n    namespace: team-a\ncurrent-context: ctx\n"
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// FuzzParseURL: Open never panics, and with a secret planted in any
// secret position neither its error nor the store's description of
// itself (used in every later error) contains it. Open dials nothing.
func FuzzParseURL(f *testing.F) {
	kc := writeKubeconfig(f, "tok-"+storetest.SecretMark)
	f.Add("k8s://team-a/jobs.?kubeconfig="+url.QueryEscape(kc), uint8(0), "k8s", "u", "ns", "p", "context=ctx")
	f.Add("k8s://Bad_NS/x", uint8(3), "k8s", "", "team-a", "UPPER", "kubeconfig=/nonexistent")
	storetest.FuzzOpen(f, "k8s://default/p.?kubeconfig=/nonexistent", []string{"k8s", ""},
		storetest.OpenOffline(Open, func(s *Store) []string { return []string{s.where} }))
}

func TestParseURL(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	kc := writeKubeconfig(t, "sekrit-token")
	good := map[string]struct{ ns, prefix string }{
		"k8s://default?kubeconfig=" + kc:                {"default", ""},
		"k8s://team-a/jobs.?kubeconfig=" + kc:           {"team-a", "jobs."},
		"k8s:///ops-?kubeconfig=" + kc + "&context=ctx": {"team-a", "ops-"}, // the context's namespace
	}
	for raw, want := range good {
		s, err := Open(context.Background(), raw)
		if err != nil {
			t.Errorf("Open(%q): %v", raw, err)
			continue
		}
		if s.Namespace() != want.ns || s.prefix != want.prefix {
			t.Errorf("Open(%q): namespace %q prefix %q, want %q %q", raw, s.Namespace(), s.prefix, want.ns, want.prefix)
		}
		s.Close()
	}
	bad := []string{
		"k8s://Team/x?kubeconfig=" + kc,
		"k8s://a:80/x?kubeconfig=" + kc,
		"k8s://user:pw@ns/x?kubeconfig=" + kc,
		"k8s://ns/Jobs?kubeconfig=" + kc,
		"k8s://ns/a..b?kubeconfig=" + kc,
		"k8s://ns/x?kubeconfig=" + kc + "&qps=5",
		"k8s://ns/x?kubeconfig=",
		"k8s:ns",
		// A kubeconfig or context the URL names and that does not load
		// is a bad URL too.
		"k8s://ns/x?kubeconfig=" + kc + "&context=nope",
		"k8s://ns/x?kubeconfig=" + kc + ".missing",
	}
	for _, raw := range bad {
		_, err := Open(context.Background(), raw)
		if err == nil {
			t.Errorf("Open(%q) succeeded", raw)
			continue
		}
		if strings.Contains(err.Error(), "\n") || strings.Contains(err.Error(), "sekrit-token") || strings.Contains(err.Error(), "pw@") {
			t.Errorf("Open(%q): error %q spans lines or quotes a secret", raw, err)
		}
		if !errors.Is(err, tenure.ErrInvalid) {
			t.Errorf("Open(%q): %v, want ErrInvalid", raw, err)
		}
	}
}

// With no client configuration anywhere, the error says where the store
// looked and what to add, not client-go's advice to set
// KUBERNETES_MASTER, which the store does not read.
func TestNoClientConfiguration(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBECONFIG", "")
	t.Setenv("HOME", t.TempDir())
	_, err := Open(context.Background(), "k8s://jobs")
	if err == nil || strings.Contains(err.Error(), "KUBERNETES_MASTER") || !strings.Contains(err.Error(), "add ?kubeconfig=PATH to the URL") {
		t.Fatalf("Open with no configuration: %v; want an error saying to add ?kubeconfig=PATH", err)
	}
}

func TestLeaseNames(t *testing.T) {
	for key, want := range map[string]string{
		"my-controller": "my-controller",
		"kube-system.x": "kube-system.x",
	} {
		if got := leaseName("", key); got != want {
			t.Errorf("leaseName(%q) = %q, want %q", key, got, want)
		}
	}
	seen := map[string]string{}
	for _, key := range []string{"Jobs/Nightly", "jobs/nightly", "jobs-nightly", "a..b", "-x-", "é", strings.Repeat("K", 256), strings.Repeat("k", 256)} {
		for _, prefix := range []string{"", "p.", "p-"} {
			n := leaseName(prefix, key)
			if !isSubdomain(n) || !strings.HasPrefix(n, prefix) {
				t.Errorf("leaseName(%q, %q) = %q, not a valid name with the prefix", prefix, key, n)
			}
			if other, dup := seen[n]; dup {
				t.Errorf("keys %q and %q both map to %q", other, key, n)
			}
			seen[n] = key
		}
	}
}

// A store on an API server that is down fails with errors that say where
// and never quote the bearer token.
func TestUnreachable(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	st, err := Open(context.Background(), "k8s://jobs?kubeconfig="+url.QueryEscape(writeKubeconfig(t, "tok-unreachable-secret")))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	storetest.Unreachable(t, st, "127.0.0.1:1", "tok-unreachable-secret")
}
