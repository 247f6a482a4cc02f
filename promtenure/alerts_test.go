package promtenure

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/tenurehq/tenure/internal/testserver"
)

// TestAlertRules: alerts.yml is valid, and its rules fire (and stay
// quiet) as testdata/alerts_test.yml says, by promtool, Prometheus's own
// rule checker and evaluator.
func TestAlertRules(t *testing.T) {
	promtool := testserver.LookPath(t, "promtool", "apt-get install prometheus")
	for _, args := range [][]string{
		{"check", "rules", "alerts.yml"},
		{"test", "rules", "testdata/alerts_test.yml"},
	} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestAlertRulesUseExportedSeries: every metric alerts.yml reads is one a
// Collector or a SessionCollector exports, and every reason it names is
// one they export, so a renamed metric or reason cannot leave an alert that never
// fires.
func TestAlertRulesUseExportedSeries(t *testing.T) {
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	exported, reasons := map[string]bool{}, map[string]bool{}
	for _, f := range everySeries(t) {
		exported[f.GetName()] = true
		for _, m := range f.GetMetric() {
			for _, lp := range m.GetLabel() {
				if lp.GetName() == "reason" {
					reasons[f.GetName()+" "+lp.GetValue()] = true
				}
			}
		}
	}
	var expr strings.Builder // the rules' text without comments
	for _, line := range strings.Split(string(rules), "\n") {
		if !strings.HasPrefix(strings.TrimSpace(line), "#") {
			expr.WriteString(line + "\n")
		}
	}
	names := regexp.MustCompile(`\b(leader_election_master_status|tenure_[a-z_]+)\b`).FindAllString(expr.String(), -1)
	if len(names) == 0 {
		t.Fatal("alerts.yml reads no tenure metric")
	}
	for _, n := range names {
		if !exported[n] {
			t.Errorf("alerts.yml reads %s, which no collector exports", n)
		}
	}
	for _, m := range regexp.MustCompile(`\b(tenure_[a-z_]+)\{reason=~"([^"]+)"`).FindAllStringSubmatch(expr.String(), -1) {
		for _, r := range strings.Split(m[2], "|") {
			if !reasons[m[1]+" "+r] {
				t.Errorf("alerts.yml matches reason %q of %s, which no collector exports", r, m[1])
			}
		}
	}
}

// TestREADMEAlertIsTheFile: the rule the README shows is alerts.yml's, to
// the letter but for indentation.
func TestREADMEAlertIsTheFile(t *testing.T) {
	readme, err := os.ReadFile("../README.md")
	if err != nil {
		t.Fatal(err)
	}
	rules, err := os.ReadFile("alerts.yml")
	if err != nil {
		t.Fatal(err)
	}
	block := regexp.MustCompile(`(?s)- alert: TenureNotOneLeader\n.*?for: 1m\n`).Find(readme)
	if block == nil {
		t.Fatal("the README shows no TenureNotOneLeader rule")
	}
	words := func(b []byte) string { return strings.Join(strings.Fields(string(b)), " ") }
	if !strings.Contains(words(rules), words(block)) {
		t.Errorf("the README's rule is not alerts.yml's:\n%s", block)
	}
}
