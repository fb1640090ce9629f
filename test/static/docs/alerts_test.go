package docs

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// prometheusRule is the part of config/prometheus/rules.yaml the runbook copies.
type prometheusRule struct {
	Spec struct {
		Groups []struct {
			Rules []struct {
				Alert  string            `json:"alert"`
				Expr   string            `json:"expr"`
				For    string            `json:"for"`
				Labels map[string]string `json:"labels"`
			} `json:"rules"`
		} `json:"groups"`
	} `json:"spec"`
}

// runbookRow is one row of the alerts table in docs/operations.md.
type runbookRow struct {
	expr, forDuration, severity string
}

// TestAlertRunbookMatchesRules keeps the runbook of docs/operations.md
// ("## Monitoring and alerts") equal to the PrometheusRule: one row per
// alert, with the rule's expression, `for` and severity, and no row for an
// alert that no longer exists.
func TestAlertRunbookMatchesRules(t *testing.T) {
	root := testutil.RepoRoot()
	b, err := os.ReadFile(filepath.Join(root, "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var rule prometheusRule
	if err := yaml.Unmarshal(b, &rule); err != nil {
		t.Fatalf("config/prometheus/rules.yaml: %v", err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "docs", "operations.md"))
	if err != nil {
		t.Fatal(err)
	}
	rows := runbookRows(string(doc))

	alerts := map[string]bool{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" {
				continue
			}
			alerts[r.Alert] = true
			row, ok := rows[r.Alert]
			if !ok {
				t.Errorf("alert %s has no row in the alerts table of docs/operations.md (## Monitoring and alerts)", r.Alert)
				continue
			}
			if want := collapseSpace(r.Expr); row.expr != want {
				t.Errorf("alert %s: docs/operations.md shows expression\n  %s\nthe rule says\n  %s", r.Alert, row.expr, want)
			}
			if row.forDuration != r.For {
				t.Errorf("alert %s: docs/operations.md shows for %q, the rule says %q", r.Alert, row.forDuration, r.For)
			}
			if row.severity != r.Labels["severity"] {
				t.Errorf("alert %s: docs/operations.md shows severity %q, the rule says %q", r.Alert, row.severity, r.Labels["severity"])
			}
		}
	}
	if len(alerts) == 0 {
		t.Fatal("no alerts found in config/prometheus/rules.yaml")
	}
	for name := range rows {
		if !alerts[name] {
			t.Errorf("docs/operations.md has a runbook row for %s, which config/prometheus/rules.yaml does not define", name)
		}
	}
}

func TestRunbookRowsParsing(t *testing.T) {
	doc := "## Monitoring and alerts\n\n| alert | expression (severity) | what to do |\n|---|---|---|\n" +
		"| `A` | `x{a=~\"b\\|c\"} > 0` for 10m (warning) | do \\| this |\n" +
		"| `B` | `y > 1` (info) | `z` |\n\n## Other\n| `C` | `w` (critical) | |\n"
	rows := runbookRows(doc)
	if len(rows) != 2 {
		t.Fatalf("rows = %v, want A and B", rows)
	}
	if r := rows["A"]; r.expr != `x{a=~"b|c"} > 0` || r.forDuration != "10m" || r.severity != "warning" {
		t.Errorf("A = %+v", r)
	}
	if r := rows["B"]; r.expr != "y > 1" || r.forDuration != "" || r.severity != "info" {
		t.Errorf("B = %+v", r)
	}
}

var (
	escapedPipe  = regexp.MustCompile(`\\\|`)
	runbookCell1 = regexp.MustCompile("^`([^`]+)`(?: for (\\S+))? \\((\\w+)\\)$")
	backtickOnly = regexp.MustCompile("^`([^`]+)`$")
)

// runbookRows reads the table rows under "## Monitoring and alerts": alert
// name, expression (with \| unescaped), `for` and severity.
func runbookRows(doc string) map[string]runbookRow {
	out := map[string]runbookRow{}
	in := false
	for _, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "## ") {
			in = trimmed == "## Monitoring and alerts"
			continue
		}
		if !in || !strings.HasPrefix(trimmed, "|") {
			continue
		}
		// Split on unescaped pipes only.
		const mark = "\x00"
		cells := strings.Split(strings.Trim(escapedPipe.ReplaceAllString(trimmed, mark), "|"), "|")
		if len(cells) < 2 {
			continue
		}
		name := backtickOnly.FindStringSubmatch(strings.TrimSpace(cells[0]))
		m := runbookCell1.FindStringSubmatch(strings.TrimSpace(cells[1]))
		if name == nil || m == nil {
			continue
		}
		out[name[1]] = runbookRow{expr: collapseSpace(strings.ReplaceAll(m[1], mark, "|")), forDuration: m[2], severity: m[3]}
	}
	return out
}

func collapseSpace(s string) string { return strings.Join(strings.Fields(s), " ") }
