package testserver

import "testing"

// TestFreePortNeverRepeats asks for many ports in a row and in parallel:
// none may be handed out twice, even when the kernel offers a port again
// once its probe is closed (which it did in CI, giving two peer group
// members one address).
func TestFreePortNeverRepeats(t *testing.T) {
	const n = 300
	got := make(chan int, n)
	for range 3 {
		go func() {
			for range n / 3 {
				port, err := freePort()
				if err != nil {
					t.Error(err)
				}
				got <- port
			}
		}()
	}
	seen := map[int]bool{}
	for range n {
		port := <-got
		if port <= 0 || port > 65535 {
			t.Fatalf("FreePort = %d, not a port", port)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}
