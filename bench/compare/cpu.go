package compare

import (
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ProcessCPU returns the user plus system CPU time the process has used so
// far (getrusage(RUSAGE_SELF)); all threads are included.
func ProcessCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// Machine describes the machine for the report: the number of CPUs the
// process may use and the CPU model from /proc/cpuinfo, when readable.
func Machine() string {
	model := "unknown CPU model"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				model = strings.TrimSpace(v)
				break
			}
		}
	}
	return strings.Join([]string{strconv.Itoa(runtime.NumCPU()), "CPUs (nproc),", model, "/", runtime.GOOS + "/" + runtime.GOARCH}, " ")
}
