// monitorcheck checks the Grafana dashboard and the PrometheusRule the rayshare chart
// renders, with the upstream projects' own code:
//
//   - the dashboard is decoded strictly with Grafana's schema types (grafana-foundation-sdk:
//     unknown fields, wrong types and missing required fields are errors), panel options
//     and queries included;
//
//   - the PrometheusRule is decoded strictly with the Prometheus Operator's API types, and its
//     groups are written out for `promtool check rules` / `promtool test rules`;
//
//   - every PromQL expression (panels, template variables, alerts) is parsed with Prometheus'
//     parser, and every metric it reads must be in one of the given expositions (a live
//     rayshare, the real kube-apiserver), with every label it matches or groups by known.
//
//   - every alert has a `runbook_url` annotation pointing at a section of docs/runbooks.md
//     (an http(s) URL of that file whose #anchor is the GitHub anchor of one of its headings);
//     -runbooks names the file, else docs/runbooks.md is looked for in the working directory
//     and its parents.
//
//     monitorcheck -manifests render.yaml -metrics rayshare.txt -metrics apiserver.txt \
//     -rules-out rules.yaml [-runbooks docs/runbooks.md]
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/grafana/grafana-foundation-sdk/go/cog"
	"github.com/grafana/grafana-foundation-sdk/go/cog/plugins"
	"github.com/grafana/grafana-foundation-sdk/go/dashboard"
	"github.com/grafana/grafana-foundation-sdk/go/prometheus"
	"github.com/grafana/grafana-foundation-sdk/go/timeseries"
	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	"github.com/prometheus/prometheus/promql/parser"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// Labels every scraped series carries from its target (Prometheus Operator's ServiceMonitor)
// or that an expression may group by without reading them from a series.
var targetLabels = []string{"namespace", "job", "pod", "instance", "service", "endpoint", "container", "le"}

type multiFlag []string

func (m *multiFlag) String() string     { return strings.Join(*m, ",") }
func (m *multiFlag) Set(v string) error { *m = append(*m, v); return nil }

func main() {
	var metricFiles multiFlag
	manifests := flag.String("manifests", "", "rendered chart (multi-document YAML)")
	rulesOut := flag.String("rules-out", "", "write the PrometheusRule's groups here (a Prometheus rule file)")
	flag.Var(&metricFiles, "metrics", "a /metrics exposition (repeatable)")
	runbooks := flag.String("runbooks", "", "the runbooks the alerts' runbook_url must point into (default: "+runbookFile+" in the working directory or above)")
	flag.Parse()
	if *manifests == "" || *rulesOut == "" || len(metricFiles) == 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(*manifests, *rulesOut, *runbooks, metricFiles); err != nil {
		fmt.Fprintf(os.Stderr, "monitorcheck: FAIL: %v\n", err)
		os.Exit(1)
	}
}

func run(manifests, rulesOut, runbooks string, metricFiles []string) error {
	runbooks, err := findRunbooks(runbooks)
	if err != nil {
		return err
	}
	markdown, err := os.ReadFile(runbooks)
	if err != nil {
		return err
	}
	known := exposition{}
	for _, f := range metricFiles {
		if err := known.read(f); err != nil {
			return err
		}
	}
	data, err := os.ReadFile(manifests)
	if err != nil {
		return err
	}
	dashboards, rules, err := split(data)
	if err != nil {
		return err
	}
	if len(dashboards) != 1 || len(rules) != 1 {
		return fmt.Errorf("want one dashboard ConfigMap and one PrometheusRule, got %d and %d", len(dashboards), len(rules))
	}
	var problems []string
	plugins.RegisterDefaultPlugins()
	exprs, err := dashboardExprs(dashboards[0])
	if err != nil {
		return err
	}
	groups, ruleExprs, runbookURLs, err := ruleGroups(rules[0])
	if err != nil {
		return err
	}
	if err := os.WriteFile(rulesOut, groups, 0o644); err != nil {
		return err
	}
	exprs = append(exprs, ruleExprs...)
	for _, e := range exprs {
		problems = append(problems, known.check(e)...)
	}
	problems = append(problems, checkRunbooks(runbookURLs, anchors(markdown), runbooks)...)
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "\n  "))
	}
	fmt.Printf("monitorcheck: OK: dashboard and %d rule expressions (%d in all) parse and read only known metrics and labels; %d alerts link a section of %s\n",
		len(ruleExprs), len(exprs), len(runbookURLs), runbooks)
	return nil
}

