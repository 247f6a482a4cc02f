// Package memnet is an in-memory [transport.Transport] for tests, simulations and
// benchmarks: a Network of endpoints, one per member, that delivers messages
// after a random delay and can drop, duplicate, reorder (through the random
// delays) and partition them, deterministically for a seed. It counts every
// message by type.
//
// Randomness is drawn from one stream per directed link, seeded from the
// network's seed, so the fate of a link's n-th message does not depend on
// how the goroutines of other links were scheduled. Inside a testing/synctest
// bubble delays run on virtual time. All methods are safe for concurrent use;
// Send never blocks.
//
// # Guarantees and non-guarantees
//
// Send never blocks and never delivers to a closed endpoint. With the same
// seed, the same sequence of Send calls per link gets the same drops,
// duplicates and delays; whole runs are reproducible as long as the
// senders' own order is (as in a synctest bubble without timing ties).
// Inboxes hold 4096 messages; beyond that messages are dropped.
package memnet
