// Package local is the embedded default [tenure.Store]: it coordinates
// processes on one Linux host through files in a state directory, with no
// server to run. It registers the URL scheme "file": file:///var/lib/tenure
// opens that directory, file:// alone opens [DefaultDir], and the query
// ?shared=group opens it with [GroupShared].
//
// # Files
//
// For each key the directory holds, under a name derived from the key (the
// key escaped, or a SHA-256 prefix of a long key):
//
//   - NAME.state, the record: holder, term, TTL, expiry, token. It is
//     replaced by writing a new .terms/NAME.state.tmp.RANDOM (O_EXCL) and
//     renaming it into place, so readers never see a partial record, and
//     watchers of the directory see one event per write; it carries a
//     checksum.
//   - NAME.lock, the mutation lock: an OFD write lock (fcntl
//     F_OFD_SETLK) taken only while a call reads, checks and rewrites the
//     record.
//   - NAME.holder.TERM, the liveness file of the grant of TERM: the
//     acquiring process creates it and holds an OFD write lock on it for as
//     long as the grant lives. The kernel drops that lock when the last
//     descriptor of it closes, so a crashed holder's grant ends at once,
//     and closing the file wakes every watcher through inotify.
//   - .terms/NAME.term, the record as of the key's last Acquire or
//     Release, fsynced before Acquire returns: the key's term high-water
//     mark, which deleting the key's own files does not reset.
//   - .sessions/ID, the file of a session (see Sessions), which stands in
//     for the liveness files of all the grants made in it.
//
// # Sessions
//
// [Store.OpenSession] starts a session: one liveness file shared by every
// grant made in it, so that a process leading thousands of keys renews
// them all with one write ([tenure.Session] uses it).
//
//   - The session file .sessions/ID (ID: 128 random bits in hex) is
//     created O_EXCL relative to the opened .sessions directory, never
//     following a link, 0600 (0660 with [GroupShared]); the session holds
//     an OFD write lock on it for its whole life. It holds, in a fixed
//     127-byte layout with a CRC-32C, the session's expiry on
//     CLOCK_BOOTTIME, its TTL, the boot id and its own ID.
//   - A grant made in the session ([tenure.StoreSession.Acquire]) writes
//     the key's record and .terms record as [Store.Acquire] does (a new
//     term above every one known, .terms fsynced before it returns), but
//     creates no NAME.holder.TERM: its record names the session. Such a
//     grant is live while its record names a holder, was made during the
//     current boot, and its session file is present, locked, of this boot
//     and unexpired. Every reader (Get, Acquire, Renew, Release, Watch,
//     in every process) judges it so, taking its clock reading before it
//     reads the session file.
//   - KeepAlive rewrites the session file in place with one pwrite of its
//     127 bytes, whatever the number of grants: no record, .terms file or
//     directory entry is touched, and no watcher is woken. It fails with
//     [tenure.ErrLost], ending the session, if the session had expired, if
//     its file (or .sessions) was deleted or replaced from outside, or if
//     the write completed only after the old expiry: a reader may then
//     have judged the session over and granted one of its keys. A write
//     that completes before the old expiry is seen by every later read,
//     and a reader that read the old expiry took its clock reading before
//     the write completed, so it judged the session live. It then checks
//     each grant with one fstatat of its record (no open, no read),
//     reading only a record whose inode, size or times changed, or whose
//     times were too recent to tell a later write in place apart (file
//     systems keep them at the kernel's coarse clock: the record of a new
//     grant is read once, by the first KeepAlive at least 100 ms after
//     its Acquire), and returns the grants whose records no longer name
//     them.
//   - A session is a [tenure.BatchAcquirer]: AcquireBatch takes its keys
//     one at a time as Acquire does, but writes their .terms records
//     without fsync and makes them durable with one syncfs(2) of the file
//     system before returning any lease (which also flushes whatever else
//     is pending on that file system); if that fails, the batch's new
//     grants are released.
//   - Release ends one grant at once, as [Store.Release]. Close closes the
//     session file first, which ends every grant of the session at once
//     for every process (the kernel drops the lock) and wakes the watchers
//     of their keys; then, within its context, it records each grant as
//     released, so that the next holders get no Wait, and removes the
//     file. A process that exits or is killed, or closes its handle, ends
//     its sessions the same way, leaving the unlocked file behind.
//   - Watches also watch .sessions: the close or removal of a session file
//     wakes the watches of the keys whose last read record named it, which
//     probe again while the lock lingers after the close (as for a
//     liveness file); a session's expiry is delivered by the watch's timer,
//     as a grant's is. Keep-alives, written in place, wake nobody.
//   - A record naming a session whose file is missing is over, but its
//     holder may be running and may have kept the session alive just
//     before: the next Acquire of the key sets [tenure.Lease.Wait] to one
//     TTL of that grant, as when a record is replaced from outside. A
//     session file present but unlocked or expired needs no wait.
//   - A session file that is a link, FIFO or device, belongs to another
//     user (another group with [GroupShared]), or does not decode while
//     locked, is an error wrapping [ErrUnsafe] or [ErrCorrupt] that names
//     it, for every call that judges a grant of the session: it is never
//     followed, never read from a FIFO, and never makes a grant look live.
//     A read that fails the checksum is retried a few times first, since a
//     read racing the holder's in-place write may see part of each.
//
// # Security
//
// The store protects its holders from other users of the host, and from
// users who can only read the directory; it cannot protect them from users
// who can write it (they can take and break every lease in it).
//
//   - Open resolves the directory one component at a time and follows a
//     symbolic link only if root or the user owns it. Every directory on
//     the way must belong to root or the user (any user with
//     [GroupShared]) and, unless sticky (as /tmp is), not be writable by
//     others, nor (without [GroupShared]) by a group other than the
//     user's private group: whoever can rename its entries could
//     move the state directory aside, and a fresh one created in its place
//     would grant the key again while the old holder still leads. The
//     directory itself must be owned by the user and not writable by group
//     or others. Otherwise Open fails with [ErrUnsafe], naming the
//     directory and the chmod that fixes it. Every later operation is relative to the opened directory (openat,
//     renameat, unlinkat) with O_NOFOLLOW, so nothing in or above the
//     directory is ever followed, and only regular files owned by the user
//     are used: a link, FIFO, device or socket in place of a file is an
//     error wrapping [ErrUnsafe] that names it, never opened for I/O.
//   - Files are created 0600; an existing file of the user with another
//     mode (an older tenure made them 0666 less the umask) is set to 0600
//     when opened.
//   - Locks are OFD write locks, which need a descriptor open for writing:
//     a process that can only read a file gets EBADF. flock(2) locks are
//     independent of them and change nothing. (A read lock is possible on a
//     read-only descriptor and would block the mutation lock, which is why
//     files are closed to everyone but the user, or the group.)
//   - Reads are of regular files only, opened O_NONBLOCK, and bounded:
//     a record larger than the largest valid one (16 KiB and 18 bytes) is
//     an error wrapping [ErrCorrupt], not read to the end.
//   - Sharing a directory with a group is explicit: [GroupShared], or
//     file:///DIR?shared=group. The directory must then be setgid, belong to
//     a group of the process and not be writable by others; Open creates a
//     missing one 02770. Files are created 0660 and may belong to any
//     member; every member can take and break every lease.
//   - [DefaultDir] is $XDG_STATE_HOME/tenure, else
//     $HOME/.local/state/tenure, else $XDG_RUNTIME_DIR/tenure, else
//     /run/user/UID/tenure if that exists; it never falls back to a shared
//     directory such as /tmp, where another user could create it first, and
//     fails instead, saying to pass --store file:///DIR.
//
// # Guarantees
//
//   - At most one live grant per key among all processes using the
//     directory. A grant is live while its record names a holder, its TTL
//     has not passed, it was made during the current boot, and its liveness
//     file is locked. A grant made in a session is live while its
//     session is (see Sessions).
//   - Terms strictly increase per key, across process restarts and
//     reboots: an Acquire's .terms record is fsynced (file and directory)
//     before Acquire returns. The record itself is not: it never lowers
//     the high-water mark, and one fewer fsync pair shortens every
//     handoff by milliseconds. A new term is one above the
//     highest of the key's record, its .terms record and every term this
//     process has seen for the key, so deleting the key's files, or even
//     .terms, from outside does not restart terms in a process that saw
//     them. A record that cannot be decoded (truncated, damaged, unknown
//     version, too large) is reported as an error wrapping [ErrCorrupt]
//     that names the file and leaves it as it is; it is never mistaken for
//     a key that was never granted, which would restart terms at 1. One
//     exception: an empty NAME.state reads as a deleted one (terms go on
//     from .terms), since a renewal's record can be empty after a power
//     loss (see below). An empty .terms record is an error.
//   - A grant deleted or replaced from outside ends for its holder at once:
//     Renew fails with [tenure.ErrLost] when the record is gone or names
//     another grant, or when the liveness file in the directory is not the
//     one the holder created (compared by device and inode); the holder's
//     watch shows the key free at the grant's term. When such a grant had
//     not been released, the next Acquire sets [tenure.Lease.Wait], so the
//     next holder starts its task only after the old holder's renew
//     deadline: until the record's expiry if only the liveness file went,
//     or one TTL of the old grant if the record went too (its holder may
//     have renewed just before). A grant made in a session ends for the
//     session when its record is deleted or replaced: the session's next
//     KeepAlive returns it among the gone grants, and its Release fails
//     with [tenure.ErrLost]; the session's file deleted from outside ends
//     every grant of the session (see Sessions), with the same Wait of one
//     TTL for the next holders.
//   - Expiry is judged on CLOCK_BOOTTIME, which all processes of the host
//     share and which wall-clock changes do not move. A holder that is
//     alive but stalled (stopped, swapping) keeps its lock yet loses its
//     grant when the TTL passes, and its later Renew fails with
//     [tenure.ErrLost]; a stalled session likewise loses all its grants
//     when its TTL passes after its last KeepAlive, which then fails.
//   - A holder that exits or is killed frees the key at once, well before
//     its TTL: watchers are woken by the close of its liveness file. With
//     [Store.LeaseFiles] passed to a child process, the grant stays live
//     (within its TTL) until both processes have exited: OFD locks, like
//     flock, belong to the open file description the child inherits.
//   - Every call is bounded by its context: the only waiting is for the
//     mutation lock, which is polled, and reads never block on a FIFO or
//     device. If the lock file is removed or replaced while a call waits
//     for it, the call locks the file now in place, so two calls never both
//     hold the mutation lock of one key.
//
// # Non-guarantees
//
//   - Only processes of one host, on one local file system, are
//     coordinated. [Open] refuses a directory on a network or cluster file
//     system (NFS, SMB, CephFS, AFS, 9P, GFS2, OCFS2, Lustre, GPFS,
//     BeeGFS), with an error wrapping [ErrUnsafe]: there a crashed
//     holder's lock is freed by a server after its own lease, not when
//     the holder dies, and inotify does not see other hosts' changes. A
//     FUSE file system is not refused (statfs cannot tell sshfs from
//     ntfs-3g); do not use a networked one.
//   - What must never be deleted: .terms (the term high-water marks of
//     every key; without it, and with the key's record also gone, a new
//     process restarts the key's terms at 1), and the state directory
//     itself for the same reason. Deleting a key's NAME.* files ends its
//     grant (see above) but does not restart its terms.
//   - A user who can write the directory (its owner, root, or any member of
//     a shared group) can take and break every lease in it.
//   - Renew and Release are not fsynced, nor is the record an Acquire
//     writes (only its .terms record is): after a power loss a key's record
//     may be an older one, naming a holder whose grant belongs to an
//     earlier boot and is dead, or, if a renewal wrote it, empty, which
//     reads as deleted; terms still go on from the .terms record. (A
//     renewal swaps its record into place with RENAME_EXCHANGE and removes
//     the old one rather than renaming over it: on ext4 that rename would
//     start writing the record out, about 40 % of an idle leader's CPU,
//     for a record the next renewal replaces.) A power loss right after
//     .terms was deleted from outside can lose the high-water mark with it.
//   - A process that stops while holding a mutation lock (SIGSTOP in the
//     middle of a call) blocks other calls on that key, which then fail
//     with their context's error, until it resumes or dies.
//   - A watch's re-read when a grant is due to end ([tenure.Follow]'s timer)
//     runs on the Go runtime's monotonic clock, which does not count system
//     suspend: after a resume an expiry may be delivered late,
//     though Get and Acquire judge it correctly.
//   - Session files are not fsynced: a session, like a grant, does not
//     outlive the boot. The file of a session whose process died, or whose
//     Close could not release every grant, stays in .sessions, unlocked
//     (and so over): it is never read as live and may be removed once no
//     record names it; removing it earlier only makes the next Acquire of
//     those keys wait one TTL. .sessions must not be deleted while sessions
//     are open: that ends them (their next KeepAlive fails) and makes the
//     next holders of their keys wait one TTL.
//   - A session's KeepAlive notices a record overwritten in place from
//     outside by its size or times, as file systems keep them: a file
//     system whose times do not change on a write, or a wall clock set
//     back to the very tick of a record's last write, would hide an
//     overwrite of the same length from it (Release still sees it).
//   - A version of tenure older than sessions reads a record naming a
//     session as corrupt ([ErrCorrupt]): it neither takes the key nor
//     restarts its terms, but it cannot use the key until the grant ends.
//   - NAME.state.tmp.* and NAME.term.tmp.* files (in .terms; older
//     versions wrote the first kind in the directory itself) left by a
//     crash in the middle of a write are never read and may be removed.
//
// Only Linux is supported; elsewhere [Open] returns an error.
package local
