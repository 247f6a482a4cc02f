//go:build linux

package local_test

import (
	"errors"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/tenurehq/tenure/store/local"
)

// TestNetworkFileSystemRefused: a state directory on NFS, SMB or another
// file system shared by hosts is refused at Open with one line naming the
// directory, the file system and what to do, since there a crashed
// holder's lock outlives it (for NFS's lease, about 90 s) and inotify does
// not see other hosts. A local one (tmpfs, ext4, XFS, btrfs) is not.
// (These machines cannot mount NFS, so statfs's answer is stood in for.)
func TestNetworkFileSystemRefused(t *testing.T) {
	for magic, name := range map[uint32]string{unix.NFS_SUPER_MAGIC: "NFS", unix.CIFS_SUPER_MAGIC: "CIFS/SMB", unix.SMB2_SUPER_MAGIC: "SMB2", unix.CEPH_SUPER_MAGIC: "CephFS", 0x0bd00bd0: "Lustre"} {
		restore := local.SetFSType(magic)
		dir := t.TempDir()
		s, err := local.Open(dir)
		restore()
		if err == nil {
			s.Close()
			t.Fatalf("Open of a directory on %s succeeded", name)
		}
		if msg := err.Error(); !errors.Is(err, local.ErrUnsafe) || !strings.Contains(msg, dir) || !strings.Contains(msg, " on "+name+", ") || strings.Contains(msg, "\n") {
			t.Errorf("Open on %s: %v; want one line wrapping ErrUnsafe that names the directory and %s", name, err, name)
		}
	}
	for _, magic := range []uint32{unix.TMPFS_MAGIC, unix.EXT4_SUPER_MAGIC, unix.XFS_SUPER_MAGIC, unix.BTRFS_SUPER_MAGIC, unix.FUSE_SUPER_MAGIC} {
		restore := local.SetFSType(magic)
		s, err := local.Open(t.TempDir())
		restore()
		if err != nil {
			t.Fatalf("Open on a local file system (magic %#x): %v", magic, err)
		}
		s.Close()
	}
}
