package packaging

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/ml-operator/ml-operator/test/testutil"
)

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Title      string           `json:"title"`
	UID        string           `json:"uid"`
	Panels     []dashboardPanel `json:"panels"`
	Templating struct {
		List []struct {
			Name  string `json:"name"`
			Type  string `json:"type"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`

	panelsByTitle map[string]dashboardPanel
}

type dashboardPanel struct {
	Title   string `json:"title"`
	Type    string `json:"type"`
	Targets []struct {
		Expr string `json:"expr"`
	} `json:"targets"`
}

func parseDashboard(data []byte) (*dashboard, error) {
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboard is not valid JSON: %w", err)
	}
	if d.UID == "" || d.Title == "" {
		return nil, fmt.Errorf("dashboard has no uid or title")
	}
	d.panelsByTitle = map[string]dashboardPanel{}
	for _, p := range d.Panels {
		d.panelsByTitle[p.Title] = p
	}
	return &d, nil
}

// namedQuery is one PromQL expression and where it comes from.
type namedQuery struct {
	Where string
	Expr  string
}

// dashboardQueries returns every PromQL expression of the dashboard: panel
// targets and the label_values() of template variables.
func dashboardQueries(t *testing.T) []namedQuery {
	t.Helper()
	d := loadDashboard(t)
	var out []namedQuery
	for _, p := range d.Panels {
		if p.Type == "row" {
			continue
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, target := range p.Targets {
			out = append(out, namedQuery{Where: "panel " + p.Title, Expr: target.Expr})
		}
	}
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		metrics, label, err := variableSource(v.Query)
		if err != nil {
			t.Errorf("template variable %s: %v", v.Name, err)
			continue
		}
		// The label must exist on each metric: ask for it in a grouping.
		for _, m := range metrics {
			out = append(out, namedQuery{Where: "variable " + v.Name, Expr: fmt.Sprintf("count by (%s) (%s)", label, m)})
		}
	}
	return out
}

var (
	labelValues  = regexp.MustCompile(`^label_values\(\s*([^,]+?)\s*,\s*([a-zA-Z_]+)\s*\)$`)
	nameSelector = regexp.MustCompile(`^\{__name__=~"([a-zA-Z_:|]+)"\}$`)
)

// variableSource reads a template variable's label_values(metric, label)
// query, where metric is a metric name or {__name__=~"a|b"}, and returns the
// metric names and the label.
func variableSource(query any) (metrics []string, label string, err error) {
	var q string
	switch query := query.(type) {
	case string:
		q = query
	case map[string]any:
		q, _ = query["query"].(string)
	}
	m := labelValues.FindStringSubmatch(q)
	if m == nil {
		return nil, "", fmt.Errorf("query %q is not label_values(metric, label)", q)
	}
	if n := nameSelector.FindStringSubmatch(m[1]); n != nil {
		return strings.Split(n[1], "|"), m[2], nil
	}
	if strings.ContainsAny(m[1], "{}") {
		return nil, "", fmt.Errorf("query %q: only a metric name or {__name__=~\"a|b\"} is understood", q)
	}
	return []string{m[1]}, m[2], nil
}

// namespaceVariable returns the metrics and label of the dashboard's
// namespace variable.
func namespaceVariable(t *testing.T, d *dashboard) ([]string, string) {
	t.Helper()
	for _, v := range d.Templating.List {
		if v.Name == "namespace" {
			metrics, label, err := variableSource(v.Query)
			if err != nil {
				t.Fatal(err)
			}
			return metrics, label
		}
	}
	t.Fatal("dashboard has no namespace variable")
	return nil, ""
}

func loadDashboard(t *testing.T) *dashboard {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testutil.RepoRoot(), "config", "grafana", "dashboards", "ml-operator.json"))
	if err != nil {
		t.Fatal(err)
	}
	d, err := parseDashboard(data)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestNamespaceVariableCoversEveryKind: the namespace variable lists the
