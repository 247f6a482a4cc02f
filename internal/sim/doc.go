// Package sim is a deterministic simulation of several electors sharing one
// in-memory store, each behind its own fault-injecting store wrapper
// (package faultstore) and its own drifting clock, and a checker for the
// histories it records. Its tests run thousands of seeds inside
// testing/synctest bubbles, where time is virtual: a seed simulates about
// 13 seconds of a cluster with a 1s TTL (10s of faults, then recovery) in
// a few milliseconds of CPU.
//
// # What a seed does
//
// [Generate] turns a seed into a [Scenario]: 3 to 5 electors with the
// default timings derived from [Scenario.TTL]; for each elector a clock
// running at a rate within 1±[Scenario.Rho] of the store's, per-call fault
// rates (failures before and after the call, slow requests, late replies),
// windows of fail-fast partitions, hanging partitions and pauses during the
// fault phase, a task that sometimes returns on its own (a graceful
// handoff), sometimes is slow to notice cancellation and, for a third of the
// electors, reports progress under a StallTimeout and sometimes stalls; in
// a third of the seeds also store-wide outages that hit every elector at
// once. At [Scenario.FaultsEnd] every fault heals; the run ends at
// [Scenario.End].
//
// Safety holds in the model as long as RenewDeadline/(1−ρ) < TTL, that is
// ρ < 1/3 with the default timings; the default ρ is 1%. (Runs with ρ = 25%
// stay safe; at ρ = 45% the checker reports overlapping leaders.)
//
// # What the checker proves, per seed
//
//   - Safety: no two leader contexts are live at the same virtual instant. A
//     leader context is live from the moment its task starts until its Done
//     channel is closed, as observed by a goroutine waiting on it.
//   - Fencing: terms strictly increase from one leadership to the next, so
//     every leadership has its own term.
//   - Observation: a [tenure.Observer] of the key (watching the store,
//     outside the electors' faults) never reports a term going back, and
//     reports every leadership that lasted longer than an instant with its
//     holder.
//   - Liveness: once faults stop, a leader is live within
//     [Scenario.LivenessBound] (and stays within that bound of one after
//     every later handoff). The bound is
//     (RequestTimeout + TTL×Jitter + RetryInterval×Jitter)/(1−ρ) + 50ms:
//     calls caught in a fault end by RequestTimeout; a candidate backing off
//     after store errors sleeps at most TTL×Jitter, which also covers the
//     expiry of any grant made before the heal whose reply was lost; a
//     leader that lost runs again after RetryInterval×Jitter; every duration
//     stretches by up to 1/(1−ρ) on a slow clock.
//
// # What it does not prove
//
//   - Goroutine interleaving within one virtual instant is up to the Go
//     scheduler, not the seed. Every store call gets a seeded latency of up
//     to [Scenario.Latency] and fault windows never close at one instant,
//     so ties are rare: a replay reproduced the same history for all but
//     one of 6,000 seeds measured (TestReplayIsDeterministic checks 100).
//   - Safety is checked at the resolution of a virtual instant: a handoff
//     where the old leader context is cancelled and the new one starts at
//     the same instant counts as safe (it is, in order: the old lease is
//     released only after its context was cancelled).
//   - Clock drift beyond ρ, process pauses (as opposed to store calls that
//     hang) and stores that break their contract are outside the model;
//     [Scenario.WrapStore] exists to show that the checker catches the
//     latter.
package sim
