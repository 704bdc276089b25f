// The chart's `config` fields against rayshare's Config struct.

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"regexp"
	"slices"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

var (
	rustStruct = regexp.MustCompile(`(?s)pub struct (\w+) \{(.*?)\n\}`)
	rustField  = regexp.MustCompile(`(?m)^\s*pub (\w+): ([\w<>:]+),`)
)

func camel(snake string) string {
	parts := strings.Split(snake, "_")
	for i := 1; i < len(parts); i++ {
		if parts[i] != "" {
			parts[i] = strings.ToUpper(parts[i][:1]) + parts[i][1:]
		}
	}
	return strings.Join(parts, "")
}

// rustConfigPaths lists the dotted camelCase paths of the leaves of struct Config.
func rustConfigPaths(src string) ([]string, error) {
	structs := map[string][][2]string{}
	for _, m := range rustStruct.FindAllStringSubmatch(src, -1) {
		for _, f := range rustField.FindAllStringSubmatch(m[2], -1) {
			structs[m[1]] = append(structs[m[1]], [2]string{f[1], f[2]})
		}
	}
	if len(structs["Config"]) == 0 {
		return nil, errors.New("no `pub struct Config` with fields found")
	}
	var paths []string
	var walk func(prefix, name string, depth int)
	walk = func(prefix, name string, depth int) {
		for _, f := range structs[name] {
			path := prefix + camel(f[0])
			if _, nested := structs[f[1]]; nested && depth < 8 {
				walk(path+".", f[1], depth+1)
			} else {
				paths = append(paths, path)
			}
		}
	}
	walk("", "Config", 0)
	sort.Strings(paths)
	return paths, nil
}

func valuePaths(prefix string, v any, out *[]string) {
	m, ok := v.(map[string]any)
	if !ok || len(m) == 0 {
		*out = append(*out, strings.TrimSuffix(prefix, "."))
		return
	}
	for k, sub := range m {
		valuePaths(prefix+k+".", sub, out)
	}
}

func schemaPaths(prefix string, s map[string]any, out *[]string) {
	props, _ := s["properties"].(map[string]any)
	if s["type"] != "object" || len(props) == 0 {
		*out = append(*out, strings.TrimSuffix(prefix, "."))
		return
	}
	for k, sub := range props {
		subSchema, _ := sub.(map[string]any)
		schemaPaths(prefix+k+".", subSchema, out)
	}
}

func configFieldsCmd(args []string) error {
	if len(args) != 3 {
		return errors.New("config-fields: need CONFIG_RS VALUES SCHEMA")
	}
	src, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	want, err := rustConfigPaths(string(src))
	if err != nil {
		return fmt.Errorf("%s: %w", args[0], err)
	}
	valuesText, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	var values map[string]any
	if err := yaml.Unmarshal(valuesText, &values); err != nil {
		return err
	}
	var inValues []string
	valuePaths("", values["config"], &inValues)
	sort.Strings(inValues)
	schemaText, err := os.ReadFile(args[2])
	if err != nil {
		return err
	}
	var schema map[string]any
	if err := json.Unmarshal(schemaText, &schema); err != nil {
		return err
	}
	props, _ := schema["properties"].(map[string]any)
	configSchema, _ := props["config"].(map[string]any)
	var inSchema []string
	schemaPaths("", configSchema, &inSchema)
	sort.Strings(inSchema)
	var msgs []string
	diff := func(what string, got []string) {
		for _, p := range want {
			if derivedConfig(p) {
				continue
			}
			if !slices.Contains(got, p) {
				msgs = append(msgs, fmt.Sprintf("%s lacks config.%s (a field of %s)", what, p, args[0]))
			}
		}
		for _, p := range got {
			if !slices.Contains(want, p) {
				msgs = append(msgs, fmt.Sprintf("%s has config.%s, which %s does not know", what, p, args[0]))
			}
		}
	}
	diff(args[1], inValues)
	diff(args[2], inSchema)
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "\n  "))
	}
	fmt.Fprintf(os.Stderr, "chartcheck: config has the %d fields of %s\n", len(want), args[0])
	return nil
}

// derivedConfig says whether a config field is set by the chart's templates from other
// values (so it is neither a value nor in the schema): servedNamespaces comes from
// webhook.enableLabel and webhook.excludedNamespaces, so that what rayshare serves is what
// the webhook registration selects.
func derivedConfig(path string) bool {
	return strings.HasPrefix(path, "servedNamespaces.") || path == "servedNamespaces"
}
