// Package azblob is a [tenure.Store] on Azure Blob Storage blob leases: the
// shared mutex of Azure's "Leader Election" cloud design pattern, with terms
// (fencing tokens) added and the pattern sample's weaknesses removed.
//
// Importing it registers the URL scheme "azblob" for [tenure.Open]:
//
//	azblob://[ACCOUNT[:KEY]@]CONTAINER[/PREFIX][?endpoint=URL&poll=200ms&retries=2&try_timeout=10s]
//
// with credentials from AZURE_STORAGE_CONNECTION_STRING, or
// AZURE_STORAGE_ACCOUNT with AZURE_STORAGE_KEY or AZURE_STORAGE_SAS_TOKEN
// (see [Open]). For Azurite:
//
//	export AZURE_STORAGE_CONNECTION_STRING='DefaultEndpointsProtocol=http;AccountName=devstoreaccount1;AccountKey=...;BlobEndpoint=http://127.0.0.1:10000/devstoreaccount1;'
//	tenure run --store azblob://leases/my-app --key coordinator --ttl 15s -- ./coordinate
//	tenure status --store azblob://leases/my-app --key coordinator
//
// Programs can also call [New] with [Options], which also accepts a
// Microsoft Entra ID credential.
//
// # How it works
//
// Each key is one empty block blob, CONTAINER/PREFIX/NAME, where NAME is the
// key with every byte other than ASCII letters, digits, '-' and '_' written
// as "~XX" (so "jobs/nightly" is "jobs~2Fnightly"). The blob lease is the
// mutex; the lease ID, a random UUID chosen by the store, is the
// [tenure.Lease] Token. The blob's metadata holds the holder's identity,
// the grant's TTL and the key's term, and names its format (tenureformat
// 1; absent in blobs of earlier builds): a blob of another format, written
// by a newer tenure, makes Acquire and Get fail with an error naming the
// key and the format rather than read a term it may not hold.
//
// Acquire reads the blob's properties, leases the blob on the condition
// that it did not change since (If-Match), then, under the new lease, writes
// term = previous term + 1 to the metadata. Only the lease holder can write
// a leased blob, so that read-modify-write cannot race. Renew and Release
// check that the metadata names the lease's holder and term, then renew or
// release the blob lease on the condition that the metadata is unchanged.
// Release first removes the holder from the metadata, keeping the term.
//
// # Guarantees
//
//   - Expiry is judged by the storage service: a lease lapses TTL after the
//     service received the last successful Acquire or Renew. No client clock
//     is consulted.
//   - At most one live grant per key: the service grants a blob lease to one
//     lease ID at a time.
//   - Terms strictly increase per key, across releases, expiries, takeovers
//     and service restarts, as long as the blob exists: they live in the
//     blob's metadata, written under the lease. A term that cannot be read
//     stops Acquire with an error rather than starting again from 1.
//   - A renewal or release with a lease that expired, was released or was
//     taken over, or with the wrong identity or term, returns an error
//     matching [tenure.ErrLost] and changes nothing. Azure lets an expired
//     lease be renewed by its old ID while nobody else leased the blob; this
//     store refuses that too, so a grant never comes back once it lapsed.
//   - Every request is bounded by the caller's context. SDK retries (2 by
//     default, 100 ms to 1 s apart, each try at most 10 s) stay within it,
//     so a renewal given a deadline shorter than the lease's time left (as
//     the elector does) cannot outlive the lease. The one exception: when
//     Acquire got the lease but could not record its term, it releases the
//     lease within 2 s even if ctx is done.
//   - Errors never contain the account key, a SAS or the connection string,
//     nor the service's response bodies.
//
// # Non-guarantees and costs
//
//   - TTL must be a whole number of seconds from 15 s to 60 s (Azure's lease
//     durations; infinite leases are not used, since nobody could take over
//     from a dead holder). Set the elector's TTL in that range: the default
//     [tenure.DefaultTTL] of 15 s fits. A crashed holder is replaced only
//     once its lease expires: crash failover takes TTL plus a poll interval.
//   - Azure does not report a lease's time left. [tenure.Record].Remaining
//     of a live grant (and of a [tenure.HeldError]) is its TTL, an upper
//     bound.
//   - Azurite, unlike Azure, forgets live leases when it restarts: holders
//     then get [tenure.ErrLost] on their next renewal, and another candidate
//     can take the key before that, so two leaders may run until the
//     holder's next renewal attempt (1.2 s when tried in internal/torture).
//     Terms survive and keep increasing, so fencing still holds.
//   - No push notifications: [Store.Watch] polls the blob's properties a
//     poll interval after each read (200 ms by default; one read request
//     each). A graceful
//     handoff therefore takes up to one poll interval plus six requests
//     (release and acquisition); the elector needs no shorter RetryInterval.
//     Without Watch it would poll at its RetryInterval (default TTL/15 = 1 s).
//   - For the moment between a takeover of an expired lease and the new
//     holder's metadata write (one request), readers see the previous
//     holder and term; a just-released key being re-acquired shows no holder.
//   - Never delete a key's blob or the container: the blob's metadata is
//     the key's term counter. If it is deleted anyway (which needs its lease
//     broken), a Store that saw the key granted never hands out a term at
//     or below the highest it saw, and its next grant waits the last TTL it
//     saw; a process that never saw the key starts again from term 1. Keep
//     the container for leases only.
//   - Break Lease is never used by tenure: an expired lease can be acquired
//     without it. An operator can break a lease (Azure portal, az storage
//     blob lease break) to evict a holder that keeps renewing but is known
//     to be wrong; the holder's next renewal then fails with
//     [tenure.ErrLost]. The lease state "broken" with a holder still in the
//     metadata tells the next Acquire that the grant ended neither by
//     release nor by expiry: its Lease.Wait is the old grant's TTL, since a
//     leader does not watch this store (a polling watch) and notices only at
//     its next renewal. A leased blob's metadata cannot be rewritten without
//     the lease ID, so a grant cannot be overwritten from outside; metadata
//     rewritten after the lease was broken so that it no longer reads (a
//     term, holder or TTL tenure never writes) makes the holder's Renew and
//     Release fail with [tenure.ErrLost], and every other call fail with
//     an error naming the key, until an operator repairs it. Rewriting it
//     after a break also ends the lease state "broken" on Azurite, so the
//     next grant then does not wait: an operator who breaks a lease should
//     leave the metadata alone.
//   - Metadata the store did not write is overwritten.
//   - Close does not release held leases: they expire after their TTL.
package azblob