// split returns the dashboards (JSON) of the dashboard ConfigMaps and the PrometheusRules.
func split(data []byte) ([][]byte, [][]byte, error) {
	var dashboards, rules [][]byte
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for {
		doc, err := reader.Read()
		if err == io.EOF {
			return dashboards, rules, nil
		}
		if err != nil {
			return nil, nil, err
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, nil, err
		}
		switch meta.APIVersion + "/" + meta.Kind {
		case "monitoring.coreos.com/v1/PrometheusRule":
			rules = append(rules, doc)
		case "v1/ConfigMap":
			var cm corev1.ConfigMap
			if err := yaml.UnmarshalStrict(doc, &cm); err != nil {
				return nil, nil, err
			}
			for key, text := range cm.Data {
				if strings.HasSuffix(key, ".json") {
					dashboards = append(dashboards, []byte(text))
				}
			}
		}
	}
}

type expr struct {
	where string
	text  string
}

// Grafana's variables, as a Prometheus data source expands them.
var grafanaVars = strings.NewReplacer(
	"$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h",
	"$namespace", "rayshare-system", "$job", "rayshare",
)

func dashboardExprs(raw []byte) ([]expr, error) {
	var d dashboard.Dashboard
	if err := built(d.UnmarshalJSONStrict(raw)); err != nil {
		return nil, fmt.Errorf("dashboard (strict, Grafana schema): %w", err)
	}
	if err := d.Validate(); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	var out []expr
	labelValues := regexp.MustCompile(`^label_values\((.*),\s*([a-zA-Z_][a-zA-Z0-9_]*)\)$`)
	for _, v := range d.Templating.List {
		if v.Type != "query" {
			continue
		}
		var text string
		if v.Query != nil && v.Query.Map != nil {
			text, _ = v.Query.Map["query"].(string)
		} else if v.Query != nil && v.Query.String != nil {
			text = *v.Query.String
		}
		m := labelValues.FindStringSubmatch(text)
		if m == nil {
			return nil, fmt.Errorf("variable %s: want label_values(<selector>, <label>), got %q", v.Name, text)
		}
		// label_values(sel, label) reads `label` from the series `sel` selects.
		out = append(out, expr{"variable " + v.Name, fmt.Sprintf("count by (%s) (%s)", m[2], grafanaVars.Replace(m[1]))})
	}
	// Each panel on its own: the SDK's PanelOrRowPanel.UnmarshalJSONStrict drops every panel
	// (it mistakes the empty error list of a good panel for an error).
	var raws struct {
		Panels []json.RawMessage `json:"panels"`
	}
	if err := json.Unmarshal(raw, &raws); err != nil {
		return nil, err
	}
	panels := 0
	for i, pr := range raws.Panels {
		var row dashboard.RowPanel
		if built(row.UnmarshalJSONStrict(pr)) == nil && row.Type == "row" {
			continue
		}
		var p dashboard.Panel
		if err := built(p.UnmarshalJSONStrict(pr)); err != nil {
			return nil, fmt.Errorf("panel %d (strict, Grafana schema): %w", i, err)
		}
		panels++
		title := "panel " + deref(p.Title)
		// The panel's own parts, strictly, with their plugins' types (the SDK's panel decoder
		// drops targets and options on the same mistake).
		var parts struct {
			Targets     []json.RawMessage `json:"targets"`
			Options     json.RawMessage   `json:"options"`
			FieldConfig struct {
				Defaults struct {
					Custom json.RawMessage `json:"custom"`
				} `json:"defaults"`
			} `json:"fieldConfig"`
		}
		if err := json.Unmarshal(pr, &parts); err != nil {
			return nil, err
		}
		if p.Type != "timeseries" {
			return nil, fmt.Errorf("%s: a %q panel; this check knows timeseries panels", title, p.Type)
		}
		var options timeseries.Options
		if err := built(options.UnmarshalJSONStrict(parts.Options)); err != nil {
			return nil, fmt.Errorf("%s: options (strict, timeseries schema): %w", title, err)
		}
		var custom timeseries.FieldConfig
		if err := built(custom.UnmarshalJSONStrict(parts.FieldConfig.Defaults.Custom)); err != nil {
			return nil, fmt.Errorf("%s: fieldConfig.defaults.custom (strict, timeseries schema): %w", title, err)
		}
		if len(parts.Targets) == 0 {
			return nil, fmt.Errorf("%s has no query", title)
		}
		for j, t := range parts.Targets {
			var q prometheus.Dataquery
			if err := built(q.UnmarshalJSONStrict(t)); err != nil {
				return nil, fmt.Errorf("%s: target %d (strict, Prometheus query schema): %w", title, j, err)
			}
			if q.Expr == "" {
				return nil, fmt.Errorf("%s: empty expression", title)
			}
			out = append(out, expr{title, grafanaVars.Replace(q.Expr)})
		}
	}
	if panels == 0 {
		return nil, errors.New("the dashboard has no panels")
	}
	return out, nil
}

