//go:build !linux

package main

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// newProcCollector is client_golang's process collector: the lean one of
// procmetrics_linux.go reads Linux's /proc.
func newProcCollector() prometheus.Collector {
	return collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})
}
