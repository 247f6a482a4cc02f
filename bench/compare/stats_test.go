package compare

import (
	"math"
	"strings"
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	tests := []struct {
		name    string
		samples []float64
		want    Summary
	}{
		{"none", nil, Summary{}},
		{"one", []float64{7}, Summary{N: 1, Median: 7, P99: 7, Mean: 7}},
		{"odd count, unsorted", []float64{9, 1, 5}, Summary{N: 3, Median: 5, P99: 9, Mean: 5}},
		{"even count takes the mean of the middle two", []float64{4, 1, 3, 2}, Summary{N: 4, Median: 2.5, P99: 4, Mean: 2.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Summarize(tt.samples); got != tt.want {
				t.Errorf("Summarize(%v) = %+v, want %+v", tt.samples, got, tt.want)
			}
		})
	}
}

func TestSummarizeP99IsNearestRank(t *testing.T) {
	// 1..200: the 99th percentile by nearest rank is the 198th sample.
	s := make([]float64, 200)
	for i := range s {
		s[len(s)-1-i] = float64(i + 1) // descending, to check sorting
	}
	got := Summarize(s)
	if got.P99 != 198 || got.Median != 100.5 {
		t.Errorf("Summarize(1..200) = %+v, want P99 198 and median 100.5", got)
	}
	if s[0] != 200 {
		t.Errorf("Summarize sorted its argument in place: s[0] = %v", s[0])
	}
	// With fewer than 100 samples the p99 is the largest.
	if got := Summarize([]float64{3, 1, 2}); got.P99 != 3 {
		t.Errorf("p99 of 3 samples = %v, want the largest, 3", got.P99)
	}
}

func TestMillis(t *testing.T) {
	got := Millis([]time.Duration{1500 * time.Microsecond, 2 * time.Second})
	if len(got) != 2 || math.Abs(got[0]-1.5) > 1e-9 || got[1] != 2000 {
		t.Errorf("Millis = %v, want [1.5 2000]", got)
	}
}

func TestRatio(t *testing.T) {
	if q, ok := Ratio(1, 4); !ok || q != 0.25 {
		t.Errorf("Ratio(1, 4) = %v, %v; want 0.25, true", q, ok)
	}
	if _, ok := Ratio(1, 0); ok {
		t.Error("Ratio(1, 0) reported a ratio")
	}
}

func TestMarkdown(t *testing.T) {
	r := Report{
		Date:    time.Date(2026, 11, 21, 12, 0, 0, 0, time.UTC),
		Machine: "2 CPUs (nproc), Test CPU",
		Go:      "go1.26",
		TTL:     2 * time.Second,
		Trials:  20,
		Idle:    10 * time.Second,
		Setup:   []string{"etcd: one server"},
		Rows: []Row{{
			Pair: "etcd", Metric: "graceful handoff", Unit: "ms", OtherName: "Election",
			Tenure: Summary{N: 20, Median: 2, P99: 4}, Other: Summary{N: 20, Median: 8, P99: 0},
		}},
		Checks: []Check{{Target: "faster", Met: true, Detail: "2 vs 8"}, {Target: "cheaper", Met: false, Detail: "x"}},
		Notes:  []string{"how"},
	}
	md := r.Markdown()
	for _, want := range []string{
		"- date: 2026-11-21 12:00 UTC",
		"- machine: 2 CPUs (nproc), Test CPU",
		"TTL 2s for every library; 20 trials",
		"- etcd: one server",
		"| etcd | graceful handoff | ms | 2.00 | 4.00 | Election | 8.00 | 0 | 0.25× | n/a (other 0) |",
		"- faster: **met** (2 vs 8)",
		"- cheaper: **MISSED** (x)",
		"- how",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}

func TestRatioKeepsSmallRatiosReadable(t *testing.T) {
	for _, tt := range []struct {
		a, b float64
		want string
	}{
		{1, 4, "0.25×"},
		{0.15, 233, "0.00064×"},
		{0, 0, "n/a (both 0)"},
	} {
		if got := ratio(tt.a, tt.b); got != tt.want {
			t.Errorf("ratio(%v, %v) = %q, want %q", tt.a, tt.b, got, tt.want)
		}
	}
}

func TestProcessCPUGrows(t *testing.T) {
	before, err := ProcessCPU()
	if err != nil {
		t.Fatal(err)
	}
	// Burn CPU until getrusage shows it (its resolution is coarse).
	x := 0.0
	for i := 0; ; i++ {
		x += math.Sqrt(float64(i))
		if i%1_000_000 == 0 {
			now, err := ProcessCPU()
			if err != nil {
				t.Fatal(err)
			}
			if now > before {
				break
			}
		}
	}
	_ = x
}

func TestMachine(t *testing.T) {
	if m := Machine(); !strings.Contains(m, "CPUs (nproc)") {
		t.Errorf("Machine() = %q, want the CPU count", m)
	}
}