// job_namespace of a series every TrainingJob and every ModelDeployment has
// (trainingjob_state, modeldeployment_phase), so a namespace with only
// ModelDeployments is offered too; and every panel that filters on
// $namespace does so on job_namespace, for a kind the variable covers.
func TestNamespaceVariableCoversEveryKind(t *testing.T) {
	d := loadDashboard(t)
	metrics, label := namespaceVariable(t, d)
	if label != "job_namespace" {
		t.Errorf("the namespace variable reads label %q, want job_namespace (namespace is overwritten by Prometheus' namespace enforcement)", label)
	}
	for _, always := range []string{"trainingjob_state", "modeldeployment_phase"} {
		if !slices.Contains(metrics, always) {
			t.Errorf("the namespace variable reads %v, not %s: namespaces with only that kind are missing", metrics, always)
		}
	}
	filter := regexp.MustCompile(`([a-z_]+)\s*=~\s*"\$namespace"`)
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			for _, m := range filter.FindAllStringSubmatch(target.Expr, -1) {
				if m[1] != "job_namespace" {
					t.Errorf("panel %q filters %s on $namespace, want job_namespace: %s", p.Title, m[1], target.Expr)
				}
			}
			if !strings.Contains(target.Expr, "$namespace") {
				continue
			}
			for _, s := range metricSelectors(target.Expr) {
				kind, _, _ := strings.Cut(s.Metric, "_")
				covered := slices.ContainsFunc(metrics, func(v string) bool { return strings.HasPrefix(v, kind+"_") })
				if !covered {
					t.Errorf("panel %q reads %s filtered by $namespace, whose kind the variable (%v) does not cover", p.Title, s.Metric, metrics)
				}
			}
		}
	}
}

// alertQueries returns the expression of every alert in config/prometheus.
func alertQueries(t *testing.T) []namedQuery {
	t.Helper()
	objs := buildAndDecode(t, "config/prometheus")
	rules := unstructuredOf(objs, "PrometheusRule")
	if len(rules) != 1 {
		t.Fatalf("want one PrometheusRule, got %d", len(rules))
	}
	groups, _, err := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
	if err != nil || len(groups) == 0 {
		t.Fatalf("PrometheusRule has no groups: %v", err)
	}
	var out []namedQuery
	for _, g := range groups {
		group := g.(map[string]any)
		for _, r := range group["rules"].([]any) {
			rule := r.(map[string]any)
			name, _ := rule["alert"].(string)
			expr, _ := rule["expr"].(string)
			if name == "" || strings.TrimSpace(expr) == "" {
				t.Errorf("group %v has a rule without alert name or expr: %v", group["name"], rule)
			}
			out = append(out, namedQuery{Where: "alert " + name, Expr: expr})
		}
	}
	return out
}

// selector is one metric reference in a query: the metric name and the label
// names its matchers and the surrounding aggregation use.
type selector struct {
	Metric string
	Labels []string
}

