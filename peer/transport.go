package peer

import "errors"

// ErrUnreachable is wrapped by a [Transport.Send] error that knows the
// receiver cannot be reached now (connection refused, member down).
var ErrUnreachable = errors.New("peer: member unreachable")

// Delivery is one message a transport received, authenticated and
// addressed to its member. Reply is nil except for a [StatusQuery]: then
// it is a channel with room for one [Message], the receiver's answer,
// which the transport sends back on the connection the query came in on
// (From, To and Incarnation are the transport's to set). A receiver never
// blocks on Reply and may leave it unanswered; the transport then drops
// the query after its write timeout.
type Delivery struct {
	Message
	Reply chan<- Message
}

// Transport carries messages between members, in both directions through
// this one interface: a [Node] sends with Send and takes everything it
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
	Send(m Message) error
	// Recv returns the channel of received, authenticated messages
	// addressed to this member. It is closed by Close.
	Recv() <-chan Delivery
	// Close stops the transport: queued messages may be lost.
	Close() error
}
