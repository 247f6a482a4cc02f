// Package faultstore wraps a [tenure.Store] and injects faults into the calls
// that pass through it, so electors can be tested against a store that is
// slow, flaky, partitioned away or paused, deterministically. It is part of
// tenure's public testing kit, with package storetest: use it to test your
// own leader tasks against a misbehaving store.
//
// A [Faults] value holds the fault plan: per-call probabilities ([Rates]) of
// a failure before the call reaches the store (not applied), a failure after
// it (applied, but the caller sees an error: the ambiguous case), a delay
// before the call and a late reply after it, plus two switches: a partition
// ([Faults.Partition]), during which every call fails at once or hangs until
// its context is done, and a pause ([Faults.Pause]), during which every call
// waits until [Faults.Resume] and then proceeds. [Wrap] puts a store behind
// a Faults; several stores may share one Faults (one process's view of the
// world).
//
// # Guarantees
//
//   - Every call is bounded by its context: an injected delay, hang or pause
//     ends with the context's error when the context is done first.
//   - Delays are measured on the plan's [tenure.Clock], so they run in
//     virtual time under a fake clock or a testing/synctest bubble.
//   - The per-call decisions come from a generator seeded by [Plan.Seed] and
//     consume the same number of draws on every call, so the sequence of
//     decisions depends only on the seed and the sequence of calls. A
//     seeded [Rates.Latency] keeps calls that start at one virtual instant
//     from reaching the store at one instant, so their order follows the
//     seed rather than the scheduler.
//   - [Wrap] keeps every ability of the inner store (its defaults, TTL
//     range, whether its watch polls, values, sessions, step-down
//     requests). A partition ends open watches (the channel is closed, as
//     when a connection drops) and fails new ones; a pause holds deliveries back
//     until Resume.
//   - An injected error wraps [ErrInjected] and never [tenure.ErrLost],
//     [tenure.ErrInvalid] or [tenure.ErrClosed]: callers see a transient
//     failure. Errors the inner store returns pass through unchanged.
//
// # Non-guarantees
//
//   - Goroutine scheduling is not controlled: when calls from several
//     goroutines share one Faults, which call gets which decision depends on
//     their order. Give each concurrent caller its own Faults for
//     reproducible runs.
//   - The wrapper cannot pause or slow the caller itself (a garbage-collector
//     pause, a descheduled process); only its store calls. A skewed clock
//     ([Skew]) models a caller whose sense of time drifts.
//   - Close is passed through without faults, so tests can always clean up.
package faultstore
