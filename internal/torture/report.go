package torture

import (
	"cmp"
	"fmt"
	"html"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/tenurehq/tenure/internal/stats"
)

// Summary writes a table a person can read at a glance: faults injected by
// kind, failover p50/p99 per kind, writes accepted and fenced off, and the
// violations.
func Summary(w io.Writer, h *History, vs []Violation) {
	fmt.Fprintf(w, "store %s  seed %d  TTL %s  run %s  leaderships %d\n", h.Store, h.Seed, h.TTL, h.Duration.Round(time.Second), len(h.Intervals))
	counts := map[FaultKind]int{}
	for _, f := range h.Faults {
		counts[f.Kind]++
	}
	fo := Failovers(h)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "fault\tinjected\tfailovers\tp50\tp99\t")
	var kinds []FaultKind
	for k := range counts {
		kinds = append(kinds, k)
	}
	slices.Sort(kinds)
	for _, k := range kinds {
		s := fo[k]
		p50, p99 := "-", "-"
		if len(s) > 0 {
			p50, p99 = ms(stats.Percentile(s, 50)), ms(stats.Percentile(s, 99))
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%s\t%s\t\n", k, counts[k], len(s), p50, p99)
	}
	tw.Flush()
	acc, rej := 0, 0
	for _, x := range h.Writes {
		if x.Accepted {
			acc++
		} else {
			rej++
		}
	}
	fmt.Fprintf(w, "ledger: %d writes accepted, %d stale writes fenced off\n", acc, rej)
	if h.Bound > 0 {
		heals, judged := 0, 0
		iv := h.sorted()
		for _, f := range h.Faults {
			if f.Healed != 0 {
				heals++
			}
			if _, ok := h.ledAfter(iv, f, h.Bound); ok {
				judged++
			}
		}
		fmt.Fprintf(w, "liveness (a leader within %s of each heal) judged after %d of %d heals\n", h.Bound, judged, heals)
	}
	if len(h.Late) > 0 {
		latest := slices.MaxFunc(h.Late, func(a, b Late) int { return cmp.Compare(a.After, b.After) })
		fmt.Fprintf(w, "leaderships ended by the renew deadline: %d; the latest notice, %s term %d's task %s after it (later than TTL−RenewDeadline can overlap the next leader)\n",
			len(h.Late), latest.ID, latest.Term, ms(latest.After))
	}
	fmt.Fprintf(w, "violations: %d\n", len(vs))
	for _, v := range vs {
		fmt.Fprintf(w, "  %s\n", v)
	}
}

// SVG writes a timeline of h: one row per candidate, a bar per leadership
// labelled with its term, shaded spans for faults, and red ticks for writes
// the ledger fenced off.
func SVG(w io.Writer, h *History, vs []Violation) error {
	ids := candidates(h)
	const left, right, rowH, top = 110, 20, 34, 56
	width := 1100
	height := top + rowH*len(ids) + 60
	span := max(h.Duration, time.Second)
	x := func(d time.Duration) float64 {
		return left + float64(width-left-right)*float64(d)/float64(span)
	}
	row := map[string]int{}
	for i, id := range ids {
		row[id] = i
	}
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">`+"\n", width, height)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	verdict := "no violations"
	if len(vs) > 0 {
		verdict = fmt.Sprintf("%d VIOLATIONS", len(vs))
	}
	fmt.Fprintf(&b, `<text x="10" y="22" font-size="15" font-weight="bold">tenure torture: %s, seed %d, TTL %s, %d faults, %d leaderships: %s</text>`+"\n",
		html.EscapeString(h.Store), h.Seed, h.TTL, len(h.Faults), len(h.Intervals), verdict)
	fmt.Fprintf(&b, `<text x="10" y="40" fill="#555">bars: leadership (label = term); shaded: fault until healed; red ticks: stale writes the ledger rejected</text>`+"\n")
	// Time axis.
	axisY := top + rowH*len(ids) + 14
	step := niceStep(span)
	for t := time.Duration(0); t <= span; t += step {
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>`+"\n", x(t), top-4, x(t), axisY-10)
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" text-anchor="middle" fill="#555">%s</text>`+"\n", x(t), axisY, t)
	}
	for i, id := range ids {
		y := top + i*rowH
		fmt.Fprintf(&b, `<text x="10" y="%d">%s</text>`+"\n", y+rowH/2+4, html.EscapeString(id))
		fmt.Fprintf(&b, `<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="#ddd"/>`+"\n", left, y+rowH-2, width-right, y+rowH-2)
	}
	for _, f := range h.Faults {
		end := f.Healed
		if end == 0 {
			end = f.At + span/200
		}
		y0, hgt := top, rowH*len(ids)
		if r, ok := row[f.Target]; ok {
			y0, hgt = top+r*rowH, rowH
		}
		color := "#f5a623"
		if f.OutsideAssumptions {
			color = "#d0021b"
		}
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="%d" fill="%s" opacity="0.25"><title>%s %s at %s, healed %s</title></rect>`+"\n",
			x(f.At), y0, max(x(end)-x(f.At), 2), hgt, color, f.Kind, html.EscapeString(f.Target), ms(f.At), ms(f.Healed))
		fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" fill="%s">%s</text>`+"\n", x(f.At)+1, y0+10, color, f.Kind)
	}
	for _, iv := range h.Intervals {
		r, ok := row[iv.ID]
		if !ok {
			continue
		}
		y := top + r*rowH + 12
		x0, x1 := x(iv.Start), x(h.end(iv))
		hue := (iv.Term * 67) % 360
		fmt.Fprintf(&b, `<rect x="%.1f" y="%d" width="%.1f" height="16" rx="3" fill="hsl(%d,60%%,55%%)"><title>%s term %d: %s to %s</title></rect>`+"\n",
			x0, y, max(x1-x0, 1.5), hue, html.EscapeString(iv.ID), iv.Term, ms(iv.Start), ms(h.end(iv)))
		if x1-x0 > 18 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%d" font-size="10" fill="white">%d</text>`+"\n", x0+3, y+12, iv.Term)
		}
	}
	for _, wr := range h.Writes {
		if r, ok := row[wr.ID]; ok && !wr.Accepted {
			y := top + r*rowH + 6
			fmt.Fprintf(&b, `<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#d0021b" stroke-width="2"><title>stale write, term %d, at %s</title></line>`+"\n",
				x(wr.At), y, x(wr.At), y+26, wr.Term, ms(wr.At))
		}
	}
	b.WriteString("</svg>\n")
	_, err := io.WriteString(w, b.String())
	return err
}

func candidates(h *History) []string {
	seen := map[string]bool{}
	var ids []string
	add := func(id string) {
		if id != "" && !seen[id] {
			seen[id] = true
			ids = append(ids, id)
		}
	}
	for _, iv := range h.Intervals {
		add(iv.ID)
	}
	for _, f := range h.Faults {
		add(f.Target)
	}
	slices.Sort(ids)
	return ids
}

func niceStep(span time.Duration) time.Duration {
	for _, s := range []time.Duration{time.Second, 2 * time.Second, 5 * time.Second, 10 * time.Second, 15 * time.Second, 30 * time.Second, time.Minute, 2 * time.Minute, 5 * time.Minute} {
		if span/s <= 12 {
			return s
		}
	}
	return 10 * time.Minute
}
