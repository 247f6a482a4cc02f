// Package local is the embedded default [tenure.Store]: it coordinates
// processes on one Linux host through files in a state directory, with no
// server to run. It registers the URL scheme "file": file:///var/lib/tenure
// opens that directory, and file:// alone opens [DefaultDir].
//
// # Files
//
// For each key the directory holds, under a name derived from the key (the
// key escaped, or a SHA-256 prefix of a long key):
//
//   - NAME.state, the record: holder, term, TTL, expiry, token. It is
//     replaced by writing NAME.state.tmp and renaming it, so readers never
//     see a partial record, and carries a checksum.
//   - NAME.lock, the mutation lock: an exclusive flock(2) taken only while
//     a call reads, checks and rewrites the record.
//   - NAME.holder.TERM, the liveness file of the grant of TERM: the
//     acquiring process creates it and holds an exclusive flock on it for
//     as long as the grant lives. The kernel drops that lock when the
//     process dies, so a crashed holder's grant ends at once, and closing
//     the file wakes every watcher through inotify.
//
// # Guarantees
//
//   - At most one live grant per key among all processes using the
//     directory. A grant is live while its record names a holder, its TTL
//     has not passed, it was made during the current boot, and its liveness
//     file is locked.
//   - Terms strictly increase per key, across process restarts and
//     reboots: the record of every Acquire is fsynced (file and directory)
//     before Acquire returns. A record that cannot be decoded (truncated,
//     damaged, unknown version) is reported as an error wrapping
//     [ErrCorrupt] that names the file; it is never mistaken for a key that
//     was never granted, which would restart terms at 1.
//   - Expiry is judged on CLOCK_BOOTTIME, which all processes of the host
//     share and which wall-clock changes do not move. A holder that is
//     alive but stalled (stopped, swapping) keeps its lock yet loses its
//     grant when the TTL passes, and its later Renew fails with
//     [tenure.ErrLost].
//   - A holder that exits or is killed frees the key at once, well before
//     its TTL: watchers are woken by the close of its liveness file. With
//     [Store.LeaseFiles] passed to a child process, the grant stays live
//     (within its TTL) until both processes have exited.
//   - Every call is bounded by its context: the only waiting is for the
//     mutation lock, which is polled.
//
// # Non-guarantees
//
//   - Only processes of one host, on one local file system, are
//     coordinated. Network file systems (NFS, SMB) are not supported: their
//     flock and inotify semantics differ.
//   - The files must be left alone: deleting a liveness file ends its grant,
//     and deleting a record restarts the key's terms.
//   - Renew and Release are not fsynced: after a power loss a released key
//     may still name its last holder, but that grant belongs to an earlier
//     boot and is dead.
//   - A process that stops while holding a mutation lock (SIGSTOP in the
//     middle of a call) blocks other calls on that key, which then fail
//     with their context's error, until it resumes or dies.
//   - Watch timers run on the Go runtime's monotonic clock, which does not
//     count system suspend: after a resume an expiry may be delivered late,
//     though Get and Acquire judge it correctly.
//   - The mode of new files is 0666 less the umask and the directory is
//     created 0700: whoever can write the directory can take and break
//     every lease in it.
//
// Only Linux is supported; elsewhere [Open] returns an error.
package local
