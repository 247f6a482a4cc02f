package transport

import (
	"context"
	"fmt"

	"github.com/tenurehq/tenure"
)

// Pool keeps an [Asker]'s connections to the members, one per member,
// dialled on first use and kept between queries, and runs what every
// asker's Ask shares (see [Query]). C is the asker's connection type.
// Create it with [NewPool]; it is safe for concurrent use.
type Pool[C interface{ Close() error }] struct {
	dial   func(ctx context.Context, id uint64, addr string) (C, error)
	final  func(error) bool
	slots  map[uint64]*slot[C]
	ctx    context.Context // cancelled by Close
	cancel context.CancelFunc
}

// slot is the connection to one member; sem (capacity 1) serialises its
// queries and guards conn.
type slot[C any] struct {
	addr string
	sem  chan struct{}
	conn C
	open bool
}

// NewPool returns a pool for the members of g. dial connects to member id
// at addr and authenticates, bounded by ctx; its errors are Query's. final,
// if not nil, reports whether a query's error on a kept connection must
// not be retried on a new one (an authentication failure). NewPool does
// not connect.
func NewPool[C interface{ Close() error }](g Group, dial func(ctx context.Context, id uint64, addr string) (C, error), final func(error) bool) *Pool[C] {
	p := &Pool[C]{dial: dial, final: final, slots: map[uint64]*slot[C]{}}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	for _, m := range g.Members() {
		p.slots[m.ID] = &slot[C]{addr: m.Addr, sem: make(chan struct{}, 1)}
	}
	return p
}

// Query runs query on p's connection to member id, one query at a time per
// member: it dials when there is no connection, and when a kept connection
// fails (the member closed it while idle) it dials once more and repeats
// the query. A failed connection is closed. It blocks until query
// returned, or ctx is done or p closed ([Pool.CtxErr] says which).
func Query[C interface{ Close() error }, T any](ctx context.Context, p *Pool[C], id uint64, query func(context.Context, C) (T, error)) (T, error) {
	var zero T
	s := p.slots[id]
	if s == nil {
		return zero, fmt.Errorf("%w: peer: %d is not a member", tenure.ErrInvalid, id)
	}
	if p.ctx.Err() != nil {
		return zero, tenure.ErrClosed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(p.ctx, cancel)()
	select {
	case s.sem <- struct{}{}:
	case <-ctx.Done():
		return zero, p.CtxErr(ctx)
	}
	defer func() { <-s.sem }()
	for {
		fresh := !s.open
		if fresh {
			c, err := p.dial(ctx, id, s.addr)
			if err != nil {
				return zero, err
			}
			s.conn, s.open = c, true
		}
		r, err := query(ctx, s.conn)
		if err == nil {
			return r, nil
		}
		s.conn.Close()
		s.open = false
		if fresh || ctx.Err() != nil || (p.final != nil && p.final(err)) {
			return zero, err
		}
	}
}

// CtxErr explains why a query's ctx ended: [tenure.ErrClosed] once the
// pool is closed, else no answer in time.
func (p *Pool[C]) CtxErr(ctx context.Context) error {
	if p.ctx.Err() != nil {
		return tenure.ErrClosed
	}
	return fmt.Errorf("no answer in time: %w", ctx.Err())
}

// Close makes queries in flight fail and closes every connection. It is
// idempotent.
func (p *Pool[C]) Close() error {
	p.cancel()
	for _, s := range p.slots {
		s.sem <- struct{}{}
		if s.open {
			s.conn.Close()
			s.open = false
		}
		<-s.sem
	}
	return nil
}
