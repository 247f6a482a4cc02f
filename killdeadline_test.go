package tenure

import (
	"testing"
	"time"
)

// Deadlines follows the term's deadline as renewals move it; kill is
// always grace after stop.
func TestTermDeadlines(t *testing.T) {
	base := time.Unix(1000, 0)
	term := newTerm(Lease{Term: 1}, SystemClock, base, base.Add(6*time.Second))
	const grace = 2 * time.Second
	for _, d := range []time.Time{base.Add(6 * time.Second), base.Add(9 * time.Second)} {
		term.extend(d)
		stop, kill := term.Deadlines(grace)
		if !stop.Equal(term.Deadline()) || !stop.Equal(d) || !kill.Equal(d.Add(grace)) {
			t.Fatalf("Deadlines(%s) = %v, %v; want %v, %v", grace, stop, kill, d, d.Add(grace))
		}
	}
}
