package main

// installs: the README's "What it installs" table against what the chart renders.

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const installsHeading = "## What it installs"

var (
	// A kind in the Object column: "ClusterRole", not "cert-manager objects".
	kindName = regexp.MustCompile(`^[A-Z][A-Za-z0-9]*$`)
	// A rule in an RBAC row's Notes, as a code span: `resource[.group][/name] verb/verb/...`,
	// e.g. `rayclusters.ray.io get/list/watch` or `pods get` (core group).
	ruleMention = regexp.MustCompile("`([^`\\s]+) ([a-z*]+(?:/[a-z*]+)*)`")
	// A top-level `kind:` in a template.
	templateKind = regexp.MustCompile(`(?m)^kind:\s*(\w+)\s*$`)
)

// installsRow is one row of the table: the kinds its Object cell names, and its Notes.
type installsRow struct {
	line  int
	kinds []string
	notes string
}

// rules maps a rule key (`resource[.group][/name]`) to its verbs.
type rules map[string][]string

func (r rules) add(key string, verbs ...string) {
	r[key] = append(r[key], verbs...)
}

// cells splits a Markdown table row; `\|` stays inside its cell.
func cells(line string) []string {
	line = strings.TrimSpace(line)
	line = strings.TrimSuffix(strings.TrimPrefix(line, "|"), "|")
	parts := strings.Split(strings.ReplaceAll(line, `\|`, "\x00"), "|")
	for i, p := range parts {
		parts[i] = strings.TrimSpace(strings.ReplaceAll(p, "\x00", `\|`))
	}
	return parts
}

// installsTable parses the first table after the heading installsHeading.
func installsTable(readme string) ([]installsRow, error) {
	lines := strings.Split(readme, "\n")
	start := slices.Index(lines, installsHeading)
	if start < 0 {
		return nil, fmt.Errorf("no %q section", installsHeading)
	}
	i := start + 1
	for i < len(lines) && !strings.HasPrefix(lines[i], "|") {
		if strings.HasPrefix(lines[i], "#") {
			return nil, fmt.Errorf("no table under %q", installsHeading)
		}
		i++
	}
	if i+1 >= len(lines) {
		return nil, fmt.Errorf("no table under %q", installsHeading)
	}
	header := cells(lines[i])
	object, notes := slices.Index(header, "Object"), slices.Index(header, "Notes")
	if object < 0 || notes < 0 {
		return nil, fmt.Errorf("line %d: the table under %q needs columns Object and Notes", i+1, installsHeading)
	}
	var rows []installsRow
	var bad []string
	for i += 2; i < len(lines) && strings.HasPrefix(lines[i], "|"); i++ {
		c := cells(lines[i])
		if len(c) != len(header) {
			return nil, fmt.Errorf("line %d: %d cells, the header has %d", i+1, len(c), len(header))
		}
		row := installsRow{line: i + 1, notes: c[notes]}
		for _, k := range strings.FieldsFunc(c[object], func(r rune) bool { return r == '/' || r == ',' }) {
			k = strings.Trim(strings.TrimSpace(k), "`")
			if !kindName.MatchString(k) {
				bad = append(bad, fmt.Sprintf("line %d: %q in the Object column is not a kind", i+1, k))
				continue
			}
			row.kinds = append(row.kinds, k)
		}
		rows = append(rows, row)
	}
	if len(bad) > 0 {
		return nil, errors.New(strings.Join(bad, "\n  "))
	}
	if len(rows) == 0 {
		return nil, fmt.Errorf("the table under %q has no rows", installsHeading)
	}
	return rows, nil
}

// mentionedRules collects the rules written in a Notes cell.
func mentionedRules(notes string, into rules) {
	for _, m := range ruleMention.FindAllStringSubmatch(notes, -1) {
		into.add(m[1], strings.Split(m[2], "/")...)
	}
}

func ruleKey(group, resource, name string) string {
	key := resource
	if group != "" {
		key += "." + group
	}
	if name != "" {
		key += "/" + name
	}
	return key
}

// renderedKinds reads rendered manifests: the kinds, and the rules of ClusterRoles and
// Roles by kind.
func renderedKinds(data []byte, kinds map[string]bool, rbac map[string]rules) error {
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var o struct {
			Kind  string              `json:"kind"`
			Rules []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal(doc, &o); err != nil {
			return fmt.Errorf("document %d: %w", i, err)
		}
		if o.Kind == "" {
			continue // comments only
		}
		kinds[o.Kind] = true
		if o.Kind != "ClusterRole" && o.Kind != "Role" {
			continue
		}
		if rbac[o.Kind] == nil {
			rbac[o.Kind] = rules{}
		}
		for _, r := range o.Rules {
			if len(r.NonResourceURLs) > 0 {
				return fmt.Errorf("document %d: %s: nonResourceURLs are not supported", i, o.Kind)
			}
			names := r.ResourceNames
			if len(names) == 0 {
				names = []string{""}
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					for _, n := range names {
						rbac[o.Kind].add(ruleKey(g, res, n), r.Verbs...)
					}
				}
			}
		}
	}
}

