// The README's values table, generated from the comments in values.yaml.

package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	yamlv3 "go.yaml.in/yaml/v3"
)

const (
	tableStart = "<!-- values-table:start -->"
	tableEnd   = "<!-- values-table:end -->"
)

func readmeCmd(args []string) error {
	fs := flag.NewFlagSet("readme", flag.ExitOnError)
	write := fs.Bool("write", false, "rewrite the table instead of checking it")
	fs.Parse(args)
	if fs.NArg() != 2 {
		return errors.New("readme: need VALUES and README")
	}
	values, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(fs.Arg(1))
	if err != nil {
		return err
	}
	table, err := valuesTable(values)
	if err != nil {
		return err
	}
	text := string(readme)
	i, j := strings.Index(text, tableStart), strings.Index(text, tableEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s: markers %s / %s not found", fs.Arg(1), tableStart, tableEnd)
	}
	updated := text[:i+len(tableStart)] + "\n" + table + text[j:]
	if updated == text {
		return nil
	}
	if *write {
		return os.WriteFile(fs.Arg(1), []byte(updated), 0o644)
	}
	return fmt.Errorf("%s: values table is out of date (run tests/tools/check-chart.sh --update)", fs.Arg(1))
}

type row struct{ key, def, desc string }

// valuesTable makes one row per documented key (a `# --` comment above it). Undocumented
// mappings are descended into; an undocumented leaf is an error.
func valuesTable(values []byte) (string, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(values, &doc); err != nil {
		return "", err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yamlv3.MappingNode {
		return "", errors.New("values.yaml is not a mapping")
	}
	var rows []row
	var undocumented []string
	var walk func(prefix string, m *yamlv3.Node) error
	walk = func(prefix string, m *yamlv3.Node) error {
		for k := 0; k+1 < len(m.Content); k += 2 {
			key, val := m.Content[k], m.Content[k+1]
			path := prefix + key.Value
			desc, documented := docComment(key.HeadComment)
			if val.Kind == yamlv3.MappingNode && len(val.Content) > 0 && hasDocumented(val) {
				if err := walk(path+".", val); err != nil {
					return err
				}
				continue
			}
			if !documented {
				if val.Kind == yamlv3.MappingNode && len(val.Content) > 0 {
					if err := walk(path+".", val); err != nil {
						return err
					}
					continue
				}
				undocumented = append(undocumented, path)
				continue
			}
			var v any
			if err := val.Decode(&v); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			def, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			rows = append(rows, row{path, string(def), desc})
		}
		return nil
	}
	if err := walk("", doc.Content[0]); err != nil {
		return "", err
	}
	if len(undocumented) > 0 {
		return "", fmt.Errorf("values.yaml: keys without a `# --` description: %s", strings.Join(undocumented, ", "))
	}
	var b strings.Builder
	b.WriteString("| Key | Default | Description |\n|-----|---------|-------------|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", r.key, strings.ReplaceAll(r.def, "|", `\|`), strings.ReplaceAll(r.desc, "|", `\|`))
	}
	return b.String(), nil
}

func hasDocumented(m *yamlv3.Node) bool {
	for k := 0; k+1 < len(m.Content); k += 2 {
		if _, ok := docComment(m.Content[k].HeadComment); ok {
			return true
		}
		if m.Content[k+1].Kind == yamlv3.MappingNode && hasDocumented(m.Content[k+1]) {
			return true
		}
	}
	return false
}

// docComment returns the text of a `# -- ...` comment block (continued by `#` lines).
func docComment(c string) (string, bool) {
	lines := strings.Split(c, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "# --") {
			start = i
		}
	}
	if start < 0 {
		return "", false
	}
	var parts []string
	for i, l := range lines[start:] {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if i == 0 {
			l = strings.TrimSpace(strings.TrimPrefix(l, "--"))
		}
		if l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " "), true
}
