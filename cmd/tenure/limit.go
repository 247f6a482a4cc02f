package main

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/tenurehq/tenure"
)

// errGaveUp is the cause with which --try and --wait end a campaign.
var errGaveUp = errors.New("tenure: gave up campaigning: the key is held")

// campaignLimit is --try and --wait: it ends the campaign (with cause
// errGaveUp) once the key was found held (--try) or after the --wait
// duration, unless this candidate was granted the key first. It never ends
// a term: once granted, the limit is off.
type campaignLimit struct {
	try    bool
	mu     sync.Mutex
	won    bool
	cancel context.CancelCauseFunc
	timer  *time.Timer
}

// limitCampaign returns ctx limited as o's --try and --wait say, and the
// limit, whose onEvent the elector must see.
func limitCampaign(ctx context.Context, o runOpts) (context.Context, *campaignLimit) {
	l := &campaignLimit{try: o.try}
	if !o.try && o.wait <= 0 {
		return ctx, l
	}
	ctx, l.cancel = context.WithCancelCause(ctx)
	if o.wait > 0 {
		l.timer = time.AfterFunc(o.wait, l.giveUp)
	}
	return ctx, l
}

// onEvent watches the elector's events, then passes them to next.
func (l *campaignLimit) onEvent(next func(tenure.Event)) func(tenure.Event) {
	if l.cancel == nil {
		return next
	}
	return func(ev tenure.Event) {
		switch {
		case ev.Kind == tenure.EventAcquired:
			l.mu.Lock()
			l.won = true
			if l.timer != nil {
				l.timer.Stop()
			}
			l.mu.Unlock()
		case ev.Kind == tenure.EventAcquireFailed && l.try && errors.Is(ev.Err, tenure.ErrHeld):
			l.giveUp()
		}
		next(ev)
	}
}

func (l *campaignLimit) giveUp() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.won {
		l.cancel(errGaveUp)
	}
}
