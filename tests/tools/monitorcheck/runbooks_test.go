package main

import (
	"os"
	"regexp"
	"strings"
	"testing"
)

func TestAnchorOfFollowsGitHub(t *testing.T) {
	for text, want := range map[string]string{
		"RayshareDown":                      "raysharedown",
		"Looking at rayshare":               "looking-at-rayshare",
		"What to do: `kubectl` & friends!":  "what-to-do-kubectl--friends",
		"snake_case and kebab-case (v1.2)":  "snake_case-and-kebab-case-v12",
		"Überwachung ünd Ärger":             "überwachung-ünd-ärger",
		"  spaces  around ":                 "--spaces--around-",
		"Rayshare Webhook: Failing/Open 5%": "rayshare-webhook-failingopen-5",
	} {
		if got := anchorOf(text); got != want {
			t.Errorf("anchorOf(%q) = %q, want %q", text, got, want)
		}
	}
}

func TestAnchorsReadsHeadingsOnly(t *testing.T) {
	doc := strings.Join([]string{
		"# Runbooks",
		"Some text with # a hash.",
		"## RayshareDown ##",
		"#NotAHeading",
		"    ## indented code, not a heading",
		"```",
		"## inside a fence",
		"```",
		"~~~~",
		"# also fenced",
		"~~~",
		"still fenced",
		"~~~~",
		"### Twice",
		"### Twice",
	}, "\n")
	got := anchors([]byte(doc))
	want := []string{"runbooks", "raysharedown", "twice", "twice-1"}
	for _, a := range want {
		if !got[a] {
			t.Errorf("no anchor %q in %v", a, got)
		}
	}
	if len(got) != len(want) {
		t.Errorf("anchors = %v, want exactly %v", got, want)
	}
}

func TestCheckRunbooks(t *testing.T) {
	known := map[string]bool{"raysharedown": true}
	base := "https://github.com/rayshare/rayshare/blob/main/docs/runbooks.md"
	for name, tc := range map[string]struct {
		url     string
		problem string
	}{
		"ok":            {base + "#raysharedown", ""},
		"missing":       {"", "no runbook_url"},
		"no anchor":     {base, "names no section"},
		"empty anchor":  {base + "#", "names no section"},
		"wrong anchor":  {base + "#rayshare-down", `no heading with anchor "rayshare-down"`},
		"other file":    {"https://github.com/rayshare/rayshare/blob/main/README.md#raysharedown", "is not an http(s) URL of docs/runbooks.md"},
		"not a URL":     {"docs/runbooks.md#raysharedown", "is not an http(s) URL"},
		"bad scheme":    {"ftp://example.com/docs/runbooks.md#raysharedown", "is not an http(s) URL"},
		"case matters":  {base + "#RayshareDown", "no heading with anchor"},
		"unparseable":   {"https://exa mple.com/%zz#x", "runbook_url"},
		"other host ok": {"https://git.example.com/mirror/rayshare/-/blob/v1/docs/runbooks.md#raysharedown", ""},
	} {
		problems := checkRunbooks(map[string]string{"RayshareDown": tc.url}, known, "runbooks.md")
		switch {
		case tc.problem == "" && len(problems) > 0:
			t.Errorf("%s: unexpected problems %v", name, problems)
		case tc.problem != "" && (len(problems) != 1 || !strings.Contains(problems[0], tc.problem)):
			t.Errorf("%s: problems %v, want one containing %q", name, problems, tc.problem)
		}
	}
}

// Every alert the chart's template can render has a section in the repository's runbooks,
// under the anchor its runbook_url names.
func TestTheChartsAlertsHaveRunbooks(t *testing.T) {
	template, err := os.ReadFile("../../../charts/rayshare/templates/prometheusrule.yaml")
	if err != nil {
		t.Fatal(err)
	}
	path, err := findRunbooks("")
	if err != nil {
		t.Fatal(err)
	}
	markdown, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	known := anchors(markdown)
	alerts := regexp.MustCompile(`- alert: (\w+)`).FindAllStringSubmatch(string(template), -1)
	links := regexp.MustCompile(`runbook_url: \{\{ print \$runbook "([^"]+)" \| quote \}\}`).FindAllStringSubmatch(string(template), -1)
	if len(alerts) == 0 || len(alerts) != len(links) {
		t.Fatalf("%d alerts, %d runbook_url annotations in the template", len(alerts), len(links))
	}
	for i, a := range alerts {
		if anchor := links[i][1]; anchor != anchorOf(a[1]) || !known[anchor] {
			t.Errorf("alert %s links #%s; want #%s, a heading of %s", a[1], anchor, anchorOf(a[1]), path)
		}
	}
}
