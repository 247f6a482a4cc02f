// Package k8s is a [tenure.Store] on Kubernetes coordination.k8s.io/v1
// Lease objects, written the way client-go's tools/leaderelection
// LeaseLock reads and writes them, so that tenure candidates and client-go
// leaderelection candidates can share one Lease during a migration and
// still never both lead. client-go is imported by this package only, and
// only its REST client: the package registers the coordination.k8s.io/v1
// types alone, not every API group.
//
// Importing the package registers the URL scheme "k8s" with [tenure.Open]:
//
//	k8s://[NAMESPACE][/PREFIX][?kubeconfig=PATH&context=NAME]
//
// The Lease for key K is named PREFIX+K when that is a valid object name
// (a DNS subdomain: lower-case letters, digits, '-' and '.'), so a Lease a
// client-go candidate uses by name is shared by using that name as the key
// and no prefix. Other keys are mapped to a readable name followed by a
// hash of the key; the key is kept in the Lease's annotation, and a Lease
// that stands for another key is an error, never a grant.
//
// The client configuration is, in order: the kubeconfig file of the
// kubeconfig parameter (with its context parameter, if any); the pod's
// service account when KUBERNETES_SERVICE_HOST is set (running in a pod)
// and no context is asked for; else $KUBECONFIG or ~/.kube/config. An
// empty NAMESPACE is the configuration's: the kubeconfig context's, or in
// a pod POD_NAMESPACE or the service account's. The store needs the RBAC
// verbs get, list, watch, create and update on leases in the namespace.
// Credentials never appear in errors. The identity a candidate campaigns
// under defaults to POD_NAME ([Store.Defaults]).
//
// # The record
//
// A grant sets spec.holderIdentity, acquireTime, renewTime,
// leaseTransitions (one more per grant) and leaseDurationSeconds (the TTL
// rounded up to whole seconds, plus one: see below); a renewal sets
// renewTime; a release clears holderIdentity and sets leaseDurationSeconds
// to 1, as client-go does. The annotation tenurehq.github.io/grant keeps
// tenure's term, the grant's leaseTransitions, holder, exact TTL, a random
// token and whether it was released. client-go keeps annotations when it
// writes, so the term survives its grants: a Lease's term is the term of
// tenure's last grant plus the number of grants made since
// (leaseTransitions), and a Lease tenure never wrote has term
// leaseTransitions+1. The annotation names its format (1; absent in
// annotations of earlier builds): one of a higher format, written by a
// newer tenure, makes Acquire and Get fail with an error naming
// the key and the format rather than read the Lease at a term that may
// be below the key's.
//
// # Guarantees
//
//   - Every write is an update conditional on the resourceVersion of the
//     version the writer last saw (or a create, which fails if the Lease
//     exists): of concurrent candidates, tenure's or client-go's, exactly
//     one write succeeds.
//   - The API server does not expire Leases. A candidate takes a held
//     Lease over only after it has seen the same version of it (the same
//     resourceVersion and UID) unchanged, on its own monotonic clock, for
//     the grant's TTL plus a margin of 2 % + 20 ms (for a grant tenure did
//     not make: its leaseDurationSeconds), counted from when it first
//     received that version, which is after the holder sent the write. It
//     never compares renewTime with its wall clock, so clock offsets do
//     not matter. It assumes that the candidates' clocks run at rates
//     within 2 % of each other: a holder stops leading no later than its
//     TTL after it sent its last successful renewal, measured on its
//     clock, and the takeover comes no earlier than that, measured on
//     another.
//   - client-go candidates compare records at one-second resolution
//     (renewTime is serialised in whole seconds there), so tenure writes
//     leaseDurationSeconds as the TTL rounded up plus one second: a
//     client-go candidate that missed a renewal within the same second
//     still waits past the tenure holder's renew deadline. Tenure
//     candidates use the exact TTL from the annotation.
//   - Terms strictly increase per grant on one Lease, across grants by
//     client-go candidates, and, on a handle that saw a term, even if the
//     Lease is deleted and created again: a handle never hands out a term
//     not above the highest it saw. A grant is a Renew or Release target
//     only while the Lease carries its holder, term and token; a Lease
//     rewritten from outside, deleted, or taken over gives errors matching
//     [tenure.ErrLost].
//   - When tenure's last grant lost its holder without a release
//     (holderIdentity cleared from outside), or the Lease was deleted
//     after this handle saw it granted, the next grant's Lease.Wait
//     covers the old grant's TTL, so the new holder does not start before
//     the old one can have noticed.
//   - Watch is a Kubernetes watch on the one Lease: candidates and
//     observers wake on the API server's event, never by polling. A
//     crashed holder is noticed by the watcher's own expiry timer and one
//     read.
//
// # Non-guarantees
//
//   - A handle that has just started (a new process) has seen nothing:
//     it waits a whole lease duration from its first read before it takes
//     over a held Lease, even if the holder died long ago. Crash failover
//     therefore takes between one and two TTLs for a candidate that
//     started after the crash, and one TTL for one that was watching.
//   - Every write changes the resourceVersion and so restarts every
//     observer's count: a Lease written more often than its lease
//     duration by something other than its holder (a controller adding
//     labels, say) never expires.
//   - Identities must be unique across the fleet, tenure's and
//     client-go's: a client-go candidate with a tenure holder's identity
//     takes the Lease for a renewal of its own.
//   - client-go does not honour tenure's Wait, and a client-go holder's
//     task runs on past its last successful renewal for up to RetryPeriod
//     plus RenewDeadline, and with ReleaseOnCancel up to RetryPeriod plus
//     twice RenewDeadline (client-go cancels the task's context only after its
//     release attempt, which has a RenewDeadline of its own). Its
//     LeaseDuration must exceed that, or a hung API connection gives two
//     leaders whatever tenure does; client-go's defaults (15 s, 10 s, 2 s)
//     do not with ReleaseOnCancel. bench/k8smix shows the overlap with
//     LeaseDuration 4 s and RenewDeadline 3 s, and none at 1.5 s.
//   - A handle writes on the latest version it knows (its own last write,
//     or a watch event); when another writer came first that write fails
//     with a 409 Conflict and the handle reads and tries again, so a
//     contended call costs three requests instead of one.
package k8s
