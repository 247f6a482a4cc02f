// Package dirsafe judges a directory on the way to a state directory: can
// anyone but root and this user rename what it holds? Whoever can could
// move the state directory aside, and a fresh one made in its place would
// restart the terms kept in it while the old holder still leads. The local
// store and the peer state directory apply the same rule through it.
package dirsafe

import (
	"fmt"
	"os/user"
	"strconv"
)

// Owner is what the check reads of a directory: its owner, group and mode
// bits (st_mode; the permission, setgid and sticky bits are used).
type Owner struct {
	UID, GID uint32
	Mode     uint32
}

// sticky is S_ISVTX: in a sticky directory only an entry's owner, the
// directory's and root may rename it.
const sticky = 0o1000

// CheckParent returns nil if only root and user euid can rename entries
// of directory where, as described by o; else an error, to be prefixed by
// where and the caller's context, saying who else could and what fixes
// it. The directory may belong to root or euid, and, unless it is sticky
// (as /tmp is), not be writable by others. Unless group (a store shared
// with a group on purpose, whose members are trusted as much and whose
// directories often belong to one of them), it must also belong to root
// or euid and not be writable by a group other than euid's private group
// (see UserPrivateGroup). It may look up the user and group databases.
func CheckParent(where string, o Owner, euid uint32, group bool) error {
	isSticky := o.Mode&sticky != 0
	switch {
	case !group && o.UID != 0 && o.UID != euid:
		return fmt.Errorf("is owned by uid %d, neither root nor this user, who could move the state directory aside; use a directory whose parents are root's or yours", o.UID)
	case o.Mode&0o002 != 0 && !isSticky:
		return fmt.Errorf("is writable by others and not sticky, so anyone could move the state directory aside and terms would restart at 1; run chmod o-w %s (or chmod +t %s)", where, where)
	case !group && o.Mode&0o020 != 0 && !isSticky && !UserPrivateGroup(euid, o.GID):
		return fmt.Errorf("is writable by group %d, whose members could move the state directory aside; run chmod g-w %s", o.GID, where)
	}
	return nil
}

// UserPrivateGroup reports whether gid is the private group of user euid:
// its primary group, named after it, as the user-private-group scheme of
// Debian, Fedora and others makes for every user (there umask 002 leaves
// the user's directories writable by that group, whose only member is the
// user). Root's group 0 is root's. A user or group that cannot be looked
// up is no private group.
func UserPrivateGroup(euid, gid uint32) bool {
	if euid == 0 && gid == 0 {
		return true
	}
	u, err := user.LookupId(strconv.FormatUint(uint64(euid), 10))
	if err != nil {
		return false
	}
	g, err := user.LookupGroupId(strconv.FormatUint(uint64(gid), 10))
	return err == nil && u.Gid == g.Gid && g.Name == u.Username
}
