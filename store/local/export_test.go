//go:build linux

package local

// SetRunUserDir points DefaultDir's /run/user at dir until the returned
// function is called.
func SetRunUserDir(dir string) (restore func()) {
	old := runUserDir
	runUserDir = dir
	return func() { runUserDir = old }
}
