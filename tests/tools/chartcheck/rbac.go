// The chart's RBAC: bindings and the rules rayshare needs, no more.

package main

import (
	"reflect"
	"slices"
	"sort"

	rbacv1 "k8s.io/api/rbac/v1"
)

// checkBinding: a binding (`kind`) names the chart's role (`roleKind` `roleName`) and binds
// exactly the release's ServiceAccount.
func checkBinding(p *problems, kind string, ref rbacv1.RoleRef, roleKind, roleName string, subjects []rbacv1.Subject, name, ns string) {
	p.check(ref.Kind == roleKind && ref.Name == roleName, "%s roleRef %+v does not name the %s", kind, ref, roleKind)
	p.check(len(subjects) == 1 && subjects[0].Kind == "ServiceAccount" &&
		subjects[0].Name == name && subjects[0].Namespace == ns,
		"%s subjects %+v, want ServiceAccount %s/%s", kind, subjects, ns, name)
}

func checkRules(p *problems, rules []rbacv1.PolicyRule, rayAuthSecrets bool) {
	want := map[string][]string{
		"ray.io/rayclusters":              {"create", "delete", "get", "list", "patch", "watch"},
		"ray.io/rayjobs":                  {"get", "list", "patch", "watch"},
		"scheduling.volcano.sh/podgroups": {"create", "delete", "get", "list", "patch", "watch"},
		"coordination.k8s.io/leases":      {"create", "delete", "list", "patch"},
		"/pods":                           {"get", "list", "watch"},
		"/namespaces":                     {"get", "list", "watch"},
		"events.k8s.io/events":            {"create", "patch"},
	}
	if rayAuthSecrets {
		want["/secrets"] = []string{"get"}
	}
	got := map[string][]string{}
	for _, rule := range rules {
		p.check(len(rule.ResourceNames) == 0 && len(rule.NonResourceURLs) == 0, "unexpected rule %+v", rule)
		for _, g := range rule.APIGroups {
			for _, res := range rule.Resources {
				got[g+"/"+res] = append(got[g+"/"+res], rule.Verbs...)
			}
		}
	}
	for k := range got {
		sort.Strings(got[k])
		got[k] = slices.Compact(got[k])
	}
	p.check(reflect.DeepEqual(got, want), "ClusterRole rules\n      got  %v\n      want %v", got, want)
}
