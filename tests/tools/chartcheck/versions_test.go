package main

import "testing"

func TestVersionsDisagreeing(t *testing.T) {
	f := versionFiles{"Cargo.toml", "Chart.yaml", "values.yaml", "CHANGELOG.md", "m.yaml", "release.yml", "go.mod"}
	good := map[string]string{
		f.cargo:           "[package]\nname = \"rayshare\"\nversion = \"0.2.0\"\n\n[dependencies]\nx = { version = \"1\" }\n",
		f.chart:           "version: 0.2.0\nappVersion: \"0.2.0\"\nkubeVersion: \">=1.36.0-0\"\n",
		f.values:          "image:\n  repository: ghcr.io/o/r\n  tag: \"\"\n  digest: \"\"\n",
		f.changelog:       "# Changelog\n\n## [0.2.0] - 2026-11-28\n\n## [0.1.0]\n",
		f.manifest:        "          image: \"ghcr.io/o/r:0.2.0\"\n",
		f.workflow:        "env:\n  IMAGE: ghcr.io/o/r\n",
		f.controlPlaneMod: "require (\n\tk8s.io/apiserver v0.36.3\n)\n",
	}
	p := &problems{}
	if v := checkVersions(p, f, good); v != "0.2.0" || len(p.list) > 0 {
		t.Fatalf("agreeing files: %q %v", v, p.list)
	}
	for name, change := range map[string][2]string{
		"chart version":    {f.chart, "version: 0.1.0\nappVersion: \"0.2.0\"\nkubeVersion: \">=1.36.0-0\"\n"},
		"appVersion":       {f.chart, "version: 0.2.0\nappVersion: \"0.1.0\"\nkubeVersion: \">=1.36.0-0\"\n"},
		"untested k8s":     {f.chart, "version: 0.2.0\nappVersion: \"0.2.0\"\nkubeVersion: \">=1.30.0-0\"\n"},
		"no changelog":     {f.changelog, "# Changelog\n\n## [0.1.0]\n"},
		"pinned tag":       {f.values, "image:\n  repository: ghcr.io/o/r\n  tag: \"0.1.0\"\n"},
		"stale manifest":   {f.manifest, "          image: \"ghcr.io/o/r:0.1.0\"\n"},
		"other repository": {f.workflow, "env:\n  IMAGE: ghcr.io/other/r\n"},
	} {
		text := map[string]string{}
		for k, v := range good {
			text[k] = v
		}
		text[change[0]] = change[1]
		p := &problems{}
		checkVersions(p, f, text)
		if len(p.list) != 1 {
			t.Errorf("%s: want one problem, got %v", name, p.list)
		}
	}
}
