package packaging

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/model/rulefmt"
	"github.com/prometheus/prometheus/promql/parser"
	"github.com/stretchr/testify/require"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// TestAlertRulesPassPromtoolChecks parses the PrometheusRule's groups with
// Prometheus' own rule loader (model/rulefmt, what `promtool check rules`
// runs): every expression parses as PromQL, every alert has a valid name,
// `for`, labels, and annotation templates that parse.
func TestAlertRulesPassPromtoolChecks(t *testing.T) {
	rules := unstructuredOf(buildAndDecode(t, "config/prometheus"), "PrometheusRule")
	require.Len(t, rules, 1)
	groups, _, err := unstructured.NestedSlice(rules[0].Object, "spec", "groups")
	require.NoError(t, err)
	content, err := yaml.Marshal(map[string]any{"groups": groups})
	require.NoError(t, err)
	parsed, errs := rulefmt.Parse(content, false, model.UTF8Validation, parser.NewParser(parser.Options{}), slog.New(slog.DiscardHandler))
	for _, e := range errs {
		t.Errorf("config/prometheus/rules.yaml: %v", e)
	}
	require.NotNil(t, parsed)
	n := 0
	for _, g := range parsed.Groups {
		n += len(g.Rules)
	}
	require.Equal(t, len(alertQueries(t)), n, "rulefmt read another number of rules than the PrometheusRule has")
}

// grafanaVariables stand in for the dashboard's variables and Grafana's
// built-in intervals, as Grafana substitutes them before it queries.
var grafanaVariables = strings.NewReplacer(
	"$__rate_interval", "1m",
	"$__range", "1h",
	"$__interval", "30s",
	"$namespace", ".*",
	"$job", ".*",
)

// TestDashboardQueriesParseAsPromQL parses every panel expression of the
// Grafana dashboard with Prometheus' PromQL parser, variables substituted.
func TestDashboardQueriesParseAsPromQL(t *testing.T) {
	d := loadDashboard(t)
	n := 0
	for _, p := range d.Panels {
		for _, target := range p.Targets {
			n++
			expr := grafanaVariables.Replace(target.Expr)
			if strings.Contains(expr, "$") {
				t.Errorf("panel %q: unknown variable in %s", p.Title, target.Expr)
				continue
			}
			if _, err := parser.NewParser(parser.Options{}).ParseExpr(expr); err != nil {
				t.Errorf("panel %q: %s: %v", p.Title, target.Expr, err)
			}
		}
	}
	require.NotZero(t, n)
}
