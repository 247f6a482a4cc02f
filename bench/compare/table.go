package compare

import (
	"fmt"
	"strings"
	"time"
)

// Row is one metric of one pair: tenure's figures and the other library's.
type Row struct {
	Pair   string // "etcd", "postgres", ...
	Metric string // "graceful handoff", ...
	Unit   string // "ms", "req/s", "CPU ms/s"
	Tenure Summary
	Other  Summary
	// OtherName names the other library in the table.
	OtherName string
}

// Check is one target of the comparison and whether the run met it.
type Check struct {
	Target string
	Met    bool
	Detail string
}

// Report is everything one run measured.
type Report struct {
	Date    time.Time
	Machine string // "2 × AMD EPYC ..." from nproc and /proc/cpuinfo
	Go      string
	TTL     time.Duration
	Trials  int
	Idle    time.Duration
	Setup   []string // one line per pair: versions, store, server
	Rows    []Row
	Checks  []Check
	Notes   []string
}

// Markdown renders r as a Markdown document: a header with the machine and
// date, one table row per metric and pair, and the targets.
func (r Report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "# tenure side by side with the alternatives\n\n")
	fmt.Fprintf(&b, "- date: %s\n", r.Date.UTC().Format("2006-01-02 15:04 MST"))
	fmt.Fprintf(&b, "- machine: %s\n", r.Machine)
	fmt.Fprintf(&b, "- Go: %s\n", r.Go)
	fmt.Fprintf(&b, "- TTL %s for every library; %d trials per latency metric; idle window %s in %d sub-windows\n",
		r.TTL, r.Trials, r.Idle, r.Trials)
	for _, s := range r.Setup {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	b.WriteString("\n| pair | metric | unit | tenure median | tenure p99 | other | other median | other p99 | tenure/other median | tenure/other p99 |\n")
	b.WriteString("| --- | --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: |\n")
	for _, row := range r.Rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			row.Pair, row.Metric, row.Unit,
			num(row.Tenure.Median), num(row.Tenure.P99),
			row.OtherName, num(row.Other.Median), num(row.Other.P99),
			ratio(row.Tenure.Median, row.Other.Median), ratio(row.Tenure.P99, row.Other.P99))
	}
	if len(r.Checks) > 0 {
		b.WriteString("\n## Targets\n\n")
		for _, c := range r.Checks {
			mark := "MISSED"
			if c.Met {
				mark = "met"
			}
			fmt.Fprintf(&b, "- %s: **%s** (%s)\n", c.Target, mark, c.Detail)
		}
	}
	if len(r.Notes) > 0 {
		b.WriteString("\n## How it was measured\n\n")
		for _, n := range r.Notes {
			fmt.Fprintf(&b, "- %s\n", n)
		}
	}
	return b.String()
}

// num formats a figure with enough digits to compare small values.
func num(v float64) string {
	switch {
	case v == 0:
		return "0"
	case v < 10:
		return fmt.Sprintf("%.2f", v)
	case v < 1000:
		return fmt.Sprintf("%.1f", v)
	default:
		return fmt.Sprintf("%.0f", v)
	}
}

// ratio formats a/b, or "n/a" when b is zero.
func ratio(a, b float64) string {
	q, ok := Ratio(a, b)
	if !ok {
		if a == 0 {
			return "n/a (both 0)"
		}
		return "n/a (other 0)"
	}
	if q < 0.1 {
		return fmt.Sprintf("%.2g×", q) // 0.0042×, not 0.00×
	}
	return fmt.Sprintf("%.2f×", q)
}
