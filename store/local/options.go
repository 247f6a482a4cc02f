package local

// Option configures [Open].
type Option func(*options)

type options struct {
	group bool
}

// GroupShared lets the members of the state directory's group use it
// alongside its owner: the directory must then be setgid (so new files get
// its group), belong to a group of this process, and not be writable by
// others; files are created 0660 and may belong to any member. Everyone in
// the group can take and break every lease in the directory. Without it
// the directory must be owned by this user and not writable by group or
// others, and files are created 0600. The URL form is
// file:///DIR?shared=group.
func GroupShared() Option { return func(o *options) { o.group = true } }
