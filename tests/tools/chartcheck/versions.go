// One version for the crate, the chart, the image and the CLI; the chart's kubeVersion no
// lower than the Kubernetes the tests run.

package main

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strings"

	"sigs.k8s.io/yaml"
)

// versionFiles: what `chartcheck versions` reads, in its argument order.
type versionFiles struct {
	cargo, chart, values, changelog, manifest, workflow, controlPlaneMod string
}

func versionsCmd(args []string) error {
	if len(args) != 7 {
		return errors.New("versions: CARGO_TOML CHART_YAML VALUES CHANGELOG MANIFEST WORKFLOW CONTROLPLANE_GO_MOD")
	}
	f := versionFiles{args[0], args[1], args[2], args[3], args[4], args[5], args[6]}
	text := map[string]string{}
	for _, path := range []string{f.cargo, f.chart, f.values, f.changelog, f.manifest, f.workflow, f.controlPlaneMod} {
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		text[path] = string(data)
	}
	p := &problems{}
	version := checkVersions(p, f, text)
	if len(p.list) > 0 {
		return fmt.Errorf("versions:\n  - %s", strings.Join(p.list, "\n  - "))
	}
	fmt.Fprintf(os.Stderr, "chartcheck: version %s in Cargo.toml, Chart.yaml (version, appVersion), the image, CHANGELOG.md and the release workflow\n", version)
	return nil
}

var (
	cargoVersion    = regexp.MustCompile(`(?m)^\[package\][^\[]*?^version = "([^"]+)"`)
	changelogHeader = regexp.MustCompile(`(?m)^## \[?v?([0-9][^\] ]*)\]?`)
	workflowImage   = regexp.MustCompile(`(?m)^\s*IMAGE: (\S+)\s*$`)
	apiserverMinor  = regexp.MustCompile(`(?m)^\s*k8s\.io/apiserver v0\.([0-9]+)\.`)
	kubeVersionMin  = regexp.MustCompile(`^>=\s*1\.([0-9]+)\.0-0$`)
)

func checkVersions(p *problems, f versionFiles, text map[string]string) string {
	m := cargoVersion.FindStringSubmatch(text[f.cargo])
	if m == nil {
		p.add("%s: no [package] version", f.cargo)
		return ""
	}
	version := m[1]
	var chart struct {
		Version     string `json:"version"`
		AppVersion  string `json:"appVersion"`
		KubeVersion string `json:"kubeVersion"`
	}
	if err := yaml.Unmarshal([]byte(text[f.chart]), &chart); err != nil {
		p.add("%s: %v", f.chart, err)
	}
	p.check(chart.Version == version, "%s version %q, Cargo.toml says %q", f.chart, chart.Version, version)
	p.check(chart.AppVersion == version, "%s appVersion %q, Cargo.toml says %q", f.chart, chart.AppVersion, version)

	// The newest CHANGELOG entry is this version's.
	heads := changelogHeader.FindAllStringSubmatch(text[f.changelog], -1)
	p.check(len(heads) > 0 && heads[0][1] == version, "%s: the first version heading must be %q", f.changelog, version)

	// The image: values name the repository the workflow pushes to; the tag defaults to
	// appVersion, and the plain manifests name exactly that.
	var values struct {
		Image struct {
			Repository string `json:"repository"`
			Tag        string `json:"tag"`
			Digest     string `json:"digest"`
		} `json:"image"`
	}
	if err := yaml.Unmarshal([]byte(text[f.values]), &values); err != nil {
		p.add("%s: %v", f.values, err)
	}
	repo := values.Image.Repository
	p.check(values.Image.Tag == "" && values.Image.Digest == "", "%s: image.tag and image.digest must be empty (the tag is appVersion)", f.values)
	want := fmt.Sprintf(`image: "%s:%s"`, repo, version)
	p.check(strings.Contains(text[f.manifest], want), "%s does not name %s", f.manifest, want)
	w := workflowImage.FindStringSubmatch(text[f.workflow])
	p.check(w != nil && w[1] == repo, "%s pushes IMAGE %v, the chart pulls %s", f.workflow, w, repo)

	// kubeVersion's lower bound is the Kubernetes the control plane of the tests runs.
	tested := apiserverMinor.FindStringSubmatch(text[f.controlPlaneMod])
	claimed := kubeVersionMin.FindStringSubmatch(chart.KubeVersion)
	p.check(tested != nil && claimed != nil && tested[1] == claimed[1],
		"%s kubeVersion %q: want \">=1.%v.0-0\", the tested Kubernetes (%s)", f.chart, chart.KubeVersion, tested, f.controlPlaneMod)
	return version
}
