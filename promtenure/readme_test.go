package promtenure

import (
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/tenurehq/tenure"
)

// everySeries gathers every metric family a Collector and a
// SessionCollector export, the renewal histogram included (exported from
// the first renewal on).
func everySeries(t *testing.T) []*dto.MetricFamily {
	t.Helper()
	reg := prometheus.NewRegistry()
	c := New(key)
	reg.MustRegister(c, NewSession("s"))
	c.OnEvent(nil)(tenure.Event{Kind: tenure.EventRenewed, Key: key, Took: time.Millisecond})
	fams, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	return fams
}

// TestREADMEMetricsTable: the README's tables of metrics list exactly
// the metrics a scrape of a Collector and a SessionCollector has, each
// with its type, its label names and, where the README names them, every
// value of its reason label.
func TestREADMEMetricsTable(t *testing.T) {
	rows := readmeMetricRows(t)
	fams := everySeries(t)
	types := map[dto.MetricType]string{dto.MetricType_GAUGE: "gauge", dto.MetricType_COUNTER: "counter", dto.MetricType_HISTOGRAM: "histogram"}
	for _, f := range fams {
		r, ok := rows[f.GetName()]
		if !ok {
			t.Errorf("the scrape has %s, which the README's table lacks", f.GetName())
			continue
		}
		delete(rows, f.GetName())
		if types[f.GetType()] != r.typ {
			t.Errorf("%s: the README says %s, the scrape has %s", f.GetName(), r.typ, f.GetType())
		}
		var labels, reasons []string
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if !slices.Contains(labels, lp.GetName()) {
					labels = append(labels, lp.GetName())
				}
				if lp.GetName() == "reason" {
					reasons = append(reasons, lp.GetValue())
				}
			}
		}
		slices.Sort(labels)
		want := slices.Sorted(slices.Values(r.labels))
		if !slices.Equal(labels, want) {
			t.Errorf("%s: labels %v in the scrape, %v in the README", f.GetName(), labels, want)
		}
		if len(reasons) > 0 || len(r.values) > 0 {
			slices.Sort(reasons)
			if got := slices.Sorted(slices.Values(r.values)); !slices.Equal(reasons, got) {
				t.Errorf("%s: reasons %v in the scrape, %v in the README", f.GetName(), reasons, got)
			}
		}
	}
	for name := range rows {
		t.Errorf("the README's table lists %s, which the scrape lacks", name)
	}
}

// metricRow is one row of the README's tables of metrics.
type metricRow struct {
	typ    string
	labels []string
	values []string // of the reason label, where listed
}

// readmeMetricRows reads the README's tables of metrics, by name.
func readmeMetricRows(t *testing.T) map[string]metricRow {
	t.Helper()
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rows := map[string]metricRow{}
	line := regexp.MustCompile("^  \\| `([a-z_]+)` \\| (gauge|counter|histogram) \\| ([^|]*) \\|")
	code := regexp.MustCompile("`([a-z_]+)`")
	for _, l := range strings.Split(string(readme), "\n") {
		m := line.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		var r metricRow
		r.typ = m[2]
		// The label cell: `a`, `b` (`v1`, `v2`): label names, then the
		// values of the last one in parentheses.
		cell, vals, _ := strings.Cut(m[3], "(")
		for _, n := range code.FindAllStringSubmatch(cell, -1) {
			r.labels = append(r.labels, n[1])
		}
		for _, v := range code.FindAllStringSubmatch(vals, -1) {
			r.values = append(r.values, v[1])
		}
		rows[m[1]] = r
	}
	if len(rows) == 0 {
		t.Fatal("the README has no metrics table")
	}

	return rows
}
