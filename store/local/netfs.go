//go:build linux

package local

import (
	"fmt"

	"golang.org/x/sys/unix"
)

// networkFileSystems names the file systems, by statfs magic number, that
// a state directory must not be on: network and cluster file systems,
// shared by several hosts. Their locks are held by a server, which frees a
// crashed holder's only after its own lease (about 90 s on NFS), not when
// the holder dies; inotify sees no other host's changes; some refuse
// RENAME_EXCHANGE, which renewals use. FUSE is not listed: it serves local
// file systems too (ntfs-3g), and statfs cannot tell them apart.
var networkFileSystems = map[uint32]string{
	unix.NFS_SUPER_MAGIC:  "NFS",
	unix.SMB_SUPER_MAGIC:  "SMB",
	unix.CIFS_SUPER_MAGIC: "CIFS/SMB",
	unix.SMB2_SUPER_MAGIC: "SMB2",
	unix.CEPH_SUPER_MAGIC: "CephFS",
	unix.AFS_SUPER_MAGIC:  "AFS",
	unix.AFS_FS_MAGIC:     "AFS",
	unix.CODA_SUPER_MAGIC: "Coda",
	unix.NCP_SUPER_MAGIC:  "NCP",
	unix.V9FS_MAGIC:       "9P",
	0x01161970:            "GFS2",
	0x7461636f:            "OCFS2",
	0x0bd00bd0:            "Lustre",
	0x47504653:            "GPFS",
	0x19830326:            "BeeGFS",
}

// fstatfs is unix.Fstatfs; a variable so that tests can stand in for a
// file system this machine cannot mount.
var fstatfs = unix.Fstatfs

// checkLocalFS returns an error wrapping ErrUnsafe if the directory open
// on fd, called path in the error, is on a network or cluster file system
// (see networkFileSystems).
func checkLocalFS(fd int, path string) error {
	var sfs unix.Statfs_t
	if err := fstatfs(fd, &sfs); err != nil {
		return fmt.Errorf("local: statfs state directory %q: %w", path, err)
	}
	if name, ok := networkFileSystems[uint32(sfs.Type)]; ok { // magic numbers are 32 bits
		return fmt.Errorf("%w: state directory %q is on %s, a file system shared by hosts, where a crashed holder's lock outlives it; the local store needs a local file system: pass --store file:///DIR on a local disk, or use a store server (etcd, PostgreSQL, Redis, ZooKeeper)", ErrUnsafe, path, name)
	}
	return nil
}
