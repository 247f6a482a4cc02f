package tenure_test

import (
	"errors"
	"log/slog"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/tenurehq/tenure"
	"github.com/tenurehq/tenure/store/memory"
)

// keepAlives records what SessionConfig.OnKeepAlive receives.
type keepAlives struct {
	mu  sync.Mutex
	got []tenure.SessionKeepAlive
}

func (k *keepAlives) on(ka tenure.SessionKeepAlive) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.got = append(k.got, ka)
}

func (k *keepAlives) take() []tenure.SessionKeepAlive {
	k.mu.Lock()
	defer k.mu.Unlock()
	got := k.got
	k.got = nil
	return got
}

// TestSessionReportsEveryKeepAlive: OnKeepAlive hears of each keep-alive
// with the grants it kept, of each failure, and of the session's end at
// its renew deadline, which is all a process leading its keys through a
// session can judge the session's health by.
func TestSessionReportsEveryKeepAlive(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		st := &counted{Store: memory.New(nil)}
		var seen keepAlives
		s, err := tenure.NewSession(tenure.SessionConfig{Store: st, TTL: ttl, OnKeepAlive: seen.on,
			Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			t.Fatal(err)
		}
		const n = 5
		f := &fleet{book: &book{began: make(chan *term, n*4), ended: make(chan *term, n*4)}}
		for i := range n {
			e := sessionElector(t, s, string(rune('a'+i)))
			f.electors = append(f.electors, e)
			f.runs = append(f.runs, start(e, f.book.task(e.Status().Key, nil)))
		}
		for range n {
			<-f.book.began
		}
		seen.take()
		time.Sleep(ttl)
		synctest.Wait()
		got := seen.take()
		if want := int(ttl / s.Config().RenewInterval); len(got) < want-1 || len(got) > want+1 {
			t.Fatalf("%d keep-alives reported in a TTL, want about %d: %+v", len(got), want, got)
		}
		for _, ka := range got {
			if ka.Err != nil || ka.Grants != n || ka.Gone != 0 || ka.Sent.IsZero() || ka.Took < 0 {
				t.Errorf("idle keep-alive reported as %+v, want no error, %d grants, none gone", ka, n)
			}
		}

		st.partitioned.Store(true)
		for range n {
			<-f.book.ended
		}
		synctest.Wait()
		got = seen.take()
		if len(got) < 2 {
			t.Fatalf("partitioned: %d reports, want failures then the end: %+v", len(got), got)
		}
		for _, ka := range got[:len(got)-1] {
			if ka.Err == nil || errors.Is(ka.Err, tenure.ErrRenewDeadline) {
				t.Errorf("a keep-alive cut off was reported as %+v, want a transient failure", ka)
			}
		}
		end := got[len(got)-1]
		if !errors.Is(end.Err, tenure.ErrRenewDeadline) || end.Grants != 0 {
			t.Errorf("the session's end was reported as %+v, want ErrRenewDeadline and no grants left", end)
		}
		st.partitioned.Store(false)
		f.stop(t, s)
	})
}
