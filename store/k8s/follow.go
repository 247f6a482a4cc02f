package k8s

import (
	"context"
	"time"

	"github.com/tenurehq/tenure"
)

// follow stands in for tenure.Follow until the root package has it: the
// shared loop that delivers the current record, then one record per change
// of holder or term (never an older term), re-reading with get when Wake
// receives or when a held record's Remaining ran out. It closes its
// channel when ctx is done, records is closed, or get fails.
//
// TODO: replace with tenure.Follow once it lands on main.
type follow struct {
	Get     func(ctx context.Context) (tenure.Record, error)
	Records <-chan tenure.Record
}

func (f follow) Start(ctx context.Context) <-chan tenure.Record {
	out := make(chan tenure.Record)
	go func() {
		defer close(out)
		var last tenure.Record
		sent, read := false, true
		var cur tenure.Record
		var curAt time.Time
		timer := time.NewTimer(time.Hour)
		defer timer.Stop()
		for {
			if read {
				r, err := f.Get(ctx)
				if err != nil {
					return
				}
				cur, curAt = r, time.Now()
			}
			if !sent || cur.Term > last.Term || cur.Term == last.Term && cur.Holder != last.Holder {
				select {
				case out <- cur:
					last, sent = cur, true
				case <-ctx.Done():
					return
				}
			}
			var tick <-chan time.Time
			if cur.Held() && cur.Remaining > 0 {
				timer.Reset(max(cur.Remaining+time.Millisecond-time.Since(curAt), time.Millisecond))
				tick = timer.C
			}
			select {
			case <-ctx.Done():
				return
			case r, open := <-f.Records:
				if !open {
					return
				}
				cur, curAt, read = r, time.Now(), false
			case <-tick:
				read = true
			}
			timer.Stop()
		}
	}()
	return out
}
