package wire

import (
	"fmt"
	"time"
)

// Type is a message type. The set is shared by all algorithms so the frame
// format is one; each algorithm uses the types it needs.
type Type uint8

// Message types.
const (
	// Heartbeat: "I am alive, and this is the coordinator I follow". A
	// coordinator sends it to every member each heartbeat interval with
	// Leader = itself; in "lowest" every member sends it.
	Heartbeat Type = iota + 1
	// Election asks higher members to take over (bully) or carries a
	// candidate around the ring (ring, in Candidate).
	Election
	// Answer tells a lower bully member that a higher one is alive and takes
	// over the election.
	Answer
	// Coordinator announces a new coordinator (Leader, LeaderEpoch).
	Coordinator
	// Elected circulates the ring's result (Leader, LeaderEpoch) until it
	// returns to the coordinator.
	Elected
	// Ack acknowledges a ring message (Ref); a missing Ack marks the
	// successor dead.
	Ack
	// Resign tells the members that the coordinator (From) stepped down.
	// After a step-down request (see StepDown), Candidate names the member
	// it hands over to (0: any but From) and TTL the window: every member
	// but Candidate holds back (abstains) for TTL. Without one both are 0.
	Resign
	// Reject tells a member that its coordinator claim is stale: the sender
	// knows a higher epoch (Epoch).
	Reject
	// StatusQuery asks a member who it believes the coordinator is (an
	// observer's question, see peer.Observer). Ref carries the asker's nonce.
	// From is the connection's authenticated sender: 0 ([ObserverID]) or
	// a member; it is answered, never counted as a sign of life.
	StatusQuery
	// StatusReply answers a StatusQuery on the same connection: Leader and
	// LeaderEpoch are the coordinator the member follows (0: none), Epoch
	// its highest known epoch, TTL and Remaining what its record says,
	// Value the value published with its grant if it is the coordinator,
	// and Ref echoes the query's nonce.
	StatusReply
	// Yield answers a coordinator's claim (From follows Leader at
	// LeaderEpoch): with LeaderEpoch equal to the coordinator's epoch it
	// says "I hold no grant under an older epoch: I am not coordinator
	// under one, and any lease my node handed out under one was released,
	// or its holder came back to campaign, or it ran out by my clock"; a
	// coordinator starts granting its lease only once every member yielded
	// or stayed silent (see the package doc). With a lower LeaderEpoch it
	// says "not yet: I still hold a grant under that epoch" (and keeps the
	// sender heard from). Appended after the status types so that older
	// type numbers keep their values.
	Yield
	// StepDown asks the coordinator (To) to step down from epoch
	// LeaderEpoch, handing over to member Candidate (0: any member but
	// itself), the others holding back for TTL (the window). Any holder of
	// the group's secret may send it, from an observer's connection
	// ([ObserverID]) or a member's; like a StatusQuery it is answered on
	// its connection (a StatusReply echoing Ref, with [FlagAccepted] if
	// the coordinator took the request) and never counted as a sign of
	// life. Added in version 5.
	StepDown

	maxType = StepDown
)

// ObserverID is the sender ID an observer (peer.Observer) uses in its status queries. It
// is never a member (member IDs start at 1).
const ObserverID = 0

var typeNames = [...]string{"", "heartbeat", "election", "answer", "coordinator", "elected", "ack", "resign", "reject", "status-query", "status-reply", "yield", "step-down"}

func (t Type) String() string {
	if t >= 1 && t <= maxType {
		return typeNames[t]
	}
	return fmt.Sprintf("type(%d)", uint8(t))
}

// Valid reports whether t is a known message type.
func (t Type) Valid() bool { return t >= 1 && t <= maxType }

// IsStatus reports whether t is StatusQuery or StatusReply: the
// observer's types, which never take part in an election.
func (t Type) IsStatus() bool { return t == StatusQuery || t == StatusReply }

// IsRequest reports whether t is a request answered on its connection
// (StatusQuery, StepDown): it never takes part in an election, and the
// transport hands it over with a reply channel.
func (t Type) IsRequest() bool { return t == StatusQuery || t == StepDown }

// HasTimings reports whether a message of type t may carry TTL and
// Remaining: the status types, a StepDown (its window, in TTL) and a
// Resign (the window its members hold back for, in TTL).
func (t Type) HasTimings() bool { return t.IsStatus() || t == StepDown || t == Resign }

// Flags qualify a message.
const (
	// FlagAbstain: the sender does not stand for election (it resigned
	// recently).
	FlagAbstain uint8 = 1 << iota
	// FlagHandover: the sender is a coordinator that does not grant its
	// lease yet, waiting for the members to [Yield]; set on its Heartbeat,
	// Coordinator and Elected messages.
	FlagHandover
	// FlagAccepted: on the StatusReply answering a [StepDown], the
	// coordinator took the request.
	FlagAccepted
)

// Message is what members exchange. Algorithms fill Type, Leader,
// LeaderEpoch, Candidate, Ref and Flags; the node fills From, To and Epoch;
// transports fill Incarnation and Seq. It is a value; copies are fine.
type Message struct {
	Type  Type
	Flags uint8
	// From is the sender, To the receiver.
	From, To uint64
	// Incarnation identifies the sending process (random per start,
	// informational) and Seq is the frame's sequence number on its
	// connection (set on receipt; the transport drops replays by it).
	Incarnation, Seq uint64
	// Epoch is the highest coordinator epoch the sender knows.
	Epoch uint64
	// Leader is the coordinator the message is about (0: none) and
	// LeaderEpoch its epoch.
	Leader, LeaderEpoch uint64
	// Candidate is the best candidate so far of a ring election, the
	// member to hand over to in a StepDown or Resign, and in a StatusReply
	// when the answering member's node started (Unix milliseconds).
	Candidate uint64
	// Ref correlates an Ack with the message it acknowledges.
	Ref uint64
	// Hops counts how far a ring message travelled.
	Hops uint64
	// TTL and Remaining are a StatusReply's record timings; TTL is also
	// the window of a StepDown or Resign (zero in every other type, see
	// [Type.HasTimings]).
	TTL, Remaining time.Duration
	// Priority is the sender's own priority (package peer's
	// Config.Priority; 0: it never leads), in every message a member
	// sends, a StatusReply included; 0 from an observer. Added in
	// version 6.
	Priority uint32
	// CandidatePriority is, in a ring Election, the priority of
	// Candidate; 0 in every other message.
	CandidatePriority uint32
	// Value is, in a StatusReply from the coordinator itself, the value
	// published with its outstanding grant (tenure.Claim.Value); "" in
	// every other message and when none was published.
	Value string
}

func (m Message) String() string {
	return fmt.Sprintf("%s %d->%d epoch=%d leader=%d@%d cand=%d prio=%d/%d ref=%d hops=%d flags=%#x",
		m.Type, m.From, m.To, m.Epoch, m.Leader, m.LeaderEpoch, m.Candidate, m.Priority, m.CandidatePriority, m.Ref, m.Hops, m.Flags)
}
