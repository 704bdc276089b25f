package main

import (
	"os"
	"reflect"
	"strings"
	"testing"
)

const sampleReadme = "# chart\n\n" +
	"## What it installs\n\n" +
	"Some text.\n\n" +
	"| Object | Name | Notes |\n" +
	"|--------|------|-------|\n" +
	"| ServiceAccount | `<fullname>` | Always. |\n" +
	"| ClusterRole / ClusterRoleBinding | `<fullname>` | Always: `rayclusters.ray.io get/list/watch`; `pods get/list`; " +
	"with `rbac.x`: `secrets get`. A \\| pipe. |\n" +
	"| Role, `RoleBinding` | `<fullname>-leader` | `leases.coordination.k8s.io/rayshare-reconciler get/update` |\n" +
	"| Certificate / Issuer | `<fullname>-tls` | With `certs.mode=certManager`. |\n" +
	"\n" +
	"## Next\n\n" +
	"| Object | Notes |\n|---|---|\n| Deployment | not this table |\n"

func TestInstallsTableParsesKindsAndNotes(t *testing.T) {
	rows, err := installsTable(sampleReadme)
	if err != nil {
		t.Fatal(err)
	}
	var kinds [][]string
	for _, r := range rows {
		kinds = append(kinds, r.kinds)
	}
	want := [][]string{{"ServiceAccount"}, {"ClusterRole", "ClusterRoleBinding"}, {"Role", "RoleBinding"}, {"Certificate", "Issuer"}}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("kinds %v, want %v", kinds, want)
	}
	if !strings.HasSuffix(rows[1].notes, `A \| pipe.`) {
		t.Errorf("an escaped pipe must stay in its cell: %q", rows[1].notes)
	}
	written := rules{}
	mentionedRules(rows[1].notes, written)
	wantRules := rules{"rayclusters.ray.io": {"get", "list", "watch"}, "pods": {"get", "list"}, "secrets": {"get"}}
	if !reflect.DeepEqual(written, wantRules) {
		t.Errorf("rules %v, want %v (`rbac.x` is no rule)", written, wantRules)
	}
}

func TestInstallsTableRefusesWhatIsNotAKind(t *testing.T) {
	readme := strings.Replace(sampleReadme, "| Certificate / Issuer |", "| Secret / cert-manager objects |", 1)
	_, err := installsTable(readme)
	if err == nil || !strings.Contains(err.Error(), `"cert-manager objects" in the Object column is not a kind`) {
		t.Errorf("err = %v", err)
	}
	if _, err := installsTable("# chart\n\n## What it installs\n\ntext\n\n## Values\n\n| Object | Notes |\n"); err == nil {
		t.Error("a table of another section was taken")
	}
}

const sampleRender = `# Source: a comment-only document
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: rayshare}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: rayshare}
rules:
  - apiGroups: ["ray.io"]
    resources: ["rayclusters"]
    verbs: ["get", "list", "watch"]
  - apiGroups: [""]
    resources: ["pods", "secrets"]
    verbs: ["get"]
  - apiGroups: [""]
    resources: ["pods"]
    verbs: ["list"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: rayshare}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: rayshare-leader}
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    resourceNames: ["rayshare-reconciler"]
    verbs: ["update", "get"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata: {name: rayshare-leader}
---
apiVersion: cert-manager.io/v1
kind: Issuer
metadata: {name: rayshare-ca}
---
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: rayshare-tls}
`

func parseSample(t *testing.T, readme, render string) ([]installsRow, map[string]bool, map[string]rules) {
	t.Helper()
	rows, err := installsTable(readme)
	if err != nil {
		t.Fatal(err)
	}
	kinds, rbac := map[string]bool{}, map[string]rules{}
	if err := renderedKinds([]byte(render), kinds, rbac); err != nil {
		t.Fatal(err)
	}
	return rows, kinds, rbac
}

func TestCompareInstallsAgrees(t *testing.T) {
	rows, kinds, rbac := parseSample(t, sampleReadme, sampleRender)
	if msgs := compareInstalls(rows, kinds, rbac, []string{"Certificate", "Role"}); len(msgs) > 0 {
		t.Errorf("unexpected problems:\n%s", strings.Join(msgs, "\n"))
	}
}

func TestCompareInstallsReportsMismatches(t *testing.T) {
	readme := strings.NewReplacer(
		"| Certificate / Issuer |", "| Certificate / PrometheusRule |", // Issuer lost, PrometheusRule never rendered
		"`pods get/list`", "`pods get/list/watch`", // a verb too many
		"`secrets get`", "`namespaces get`", // secrets missing, namespaces not granted
		"rayshare-reconciler get/update", "rayshare-reconciler get/list/watch/update",
	).Replace(sampleReadme)
	rows, kinds, rbac := parseSample(t, readme, sampleRender)
	got := compareInstalls(rows, kinds, rbac, []string{"NetworkPolicy", "Role"})
	want := []string{
		"Issuer is rendered but has no row",
		"the table names PrometheusRule, which no render has",
		"a template declares kind NetworkPolicy, which no render has (turn it on in check-chart.sh's all-features render)",
		"ClusterRole row: Notes say `pods get/list/watch`, the chart grants get/list",
		"ClusterRole row: Notes lack `secrets get`",
		"ClusterRole row: Notes name `namespaces get`, which no rendered ClusterRole grants",
		"Role row: Notes say `leases.coordination.k8s.io/rayshare-reconciler get/list/watch/update`, the chart grants update/get",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("problems\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

// The chart's own README parses, and its RBAC rows state rules.
func TestChartReadmeParses(t *testing.T) {
	text, err := os.ReadFile("../../../charts/rayshare/README.md")
	if err != nil {
		t.Skip(err)
	}
	rows, err := installsTable(string(text))
	if err != nil {
		t.Fatal(err)
	}
	for _, kind := range []string{"ClusterRole", "Role"} {
		written := rules{}
		for _, r := range rows {
			for _, k := range r.kinds {
				if k == kind {
					mentionedRules(r.notes, written)
				}
			}
		}
		if len(written) == 0 {
			t.Errorf("no rules written for %s", kind)
		}
	}
}