// verbSet is the sorted, deduplicated verbs, as compared (the order is free).
func verbSet(verbs []string) []string {
	s := slices.Clone(verbs)
	sort.Strings(s)
	return slices.Compact(s)
}

// verbList is the verbs as the chart lists them, without repeats, for messages.
func verbList(verbs []string) string {
	var out []string
	for _, v := range verbs {
		if !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	return strings.Join(out, "/")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// compareInstalls lists where the table and the renders disagree: kinds without a row, rows
// naming kinds never rendered, kinds the templates declare that no render produced, and,
// for each rendered ClusterRole/Role, rules whose verbs the rows naming that kind do not
// state exactly (or state but the chart does not grant).
func compareInstalls(rows []installsRow, kinds map[string]bool, rbac map[string]rules, declared []string) []string {
	var msgs []string
	inTable := map[string]bool{}
	for _, r := range rows {
		for _, k := range r.kinds {
			inTable[k] = true
		}
	}
	for _, k := range sortedKeys(kinds) {
		if !inTable[k] {
			msgs = append(msgs, fmt.Sprintf("%s is rendered but has no row", k))
		}
	}
	for _, k := range sortedKeys(inTable) {
		if !kinds[k] {
			msgs = append(msgs, fmt.Sprintf("the table names %s, which no render has", k))
		}
	}
	for _, k := range declared {
		if !kinds[k] {
			msgs = append(msgs, fmt.Sprintf("a template declares kind %s, which no render has (turn it on in check-chart.sh's all-features render)", k))
		}
	}
	for _, kind := range sortedKeys(rbac) {
		written := rules{}
		for _, r := range rows {
			if slices.Contains(r.kinds, kind) {
				mentionedRules(r.notes, written)
			}
		}
		granted := rbac[kind]
		for _, key := range sortedKeys(granted) {
			want := verbList(granted[key])
			switch got, ok := written[key]; {
			case !ok:
				msgs = append(msgs, fmt.Sprintf("%s row: Notes lack `%s %s`", kind, key, want))
			case !slices.Equal(verbSet(got), verbSet(granted[key])):
				msgs = append(msgs, fmt.Sprintf("%s row: Notes say `%s %s`, the chart grants %s", kind, key, verbList(got), want))
			}
		}
		for _, key := range sortedKeys(written) {
			if _, ok := granted[key]; !ok {
				msgs = append(msgs, fmt.Sprintf("%s row: Notes name `%s %s`, which no rendered %s grants", kind, key, verbList(written[key]), kind))
			}
		}
	}
	return msgs
}

// declaredKinds lists the top-level kinds in the chart's templates/*.yaml.
func declaredKinds(dir string) ([]string, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no templates in %s", dir)
	}
	seen := map[string]bool{}
	for _, f := range files {
		text, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		for _, m := range templateKind.FindAllStringSubmatch(string(text), -1) {
			seen[m[1]] = true
		}
	}
	return sortedKeys(seen), nil
}

func installsCmd(args []string) error {
	fs := flag.NewFlagSet("installs", flag.ExitOnError)
	templates := fs.String("templates", "", "the chart's templates directory: each kind declared there must be rendered")
	fs.Parse(args)
	if fs.NArg() < 2 {
		return errors.New("installs: need README and at least one rendered manifest")
	}
	readme, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	rows, err := installsTable(string(readme))
	if err != nil {
		return fmt.Errorf("%s: %w", fs.Arg(0), err)
	}
	kinds, rbac := map[string]bool{}, map[string]rules{}
	for _, f := range fs.Args()[1:] {
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := renderedKinds(data, kinds, rbac); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	var declared []string
	if *templates != "" {
		if declared, err = declaredKinds(*templates); err != nil {
			return err
		}
	}
	if msgs := compareInstalls(rows, kinds, rbac, declared); len(msgs) > 0 {
		return fmt.Errorf("%s, %q table:\n  - %s", fs.Arg(0), installsHeading[3:], strings.Join(msgs, "\n  - "))
	}
	fmt.Fprintf(os.Stderr, "chartcheck: %s: %q names the %d kinds of %d renders and their RBAC rules\n",
		fs.Arg(0), installsHeading[3:], len(kinds), fs.NArg()-1)
	return nil
}
