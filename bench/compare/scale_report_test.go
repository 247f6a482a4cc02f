package compare

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// zkRequests counts the packets a ZooKeeper server received, from its
// "srvr" four-letter command (each call's own connection sends none).
func zkRequests(addr string) func(ctx context.Context) (int64, error) {
	return func(ctx context.Context) (int64, error) {
		var d net.Dialer
		c, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return 0, err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write([]byte("srvr")); err != nil {
			return 0, err
		}
		sc := bufio.NewScanner(c)
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "Received: "); ok {
				return strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			}
		}
		return 0, fmt.Errorf("zookeeper srvr at %s: no \"Received:\" line (%v)", addr, sc.Err())
	}
}

// writeScale prints TestScale's table and writes it, with a plot of idle
// requests against N (scale.svg beside it), to $TENURE_SCALE_OUT or
// scale.md.
func writeScale(t *testing.T, results []scaleResult, failovers []failoverResult, idle time.Duration) {
	var b strings.Builder
	fmt.Fprintf(&b, "# One process leading N keys: idle cost\n\n")
	fmt.Fprintf(&b, "%s, %s, %s. TTL %s; every key led, then %s idle. Requests are counted by the server "+
		"(etcd gRPC messages received, Redis commands, PostgreSQL statements in pg_stat_statements, "+
		"ZooKeeper packets received); CPU and memory are the client process's (the servers run in processes of their own); heap (live bytes after a GC) and stacks are what the electors added to what was in use before they started.\n\n",
		time.Now().UTC().Format("2006-01-02"), Machine(), runtime.Version(), scaleTTL, idle)
	b.WriteString("| store | elector | N keys | all led after | idle req/s | idle CPU, % of a core | heap MiB | stacks MiB |\n")
	b.WriteString("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |\n")
	for _, r := range results {
		if r.note != "" {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | | | | |\n", r.store, r.mode, r.n, r.note)
			continue
		}
		fmt.Fprintf(&b, "| %s | %s | %d | %s | %.2f | %.2f | %.1f | %.1f |\n", r.store, r.mode, r.n,
			r.elect.Round(time.Millisecond), r.reqPerSec, r.cpuPct, r.heapMiB, r.stackMiB)
	}
	if len(failovers) > 0 {
		fmt.Fprintf(&b, "\nFailover: process A leads N keys through one session while process B campaigns for all of them "+
			"(B's electors watching); A's connection then freezes (nothing released or renewed). Time until B leads every key; "+
			"a key whose new task started before A's task for it ended counts as an overlap.\n\n")
		b.WriteString("| store | A leads with | N keys | first moved after | all moved after | overlaps |\n| --- | --- | ---: | ---: | ---: | ---: |\n")
		for _, f := range failovers {
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %d |\n", f.store, f.lead, f.n, f.first.Round(time.Millisecond), f.all.Round(time.Millisecond), f.overlap)
		}
	}
	md := b.String()
	fmt.Println(md)
	out := os.Getenv(envScaleOut)
	if out == "" && !testing.Short() {
		out = "scale.md"
	}
	if out == "" || out == "-" {
		return
	}
	if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
		t.Fatal(err)
	}
	svg := strings.TrimSuffix(out, ".md") + ".svg"
	if err := os.WriteFile(svg, []byte(scalePlot(results)), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("table written to %s, plot to %s", out, svg)
}

// scalePlot draws idle requests per second against N, both on log scales,
// one line per store and elector, as a self-contained SVG.
func scalePlot(results []scaleResult) string {
	const w, h, left, right, top, bottom = 900, 440, 70, 400, 20, 50
	type series struct {
		name string
		pts  [][2]float64
	}
	var all []*series
	index := map[string]*series{}
	maxN, maxR := 10.0, 10.0
	for _, r := range results {
		if r.note != "" {
			continue
		}
		name := r.store + ": " + r.mode
		s := index[name]
		if s == nil {
			s = &series{name: name}
			index[name] = s
			all = append(all, s)
		}
		s.pts = append(s.pts, [2]float64{float64(r.n), math.Max(r.reqPerSec, 0.01)})
		maxN, maxR = math.Max(maxN, float64(r.n)), math.Max(maxR, r.reqPerSec)
	}
	decN, decR := math.Ceil(math.Log10(maxN)), math.Ceil(math.Log10(maxR))
	x := func(n float64) float64 { return left + (w-left-right)*math.Log10(n)/decN }
	y := func(v float64) float64 { return h - bottom - (h-top-bottom)*(math.Log10(v)+2)/(decR+2) }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="white"/>`+"\n", w, h)
	for d := 0.0; d <= decN; d++ {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#ddd"/><text x="%.1f" y="%d" text-anchor="middle">%g</text>`+"\n",
			x(math.Pow(10, d)), top, x(math.Pow(10, d)), h-bottom, x(math.Pow(10, d)), h-bottom+16, math.Pow(10, d))
	}
	for d := -2.0; d <= decR; d++ {
		fmt.Fprintf(&b, `<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%g</text>`+"\n",
			left, y(math.Pow(10, d)), w-right, y(math.Pow(10, d)), left-6, y(math.Pow(10, d))+4, math.Pow(10, d))
	}
	fmt.Fprintf(&b, `<text x="%d" y="%d" text-anchor="middle">keys led by one process (N)</text>`+"\n", left+(w-left-right)/2, h-12)
	fmt.Fprintf(&b, `<text x="16" y="%d" transform="rotate(-90 16 %d)" text-anchor="middle">idle store requests/s</text>`+"\n", h/2, h/2)
	colors := []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}
	for i, s := range all {
		c := colors[i%len(colors)]
		dash := ""
		if strings.Contains(s.name, "per key") {
			dash = ` stroke-dasharray="5,3"`
		}
		var pts []string
		for _, p := range s.pts {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(p[0]), y(p[1])))
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"%s/>`+"\n", strings.Join(pts, " "), c, dash)
		ly := top + 10 + 18*i
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="%s" stroke-width="2"%s/><text x="%d" y="%d">%s</text>`+"\n",
			w-right+10, ly, w-right+30, ly, c, dash, w-right+34, ly+4, s.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}
