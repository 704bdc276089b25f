// Command kuberayyaml prints, for each runtimeEnvYAML below, what KubeRay makes of it:
// sigs.k8s.io/yaml.YAMLToJSON, as ray-operator's controllers/ray/common/job.go calls it.
// rayshare's reader (src/shared_cluster/kuberay_yaml.rs) must agree on every case.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/yaml"
)

type result struct {
	YAML  string          `json:"yaml"`
	JSON  json.RawMessage `json:"json,omitempty"`
	Error string          `json:"error,omitempty"`
}

func main() {
	scalars := []string{
		"on", "On", "ON", "off", "Off", "yes", "Yes", "no", "NO", "y", "Y", "n", "N",
		"true", "True", "false", "FALSE", "~", "null", "Null", "NULL", "",
		"1_000", "0x1F", "-0x1F", "0X1f", "017", "0o17", "0b101", "-0b101", "08", "09.5", "+12", "-0",
		"3", "3.0", "1.", ".5", "-.5", "1e3", "1E3", "-1.5e-3", "1e400", "._5",
		"18446744073709551615", "18446744073709551616", "-9223372036854775808", "-9223372036854775809",
		"99999999999999999999", "2024-01-02", "2024-01-02T10:00:00Z", "1:20", "0x", "+", "-", "<<",
		"yes please", "'on'", "'yes'", "\"n\"", "'~'", "'1_000'", "'0x1F'", "\"3\"", "'017'",
		"!!str 3", "!!str on", "!!float 3", "!!int '12'", "!!int abc", "!!bool 1", "!custom on",
		".inf", "-.inf", ".nan", "s3://bucket/x.zip", "numpy==2.1.0", "a: b",
	}
	var inputs []string
	for _, s := range scalars {
		inputs = append(inputs, "v: "+s+"\n")
	}
	inputs = append(inputs,
		"on: a\n12: b\n0x10: c\nn: d\n",
		"a: 1\na: 2\n",
		"yes: a\ntrue: b\n",
		"1: a\n0x1: b\n",
		"~: 1\n",
		"? [a]\n: 1\n",
		"base: &b {x: 1, y: on}\nc:\n  <<: *b\n  y: 'off'\nd:\n  y: 'off'\n  <<: *b\ne: *b\n",
		"a: &a {k: 1}\nb: &b {k: 2, j: 3}\nc: {<<: [*a, *b]}\n",
		"a: 1\n---\nb: 2\n",
		"",
		"# only a comment\n",
		"- a\n- b\n",
		"pip:\n- numpy==2.1.0\nenv_vars:\n  FEATURE_FLAG: 'on'\n",
		"config:\n  setup_timeout_seconds: 600\nenv_vars:\n  FEATURE_FLAG: \"on\"\n  RETRIES: \"3\"\npip:\n- numpy==2.1.0\n",
		"env_vars:\n  A: |\n    on\n  B: >-\n    yes\n    no\n",
		// What rayshare writes: JSON, with strings KubeRay must keep as strings.
		`{"env_vars":{"A":"on","B":"yes","C":"n","D":"off","E":"~","F":"1_000","G":"0x1F","H":"3","I":"","J":"null"},"pip":["numpy==2.1.0"],"config":{"eager_install":true,"setup_timeout_seconds":600,"ratio":0.5,"big":18446744073709551615}}`,
		"{\"s\":\"a\\u2028b\\u0085c\\ufeffd\\u007f\\u0000\\\"\\\\/\\t\"}",
	)
	var out []result
	for _, in := range inputs {
		r := result{YAML: in}
		j, err := yaml.YAMLToJSON([]byte(in))
		if err != nil {
			r.Error = err.Error()
		} else {
			r.JSON = j
		}
		out = append(out, r)
	}
	enc := json.NewEncoder(os.Stdout)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
