package tenure

import (
	"context"
	"fmt"
)

// PollingWatcher is an optional ability of a [Store] whose Watch polls the
// store (Azure Blob Storage, which has no change notification). While it
// leads, an [Elector] keeps a watch open on other stores so that a grant
// superseded or deleted behind its back ends its task at once; on a store
// whose watch polls it relies on renewals alone, so that leading does not
// multiply the store's request rate. Wrappers of a store must forward it.
type PollingWatcher interface {
	// WatchPolls reports whether Watch polls the store.
	WatchPolls() bool
}

// watchLoss watches the key while l is held and sends on lost the first
// record that shows l superseded or gone (see [Superseded]). A watch that
// cannot be set up or ends is set up again after RetryInterval (not
// jittered: Config.Rand belongs to the elector's goroutine);
// renewals still detect a lost grant meanwhile. It returns, closing done,
// when ctx is done or after sending.
func (e *Elector) watchLoss(ctx context.Context, l Lease, lost chan<- error, done chan<- struct{}) {
	defer close(done)
	c := &e.cfg
	if p, ok := c.Store.(PollingWatcher); ok && p.WatchPolls() {
		return
	}
	for ctx.Err() == nil {
		ch, stop, err := watchWithin(ctx, c.Clock, c.Store, c.Key, c.RequestTimeout)
		if err == nil {
			why := superseding(ctx, l, ch)
			stop()
			if why != "" {
				lost <- lostf("%s (seen by the leader's watch of %q)", why, l.Key)
				return
			}
		}
		if !sleep(ctx, c.Clock, c.RetryInterval) {
			return
		}
	}
}

// superseding reads ch until a record shows l superseded, and returns why;
// it returns "" when ch closes or ctx is done, without waiting for the
// store to close ch, so that a leader's release is never held up by it.
func superseding(ctx context.Context, l Lease, ch <-chan Record) string {
	for {
		select {
		case <-ctx.Done():
			return ""
		case r, ok := <-ch:
			if !ok {
				return ""
			}
			if why := Superseded(l, r); why != "" {
				return why
			}
		}
	}
}

// Superseded reports why record r shows that l is no longer the key's
// current grant, or "" if r is consistent with l being current or is older
// news (a record of an earlier term, delivered late). A record of a later
// term, or of l's term with another holder or none, means l was
// superseded, released, deleted or expired.
func Superseded(l Lease, r Record) string {
	switch {
	case r.Term > l.Term && r.Held():
		return fmt.Sprintf("term %d was granted to %q", r.Term, r.Holder)
	case r.Term > l.Term:
		return fmt.Sprintf("term %d was granted since", r.Term)
	case r.Term == l.Term && !r.Held():
		return fmt.Sprintf("the grant of term %d is gone", l.Term)
	case r.Term == l.Term && r.Holder != l.Identity:
		return fmt.Sprintf("term %d is held by %q", r.Term, r.Holder)
	}
	return ""
}