var (
	stringLiteral  = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	rangeOrOffset  = regexp.MustCompile(`\[[^\]]*\]`)
	matcherBlock   = regexp.MustCompile(`\{([^}]*)\}`)
	matcherLabel   = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)\s*(=~|!~|!=|=)`)
	groupingClause = regexp.MustCompile(`\b(by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)`)
	identifier     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
)

// promqlWords are PromQL keywords and functions: identifiers that are not metrics.
var promqlWords = map[string]bool{
	"and": true, "or": true, "unless": true, "bool": true, "offset": true, "by": true, "without": true,
	"on": true, "ignoring": true, "group_left": true, "group_right": true, "inf": true, "nan": true,
}

// metricSelectors extracts the metric names a PromQL expression reads, with
// the label names used in its matchers and in by()/without()/on() clauses
// (which are attributed to every metric of the expression). It is not a full
// PromQL parser: it handles the subset our dashboards and alerts use
// (selectors, ranges, aggregations, binary operators, functions), and the
// table test below pins that down.
func metricSelectors(expr string) []selector {
	// Matchers first, so their string values cannot look like metric names.
	type blockInfo struct{ labels []string }
	var blocks []blockInfo
	s := matcherBlock.ReplaceAllStringFunc(expr, func(b string) string {
		inner := matcherBlock.FindStringSubmatch(b)[1]
		var ls []string
		for _, m := range matcherLabel.FindAllStringSubmatch(stringLiteral.ReplaceAllString(inner, `""`), -1) {
			ls = append(ls, m[1])
		}
		blocks = append(blocks, blockInfo{ls})
		return fmt.Sprintf(" __block%d__ ", len(blocks)-1)
	})
	s = stringLiteral.ReplaceAllString(s, " ")
	s = rangeOrOffset.ReplaceAllString(s, " ")
	var grouping []string
	s = groupingClause.ReplaceAllStringFunc(s, func(c string) string {
		m := groupingClause.FindStringSubmatch(c)
		for _, l := range strings.Split(m[2], ",") {
			if l = strings.TrimSpace(l); l != "" {
				grouping = append(grouping, l)
			}
		}
		return " "
	})
	var out []selector
	locs := identifier.FindAllStringIndex(s, -1)
	for i, loc := range locs {
		word := s[loc[0]:loc[1]]
		rest := strings.TrimLeft(s[loc[1]:], " \t\n")
		switch {
		case strings.HasPrefix(word, "__block"):
			continue
		case promqlWords[strings.ToLower(word)]:
			continue
		case strings.HasPrefix(rest, "("): // a function or aggregation
			continue
		case loc[0] > 0 && (s[loc[0]-1] >= '0' && s[loc[0]-1] <= '9' || s[loc[0]-1] == '.'): // 1e3, 0.5
			continue
		}
		sel := selector{Metric: word}
		if strings.HasPrefix(rest, "__block") {
			var n int
			fmt.Sscanf(rest, "__block%d__", &n)
			sel.Labels = append(sel.Labels, blocks[n].labels...)
		}
		sel.Labels = append(sel.Labels, grouping...)
		_ = i
		out = append(out, sel)
	}
	return out
}

func TestMetricSelectors(t *testing.T) {
	tests := []struct {
		expr string
		want []selector
	}{
		{`sum by (state) (trainingjob_state{namespace=~"$namespace"})`,
			[]selector{{"trainingjob_state", []string{"namespace", "state"}}}},
		{`histogram_quantile(0.99, sum by (le, controller) (rate(controller_runtime_reconcile_time_seconds_bucket{job=~"$job"}[$__rate_interval])))`,
			[]selector{{"controller_runtime_reconcile_time_seconds_bucket", []string{"job", "le", "controller"}}}},
		{`min by (namespace, name) (certmanager_certificate_expiration_timestamp_seconds{name="x"}) - time() < 7 * 24 * 3600`,
			[]selector{{"certmanager_certificate_expiration_timestamp_seconds", []string{"name", "namespace", "name"}}}},
		{`count(max by (namespace, name) (modeldeployment_phase{namespace=~"a",phase=~"Degraded|Failed"}) > 0) or vector(0)`,
			[]selector{{"modeldeployment_phase", []string{"namespace", "phase", "namespace", "name"}}}},
		{`sum(increase(trainingjob_failed_total[10m])) / sum(trainingjob_created_total) > 0.5e1`,
			[]selector{{"trainingjob_failed_total", nil}, {"trainingjob_created_total", nil}}},
		{`trainingjob_loss{namespace="x {y}"}`,
			[]selector{{"trainingjob_loss", []string{"namespace"}}}},
	}
	for _, tt := range tests {
		got := metricSelectors(tt.expr)
		if len(got) != len(tt.want) {
			t.Errorf("%s:\n got %v\nwant %v", tt.expr, got, tt.want)
			continue
		}
		for i := range got {
			if got[i].Metric != tt.want[i].Metric || !slices.Equal(got[i].Labels, tt.want[i].Labels) {
				t.Errorf("%s:\n got %v\nwant %v", tt.expr, got, tt.want)
			}
		}
	}
}

func TestEveryQueryReadsAMetric(t *testing.T) {
	queries := append(dashboardQueries(t), alertQueries(t)...)
	if len(queries) < 10 {
		t.Fatalf("found only %d queries", len(queries))
	}
	for _, q := range queries {
		if len(metricSelectors(q.Expr)) == 0 {
			t.Errorf("%s: %q reads no metric", q.Where, q.Expr)
		}
	}
}

// sortedKeys returns a map's keys in order, for stable messages.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
