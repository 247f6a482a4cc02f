package transport

import (
	"context"
	"errors"
	"time"

	"github.com/tenurehq/tenure/peer/wire"
)

// ErrUnreachable is wrapped by a [Transport.Send] error that knows the
// receiver cannot be reached now (connection refused, member down).
var ErrUnreachable = errors.New("peer: member unreachable")

// Delivery is one message a transport received, authenticated and
// addressed to its member. Reply is nil except for a request
// ([wire.Type.IsRequest]: a StatusQuery or a StepDown): then it is a channel with room for one [wire.Message], the receiver's answer,
// which the transport sends back on the connection the query came in on
// (From, To and Incarnation are the transport's to set). A receiver never
// blocks on Reply and may leave it unanswered; the transport then drops
// the query after its write timeout.
type Delivery struct {
	wire.Message
	Reply chan<- wire.Message
}

// Transport carries messages between members, in both directions through
// this one interface: a member's node (package peer) sends with Send and takes everything it
// receives, election messages and status queries alike, from Recv, so it
// never installs a callback in its transport and any transport (TCP,
// memnet) runs the same algorithms. Delivery is best effort: a message may
// be lost, delayed or (on memnet) duplicated and reordered; the algorithms
// and the epoch rule tolerate that.
//
// Implementations are safe for concurrent use.
type Transport interface {
	// Send queues m for member m.To and returns without blocking. A nil
	// error means queued, not delivered; an error wrapping [ErrUnreachable]
	// means the receiver is known to be unreachable now. The caller sets
	// every field but Incarnation and Seq, which the transport assigns.
	Send(m wire.Message) error
	// Recv returns the channel of received, authenticated messages
	// addressed to this member. It is closed by Close.
	Recv() <-chan Delivery
	// Close stops the transport: queued messages may be lost.
	Close() error
}

// Report is a member's answer to a status query: the coordinator it follows
// (Leader 0: none) and that coordinator's epoch, the highest epoch it
// knows, and its record's TTL and Remaining (see peer.Node.Get). Value is
// the value published with the coordinator's grant, reported by the
// coordinator itself only ("" from other members, and when none was
// published).
type Report struct {
	Leader, LeaderEpoch, Epoch uint64
	TTL, Remaining             time.Duration
	Value                      string
	// Since is when the member's node started, on its clock (zero if it
	// does not say).
	Since time.Time
	// Priority is the member's own priority, and NeverLeads whether it
	// is 0 (the member never leads: an observer takes no claim that it
	// leads, see peer.Observer.Get). A report that leaves both zero says
	// nothing of it.
	Priority   int
	NeverLeads bool
}

// StepDownRequest is a step-down request for a member (see
// [wire.StepDown]): step down from Epoch, hand over to member To (0: any
// other), the others holding back for Window.
type StepDownRequest struct {
	Epoch, To uint64
	Window    time.Duration
}

// StepDownAsker is an [Asker] that can also carry a step-down request to a
// member, authenticated like its queries (tcp.NewAsker's can). Observers
// of modes whose Asker is not one cannot ask for a step-down.
type StepDownAsker interface {
	Asker
	// StepDown sends req to member id and returns its answer: its report
	// after handling the request, and whether it took it (it does only
	// when it is the coordinator of req.Epoch). It blocks like Ask.
	StepDown(ctx context.Context, id uint64, req StepDownRequest) (r Report, accepted bool, err error)
}

// Asker is how an observer (peer.Observer) reaches members: it asks one
// member for its view of the coordinator. tcp.NewAsker asks the TCP
// transport's members; modes with a transport of their own (raft) bring
// their own. Implementations are safe for concurrent use.
type Asker interface {
	// Ask returns member id's [Report]. It blocks until the member
	// answered, the attempt failed, or ctx is done; an answer is always
	// authenticated as coming from a holder of the group's secret.
	Ask(ctx context.Context, id uint64) (Report, error)
	// Close ends the asker's connections; Ask then fails.
	Close() error
}