// ruleGroups returns the rule groups (a Prometheus rule file), the alerts' expressions and
// their runbook_url annotations by alert name ("" where there is none).
func ruleGroups(doc []byte) ([]byte, []expr, map[string]string, error) {
	var rule monitoringv1.PrometheusRule
	if err := yaml.UnmarshalStrict(doc, &rule); err != nil {
		return nil, nil, nil, fmt.Errorf("PrometheusRule (strict, Prometheus Operator types): %w", err)
	}
	var out []expr
	runbooks := map[string]string{}
	for _, g := range rule.Spec.Groups {
		for _, r := range g.Rules {
			name := r.Alert + r.Record
			if r.Alert == "" || r.Annotations["summary"] == "" || r.Annotations["description"] == "" || r.Labels["severity"] == "" {
				return nil, nil, nil, fmt.Errorf("rule %q: every rule is an alert with a severity, a summary and a description", name)
			}
			if _, dup := runbooks[name]; dup {
				return nil, nil, nil, fmt.Errorf("alert %q is defined twice", name)
			}
			runbooks[name] = r.Annotations["runbook_url"]
			out = append(out, expr{"alert " + name, r.Expr.String()})
		}
	}
	groups, err := yaml.Marshal(map[string]any{"groups": rule.Spec.Groups})
	return groups, out, runbooks, err
}

// built is err, except the empty error list the SDK's UnmarshalJSONStrict returns (as a
// non-nil interface) when all went well.
func built(err error) error {
	if errs, ok := err.(cog.BuildErrors); ok && len(errs) == 0 {
		return nil
	}
	return err
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

// exposition: the sample names and the label names of each family in /metrics outputs.
type exposition map[string]map[string]bool

var typeLine = regexp.MustCompile(`^# TYPE (\S+) (\S+)`)
var sample = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([^}]*)\})?\s`)
var labelName = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="`)

func (x exposition) read(path string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	add := func(name string) map[string]bool {
		if x[name] == nil {
			x[name] = map[string]bool{}
		}
		return x[name]
	}
	n := 0
	for _, line := range strings.Split(string(data), "\n") {
		if m := typeLine.FindStringSubmatch(line); m != nil {
			// The sample names a family's type gives it, even before its first sample.
			switch m[2] {
			case "counter":
				add(strings.TrimSuffix(m[1], "_total") + "_total")
			case "histogram":
				for _, s := range []string{"_bucket", "_sum", "_count"} {
					add(m[1] + s)
				}
			default:
				add(m[1])
			}
			n++
			continue
		}
		if m := sample.FindStringSubmatch(line); m != nil {
			labels := add(m[1])
			for _, l := range labelName.FindAllStringSubmatch(m[3], -1) {
				labels[l[1]] = true
			}
		}
	}
	if n == 0 {
		return fmt.Errorf("%s: no metric families", path)
	}
	return nil
}

var promql = parser.NewParser(parser.Options{})

// check parses e and reports metrics it reads that no exposition has, and labels it matches
// or groups by that none of the series it reads carry.
func (x exposition) check(e expr) []string {
	ast, err := promql.ParseExpr(e.text)
	if err != nil {
		return []string{fmt.Sprintf("%s: %v (%s)", e.where, err, e.text)}
	}
	var problems []string
	seen := map[string]bool{}
	for _, sel := range selectors(ast) {
		name := sel.Name
		labels, ok := x[name]
		if !ok {
			if !seen[name] {
				problems = append(problems, fmt.Sprintf("%s: no exposition has %s", e.where, name))
			}
			seen[name] = true
			continue
		}
		for _, m := range sel.LabelMatchers {
			if m.Name != "__name__" && !x.labelKnown(labels, m.Name) {
				problems = append(problems, fmt.Sprintf("%s: %s has no label %q", e.where, name, m.Name))
			}
		}
	}
	parser.Inspect(ast, func(node parser.Node, _ []parser.Node) error {
		agg, ok := node.(*parser.AggregateExpr)
		if !ok {
			return nil
		}
		inner := map[string]bool{}
		for _, sel := range selectors(agg.Expr) {
			for l := range x[sel.Name] {
				inner[l] = true
			}
		}
		for _, l := range agg.Grouping {
			if !x.labelKnown(inner, l) {
				problems = append(problems, fmt.Sprintf("%s: groups by %q, which no series it reads carries", e.where, l))
			}
		}
		return nil
	})
	sort.Strings(problems)
	return problems
}

func (x exposition) labelKnown(labels map[string]bool, name string) bool {
	if labels[name] || len(labels) == 0 { // a family with no sample yet: its labels are unknown
		return true
	}
	for _, t := range targetLabels {
		if t == name {
			return true
		}
	}
	return false
}

func selectors(node parser.Node) []*parser.VectorSelector {
	var out []*parser.VectorSelector
	parser.Inspect(node, func(n parser.Node, _ []parser.Node) error {
		if s, ok := n.(*parser.VectorSelector); ok {
			out = append(out, s)
		}
		return nil
	})
	return out
}
