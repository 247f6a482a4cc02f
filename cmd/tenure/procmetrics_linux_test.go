package main

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// gather returns the metric families of c by name, with their single
// values.
func gather(t *testing.T, c prometheus.Collector) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(c)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		m := mf.GetMetric()[0]
		switch {
		case m.GetCounter() != nil:
			out[mf.GetName()] = m.GetCounter().GetValue()
		case m.GetGauge() != nil:
			out[mf.GetName()] = m.GetGauge().GetValue()
		}
	}
	return out
}

// The lean process collector exports what client_golang's does, less the
// network counters, with values of the same kind.
func TestProcCollectorMatchesClientGolangs(t *testing.T) {
	ours := gather(t, newProcCollector())
	theirs := gather(t, collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var want, got []string
	for name := range theirs {
		if !strings.HasPrefix(name, "process_network_") {
			want = append(want, name)
		}
	}
	for name := range ours {
		got = append(got, name)
	}
	slices.Sort(want)
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Fatalf("metrics %v; want %v", got, want)
	}
	for _, name := range []string{"process_max_fds", "process_virtual_memory_max_bytes"} {
		if ours[name] != theirs[name] {
			t.Errorf("%s = %g; client_golang says %g", name, ours[name], theirs[name])
		}
	}
	for _, name := range []string{"process_open_fds", "process_resident_memory_bytes", "process_virtual_memory_bytes"} {
		if r := ours[name] / theirs[name]; r < 0.5 || r > 2 {
			t.Errorf("%s = %g; client_golang says %g", name, ours[name], theirs[name])
		}
	}
	if d := ours["process_start_time_seconds"] - theirs["process_start_time_seconds"]; d < -2 || d > 2 {
		t.Errorf("process_start_time_seconds = %f; client_golang says %f", ours["process_start_time_seconds"], theirs["process_start_time_seconds"])
	}
	if cpu := ours["process_cpu_seconds_total"]; cpu <= 0 || cpu > time.Hour.Seconds() {
		t.Errorf("process_cpu_seconds_total = %g", cpu)
	}
}
