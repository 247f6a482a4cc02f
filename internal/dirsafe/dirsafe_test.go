package dirsafe

import (
	"os"
	"strings"
	"testing"
)

func TestCheckParent(t *testing.T) {
	euid := uint32(os.Geteuid())
	other := euid + 1000
	for _, c := range []struct {
		name  string
		o     Owner
		group bool
		want  string // in the error; "" for none
	}{
		{"root's 0755", Owner{UID: 0, GID: 0, Mode: 0o755}, false, ""},
		{"mine 0700", Owner{UID: euid, GID: 0, Mode: 0o700}, false, ""},
		{"another user's", Owner{UID: other, GID: 0, Mode: 0o755}, false, "owned by uid"},
		{"another user's, shared with a group", Owner{UID: other, GID: 0, Mode: 0o755}, true, ""},
		{"world-writable", Owner{UID: 0, GID: 0, Mode: 0o777}, false, "chmod o-w /d"},
		{"world-writable, shared", Owner{UID: 0, GID: 0, Mode: 0o777}, true, "chmod o-w /d"},
		{"sticky world-writable (/tmp)", Owner{UID: 0, GID: 0, Mode: 0o1777}, false, ""},
		{"another group may write", Owner{UID: 0, GID: 65534, Mode: 0o775}, false, "chmod g-w /d"},
		{"another group may write, shared", Owner{UID: 0, GID: 65534, Mode: 0o775}, true, ""},
		{"sticky, another group may write", Owner{UID: 0, GID: 65534, Mode: 0o1775}, false, ""},
	} {
		err := CheckParent("/d", c.o, euid, c.group)
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s: %v, want nil", c.name, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s: %v, want an error with %q", c.name, err, c.want)
		}
	}
}

func TestUserPrivateGroup(t *testing.T) {
	if os.Geteuid() == 0 && !UserPrivateGroup(0, 0) {
		t.Error("group 0 is not root's private group")
	}
	if UserPrivateGroup(uint32(os.Geteuid()), 65534) {
		t.Error("nogroup (65534) is this user's private group")
	}
}
