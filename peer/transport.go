package peer

import "errors"

// ErrUnreachable is wrapped by a [Transport.Send] error that knows the
// receiver cannot be reached now (connection refused, member down).
var ErrUnreachable = errors.New("peer: member unreachable")

// Transport carries messages between members. Delivery is best effort: a
// message may be lost, delayed or (on memnet) duplicated and reordered; the
// algorithms and the epoch rule tolerate that.
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
	Recv() <-chan Message
	// Close stops the transport: queued messages may be lost.
	Close() error
}
