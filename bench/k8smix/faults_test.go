package k8smix

import (
	"context"
	"errors"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
)

var errKilled = errors.New("k8smix: the candidate was killed")

// faults sits under one candidate's API client, as its network and
// process do: killed, every request and every open watch stream fails at
// once; frozen, every request and every read of a response body (a watch
// stream included) hangs until thawed or the request's context ends, as
// over a hung connection. The candidate's own goroutines keep running.
type faults struct {
	next   http.RoundTripper
	killed atomic.Bool
	mu     sync.Mutex
	thaw   chan struct{} // non-nil while frozen
}

func (f *faults) kill() { f.killed.Store(true) }

func (f *faults) freeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thaw == nil {
		f.thaw = make(chan struct{})
	}
}

func (f *faults) unfreeze() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.thaw != nil {
		close(f.thaw)
		f.thaw = nil
	}
}

// hold blocks while frozen; it fails once killed or ctx ends.
func (f *faults) hold(ctx context.Context) error {
	f.mu.Lock()
	thaw := f.thaw
	f.mu.Unlock()
	if thaw != nil {
		select {
		case <-thaw:
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if f.killed.Load() {
		return errKilled
	}
	return nil
}

func (f *faults) RoundTrip(req *http.Request) (*http.Response, error) {
	if err := f.hold(req.Context()); err != nil {
		return nil, err
	}
	resp, err := f.next.RoundTrip(req)
	if err != nil {
		return nil, err
	}
	if err := f.hold(req.Context()); err != nil {
		resp.Body.Close()
		return nil, err
	}
	resp.Body = &faultyBody{ReadCloser: resp.Body, f: f, ctx: req.Context()}
	return resp, nil
}

type faultyBody struct {
	io.ReadCloser
	f   *faults
	ctx context.Context
}

func (b *faultyBody) Read(p []byte) (int, error) {
	if err := b.f.hold(b.ctx); err != nil {
		return 0, err
	}
	n, err := b.ReadCloser.Read(p)
	if herr := b.f.hold(b.ctx); herr != nil {
		return 0, herr // data that arrived while frozen or after a kill is lost
	}
	return n, err
}
