package memnet

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/tenurehq/tenure/peer/transport"
	"github.com/tenurehq/tenure/peer/wire"
)

// Faults are the network's misbehaviours. The zero value is a perfect
// network that delivers at once (still asynchronously).
type Faults struct {
	// Drop and Duplicate are probabilities in [0, 1] per message.
	Drop, Duplicate float64
	// Each delivery is delayed by a uniform random duration in
	// [MinDelay, MaxDelay]; unequal delays reorder messages.
	MinDelay, MaxDelay time.Duration
}

// Stats counts messages since the network was made or ResetStats.
type Stats struct {
	// Sent counts Send calls by message type, whatever became of them;
	// Failed counts those that returned an error (receiver unreachable).
	Sent, Failed map[wire.Type]uint64
	// Delivered, Dropped (faults and partitions), Duplicated (extra copies)
	// and Unreachable (no such live endpoint; Send returned an error).
	Delivered, Dropped, Duplicated, Unreachable uint64
}

// DeliveredOf returns how many messages of type t were sent without error
// (Sent minus Failed).
func (s Stats) DeliveredOf(t wire.Type) uint64 { return s.Sent[t] - s.Failed[t] }

// Total is the number of messages sent of the given types (all types if
// none given).
func (s Stats) Total(types ...wire.Type) uint64 {
	var t uint64
	if len(types) == 0 {
		for _, v := range s.Sent {
			t += v
		}
		return t
	}
	for _, ty := range types {
		t += s.Sent[ty]
	}
	return t
}

// Network connects endpoints. Create it with New.
type Network struct {
	mu     sync.Mutex
	seed   uint64
	faults Faults
	eps    map[uint64]*Endpoint
	links  map[[2]uint64]*rand.Rand
	side   map[uint64]int // partition side; members not listed are on side 0
	stats  Stats
}

// New returns a network whose random choices derive from seed.
func New(seed uint64) *Network {
	return &Network{seed: seed, eps: map[uint64]*Endpoint{}, links: map[[2]uint64]*rand.Rand{},
		side: map[uint64]int{}, stats: Stats{Sent: map[wire.Type]uint64{}, Failed: map[wire.Type]uint64{}}}
}

// SetFaults replaces the network's faults; messages in flight keep theirs.
func (n *Network) SetFaults(f Faults) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.faults = f
}

// Partition splits the members into sides that cannot talk to each other:
// each argument is one side; members not listed form one more side.
// Messages across sides are dropped silently (as a real partition would, not
// refused). A new Partition replaces the previous one.
func (n *Network) Partition(sides ...[]uint64) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.side = map[uint64]int{}
	for i, s := range sides {
		for _, id := range s {
			n.side[id] = i + 1
		}
	}
}

// Heal ends any partition.
func (n *Network) Heal() { n.Partition() }

// Stats returns a copy of the counters.
func (n *Network) Stats() Stats {
	n.mu.Lock()
	defer n.mu.Unlock()
	s := n.stats
	s.Sent, s.Failed = map[wire.Type]uint64{}, map[wire.Type]uint64{}
	for k, v := range n.stats.Sent {
		s.Sent[k] = v
	}
	for k, v := range n.stats.Failed {
		s.Failed[k] = v
	}
	return s
}

// ResetStats zeroes the counters.
func (n *Network) ResetStats() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats = Stats{Sent: map[wire.Type]uint64{}, Failed: map[wire.Type]uint64{}}
}

// Join returns a new endpoint for member id, replacing a closed one (a
// restarted member). It panics if id already has an open endpoint.
func (n *Network) Join(id uint64) *Endpoint {
	n.mu.Lock()
	defer n.mu.Unlock()
	if ep := n.eps[id]; ep != nil && !ep.isClosed() {
		panic(fmt.Sprintf("memnet: member %d joined twice", id))
	}
	ep := &Endpoint{net: n, id: id, inbox: make(chan transport.Delivery, 4096)}
	n.eps[id] = ep
	return ep
}

func (n *Network) link(from, to uint64) *rand.Rand {
	k := [2]uint64{from, to}
	r := n.links[k]
	if r == nil {
		r = rand.New(rand.NewPCG(n.seed, from*0x9E3779B97F4A7C15^to))
		n.links[k] = r
	}
	return r
}

func (n *Network) send(m wire.Message) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.stats.Sent[m.Type]++
	to := n.eps[m.To]
	if to == nil || to.isClosed() {
		n.stats.Unreachable++
		n.stats.Failed[m.Type]++
		return fmt.Errorf("%w: member %d is not on the network", transport.ErrUnreachable, m.To)
	}
	r := n.link(m.From, m.To)
	f := n.faults
	// Draw every random number every time, so a link's stream does not
	// shift when faults change.
	drop, dup := r.Float64(), r.Float64()
	d1, d2 := delay(r, f), delay(r, f)
	if n.side[m.From] != n.side[m.To] || drop < f.Drop {
		n.stats.Dropped++
		return nil
	}
	copies := []time.Duration{d1}
	if dup < f.Duplicate {
		n.stats.Duplicated++
		copies = append(copies, d2)
	}
	for _, d := range copies {
		time.AfterFunc(d, func() {
			if to.deliver(m) {
				n.mu.Lock()
				n.stats.Delivered++
				n.mu.Unlock()
			}
		})
	}
	return nil
}

func delay(r *rand.Rand, f Faults) time.Duration {
	span := f.MaxDelay - f.MinDelay
	if span <= 0 {
		// Up to 100µs of jitter keeps deliveries from different links apart,
		// so a receiver's order never depends on goroutine scheduling.
		return max(f.MinDelay, 0) + time.Duration(r.Int64N(int64(100*time.Microsecond)))
	}
	return f.MinDelay + time.Duration(r.Int64N(int64(span)+1))
}

// Endpoint is one member's [transport.Transport] on a Network.
type Endpoint struct {
	net   *Network
	id    uint64
	mu    sync.Mutex
	seq   uint64
	close bool
	inbox chan transport.Delivery
}

var _ transport.Transport = (*Endpoint)(nil)

// Send implements [transport.Transport]. It returns an error wrapping
// [transport.ErrUnreachable] when the receiver has no open endpoint (a crashed
// member: connection refused), and nil when the message was dropped by a
// fault or partition.
func (e *Endpoint) Send(m wire.Message) error {
	e.mu.Lock()
	if e.close {
		e.mu.Unlock()
		return fmt.Errorf("memnet: endpoint %d is closed", e.id)
	}
	e.seq++
	m.From, m.Seq = e.id, e.seq
	e.mu.Unlock()
	return e.net.send(m)
}

// Recv implements [transport.Transport].
func (e *Endpoint) Recv() <-chan transport.Delivery { return e.inbox }

// Close implements [transport.Transport]; messages in flight to it are lost.
func (e *Endpoint) Close() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.close {
		e.close = true
		close(e.inbox)
	}
	return nil
}

func (e *Endpoint) isClosed() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.close
}

func (e *Endpoint) deliver(m wire.Message) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.close {
		return false
	}
	select {
	case e.inbox <- transport.Delivery{Message: m}:
		return true
	default:
		return false
	}
}
