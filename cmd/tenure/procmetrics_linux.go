package main

import (
	"bytes"
	"math"
	"os"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"
)

// processStart is when this process started, near enough: package
// initialization runs a few milliseconds after exec.
var processStart = time.Now()

// procCollector exports the process_* metrics of the Prometheus
// conventions for `tenure run --http` and `tenure watch --http`: CPU time,
// resident and virtual memory, open and maximum descriptors, the address
// space limit and the start time. It reads two small files and makes two
// system calls per scrape: client_golang's process collector also parses
// /proc/stat, /proc/self/limits and the network counters of
// /proc/self/net (which it exports as process_network_*, left out here),
// which was more than half the CPU of a scrape of an idle leader.
// Collect is safe for concurrent use and blocks only for those reads.
type procCollector struct {
	cpu, open, maxFDs, vsize, vmax, rss, start *prometheus.Desc
}

func newProcCollector() prometheus.Collector {
	d := func(name, help string) *prometheus.Desc {
		return prometheus.NewDesc("process_"+name, help, nil, nil)
	}
	return &procCollector{
		cpu:    d("cpu_seconds_total", "Total user and system CPU time spent in seconds."),
		open:   d("open_fds", "Number of open file descriptors."),
		maxFDs: d("max_fds", "Maximum number of open file descriptors."),
		vsize:  d("virtual_memory_bytes", "Virtual memory size in bytes."),
		vmax:   d("virtual_memory_max_bytes", "Maximum amount of virtual memory available in bytes."),
		rss:    d("resident_memory_bytes", "Resident memory size in bytes."),
		start:  d("start_time_seconds", "Start time of the process since unix epoch in seconds."),
	}
}

func (c *procCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{c.cpu, c.open, c.maxFDs, c.vsize, c.vmax, c.rss, c.start} {
		ch <- d
	}
}

func (c *procCollector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v)
	}
	ch <- prometheus.MustNewConstMetric(c.start, prometheus.GaugeValue, float64(processStart.UnixNano())/1e9)
	var ru unix.Rusage
	if unix.Getrusage(unix.RUSAGE_SELF, &ru) == nil {
		cpu := time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		ch <- prometheus.MustNewConstMetric(c.cpu, prometheus.CounterValue, cpu.Seconds())
	}
	if vsize, rss, ok := statm(); ok {
		gauge(c.vsize, vsize)
		gauge(c.rss, rss)
	}
	if n, ok := openFDs(); ok {
		gauge(c.open, float64(n))
	}
	var lim unix.Rlimit
	if unix.Getrlimit(unix.RLIMIT_NOFILE, &lim) == nil {
		gauge(c.maxFDs, rlimit(lim.Cur))
	}
	if unix.Getrlimit(unix.RLIMIT_AS, &lim) == nil {
		gauge(c.vmax, rlimit(lim.Cur))
	}
}

// rlimit is a resource limit as a metric value; unlimited is the largest
// uint64, as client_golang reports it.
func rlimit(v uint64) float64 {
	if v == unix.RLIM_INFINITY {
		return math.MaxUint64
	}
	return float64(v)
}

// statm returns the process's virtual and resident memory sizes in bytes,
// from /proc/self/statm.
func statm() (vsize, rss float64, ok bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 2 {
		return 0, 0, false
	}
	pages, err1 := strconv.ParseUint(string(f[0]), 10, 64)
	res, err2 := strconv.ParseUint(string(f[1]), 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, false
	}
	page := float64(os.Getpagesize())
	return float64(pages) * page, float64(res) * page, true
}

// openFDs counts the process's open descriptors, the one it opens to count
// them excluded.
func openFDs() (int, bool) {
	d, err := os.Open("/proc/self/fd")
	if err != nil {
		return 0, false
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return 0, false
	}
	return len(names) - 1, true
}
