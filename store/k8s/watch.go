package k8s

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/tenurehq/tenure"
)

// watchSetupTimeout bounds the list and the watch request Watch makes
// before it returns.
const watchSetupTimeout = 10 * time.Second

// Watch implements [tenure.Reader] with a Kubernetes watch on the one
// Lease (a field selector on its name), started at the resourceVersion of
// the list that gave the first record, so nothing between the two is
// missed; [tenure.Follow] delivers. Every event is decoded into a record
// without another request;
// a grant that expires without a write (a crashed holder) is reported when
// this handle has seen it unchanged for its lease duration, by one read.
// The channel is closed when ctx is done, the store is closed, or the API
// server ends the watch (it does after its request timeout, by default 30
// to 60 minutes, and on errors); the caller then reads and watches again.
//
// Watch blocks until the watch is set up (at most 10 s, or until ctx is
// done), so that a change right after it returns is delivered; it fails if
// the API server cannot be reached or refuses (RBAC: list and watch on
// leases).
func (s *Store) Watch(ctx context.Context, key string) (<-chan tenure.Record, error) {
	if err := tenure.CheckKey(key); err != nil {
		return nil, err
	}
	if err := s.usable(ctx); err != nil {
		return nil, err
	}
	name := s.LeaseName(key)
	wctx, cancel := context.WithCancel(ctx)
	stop := context.AfterFunc(s.bg, cancel) // Close ends the watch
	setup, setupDone := context.WithTimeout(wctx, watchSetupTimeout)
	defer setupDone()
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	list, err := s.leases.List(setup, metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		err = s.fail(setup, "watch (list)", key, err) // before cancel, which would read as the cause
		stop()
		cancel()
		return nil, err
	}
	first := tenure.Record{Key: key}
	now := time.Now()
	if len(list.Items) == 0 {
		s.obs.Forget(name)
		first = s.seen.Record(first)
	} else if first, err = s.recordOf(key, &list.Items[0], now); err != nil {
		stop()
		cancel()
		return nil, err
	}
	// The watch's stream lives as long as wctx; only its start is bounded.
	slow := time.AfterFunc(watchSetupTimeout, cancel)
	w, err := s.leases.Watch(wctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
	if !slow.Stop() && err == nil {
		w.Stop()
		err = context.DeadlineExceeded
	}
	if err != nil {
		err = s.fail(wctx, "watch", key, err)
		stop()
		cancel()
		return nil, err
	}
	records := make(chan tenure.Record)
	go func() {
		defer cancel()
		defer close(records)
		defer w.Stop()
		defer stop()
		for {
			select {
			case ev, open := <-w.ResultChan():
				if !open {
					return
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				r, ok := s.eventRecord(key, ev)
				if !ok {
					return
				}
				select {
				case records <- r:
				case <-wctx.Done():
					return
				}
			case <-wctx.Done():
				return
			}
		}
	}()
	return tenure.Follow{
		Get:     func(ctx context.Context) (tenure.Record, error) { return s.Get(ctx, key) },
		Initial: &first,      // the record the watch starts from
		Done:    s.bg.Done(), // Close ends the watch
		Records: records,
	}.Start(wctx), nil
}

// eventRecord decodes a watch event into the key's record. It reports
// false for an event that ends the watch (an error, or an object that is
// not a Lease).
func (s *Store) eventRecord(key string, ev watch.Event) (tenure.Record, bool) {
	now := time.Now()
	switch ev.Type {
	case watch.Added, watch.Modified:
		l, ok := ev.Object.(*coordinationv1.Lease)
		if !ok {
			return tenure.Record{}, false
		}
		s.last.Store(l.Name, l)
		r, err := s.recordOf(key, l, now)
		return r, err == nil
	case watch.Deleted:
		if l, ok := ev.Object.(*coordinationv1.Lease); ok {
			// The last version's term, so a holder whose Lease was deleted
			// sees its grant gone.
			if v, ok := read(key, l); ok {
				s.seen.Observe(key, v.term, 0)
			}
			s.obs.Forget(l.Name)
			s.last.Delete(l.Name)
		}
		return s.seen.Record(tenure.Record{Key: key}), true
	}
	return tenure.Record{}, false // watch.Error
}
