// Package transport is the boundary between package peer's election and
// the networks that carry it: the [Transport] interface a member's node
// uses in both directions (Send out, Recv in, status queries included), the
// [Asker] an observer uses (with the [Pool] of kept connections every
// asker shares), and the static member list ([Group]) both connect. Package peer/tcp (authenticated TCP) and package peer/memnet
// (in-memory, seeded faults) implement Transport; the algorithms never
// know which one runs under them.
//
// The package holds only these contracts and the member list; it starts
// no goroutine.
package transport
