// The webhook configuration: its fields, its CEL matchConditions, its serving certificate.

package main

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"reflect"
	"slices"

	"github.com/google/cel-go/cel"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func checkWebhook(p *problems, wh admissionv1.MutatingWebhook, name, ns string, httpsPort int32,
	podLabels map[string]string, cfg featureConfig) {
	p.check(wh.Name == webhookName, "webhook entry is %q, want %q", wh.Name, webhookName)
	svc := wh.ClientConfig.Service
	p.check(svc != nil && svc.Name == name && svc.Namespace == ns && svc.Path != nil && *svc.Path == "/mutate" &&
		svc.Port != nil && *svc.Port == httpsPort, "webhook clientConfig.service %+v does not point at %s/%s:%d/mutate",
		svc, ns, name, httpsPort)
	p.check(slices.Equal(wh.AdmissionReviewVersions, []string{"v1"}), "admissionReviewVersions must be [v1]")
	p.check(wh.SideEffects != nil && *wh.SideEffects == admissionv1.SideEffectClassNoneOnDryRun, "sideEffects must be NoneOnDryRun")
	p.check(wh.MatchPolicy != nil && *wh.MatchPolicy == admissionv1.Equivalent, "matchPolicy must be Equivalent")
	p.check(wh.TimeoutSeconds != nil && *wh.TimeoutSeconds >= 1 && *wh.TimeoutSeconds <= 30, "timeoutSeconds must be 1..30")
	p.check(wh.FailurePolicy != nil, "failurePolicy must be set")
	p.check(wh.ReinvocationPolicy != nil, "reinvocationPolicy must be set")

	type rule struct{ group, version, resource string }
	var rules []rule
	for _, r := range wh.Rules {
		p.check(slices.Equal(r.Operations, []admissionv1.OperationType{admissionv1.Create}), "rule %v: only CREATE", r.Resources)
		for _, g := range r.APIGroups {
			for _, v := range r.APIVersions {
				for _, res := range r.Resources {
					rules = append(rules, rule{g, v, res})
				}
			}
		}
	}
	var wantRules []rule
	if cfg.SharedClusters.Enabled {
		wantRules = append(wantRules, rule{"ray.io", "v1", "rayjobs"})
	}
	if cfg.PodGroups.Enabled || cfg.Indices.Enabled {
		wantRules = append(wantRules, rule{"", "v1", "pods"})
	}
	p.check(reflect.DeepEqual(rules, wantRules), "webhook rules %v, want %v", rules, wantRules)

	// Namespaces: only labelled ones, never the release namespace or kube-system.
	nsSel, err := metav1.LabelSelectorAsSelector(wh.NamespaceSelector)
	if err != nil {
		p.add("namespaceSelector: %v", err)
	} else {
		var enableKey, enableValue string
		for _, e := range wh.NamespaceSelector.MatchExpressions {
			if e.Operator == metav1.LabelSelectorOpIn && len(e.Values) == 1 {
				enableKey, enableValue = e.Key, e.Values[0]
			}
		}
		nsLabels := func(n string, enabled bool) labels.Set {
			s := labels.Set{"kubernetes.io/metadata.name": n}
			if enabled {
				s[enableKey] = enableValue
			}
			return s
		}
		p.check(enableKey != "", "namespaceSelector has no enable label")
		p.check(nsSel.Matches(nsLabels("team-a", true)), "namespaceSelector must match an enabled namespace")
		p.check(!nsSel.Matches(nsLabels("team-a", false)), "namespaceSelector must not match an unlabelled namespace")
		p.check(!nsSel.Matches(nsLabels(ns, true)), "namespaceSelector must exclude the release namespace")
		p.check(!nsSel.Matches(nsLabels("kube-system", true)), "namespaceSelector must exclude kube-system")
	}
	objSel, err := metav1.LabelSelectorAsSelector(wh.ObjectSelector)
	p.check(err == nil && wh.ObjectSelector != nil && !objSel.Matches(labels.Set(podLabels)),
		"objectSelector must exclude rayshare's own pods (%v)", podLabels)
	p.check(err == nil && objSel.Matches(labels.Set{"ray.io/node-type": "worker"}) && objSel.Matches(labels.Set{}),
		"objectSelector must match ordinary objects")

	sent := map[string]bool{}
	for _, r := range rules {
		sent[r.resource] = true
	}
	checkMatchConditions(p, wh.MatchConditions, cfg, sent)
}

type featureConfig struct {
	Instance         string `json:"instance"`
	OptOutAnnotation string `json:"optOutAnnotation"`
	SharedClusters   struct {
		Enabled bool `json:"enabled"`
	} `json:"sharedClusters"`
	PodGroups struct {
		Enabled        bool     `json:"enabled"`
		SchedulerNames []string `json:"schedulerNames"`
	} `json:"podGroups"`
	Indices struct {
		Enabled bool `json:"enabled"`
	} `json:"indices"`
}

// checkMatchConditions evaluates the CEL expressions the way the API server does for a
// CREATE: `object` is the new object, `oldObject` null, `request` the AdmissionRequest.
// Resources without a rule are never sent, whatever the conditions say.
func checkMatchConditions(p *problems, conds []admissionv1.MatchCondition, cfg featureConfig, sent map[string]bool) {
	env, err := cel.NewEnv(
		cel.Variable("object", cel.DynType),
		cel.Variable("oldObject", cel.DynType),
		cel.Variable("request", cel.DynType),
	)
	if err != nil {
		p.add("cel env: %v", err)
		return
	}
	var programs []cel.Program
	for _, c := range conds {
		ast, iss := env.Compile(c.Expression)
		if iss.Err() != nil {
			p.add("matchCondition %s does not compile: %v", c.Name, iss.Err())
			continue
		}
		if ast.OutputType() != cel.BoolType && ast.OutputType() != cel.DynType {
			p.add("matchCondition %s is not boolean", c.Name)
		}
		prg, err := env.Program(ast)
		if err != nil {
			p.add("matchCondition %s: %v", c.Name, err)
			continue
		}
		programs = append(programs, prg)
	}
	if len(programs) != len(conds) {
		return
	}
	calls := func(resource string, object map[string]any) (bool, error) {
		if !sent[resource] {
			return false, nil
		}
		vars := map[string]any{
			"object":    object,
			"oldObject": nil,
			"request": map[string]any{
				"operation": "CREATE",
				"resource":  map[string]any{"group": map[string]string{"pods": "", "rayjobs": "ray.io"}[resource], "version": "v1", "resource": resource},
				"namespace": "team-a",
				"name":      "",
			},
		}
		for i, prg := range programs {
			out, _, err := prg.Eval(vars)
			if err != nil {
				return false, fmt.Errorf("matchCondition %s: %v", conds[i].Name, err)
			}
			b, ok := out.Value().(bool)
			if !ok {
				return false, fmt.Errorf("matchCondition %s returned %v", conds[i].Name, out)
			}
			if !b {
				return false, nil
			}
		}
		return true, nil
	}
	meta := func(labels, annotations map[string]any) map[string]any {
		m := map[string]any{"generateName": "x-", "namespace": "team-a"}
		if labels != nil {
			m["labels"] = labels
		}
		if annotations != nil {
			m["annotations"] = annotations
		}
		return m
	}
	optOut := map[string]any{cfg.OptOutAnnotation: "true"}
	optOutFalse := map[string]any{cfg.OptOutAnnotation: "false"}
	scheduler := "volcano"
	if len(cfg.PodGroups.SchedulerNames) > 0 {
		scheduler = cfg.PodGroups.SchedulerNames[len(cfg.PodGroups.SchedulerNames)-1]
	}
	pod := func(schedulerName string, labels, annotations map[string]any) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta(labels, annotations),
			"spec": map[string]any{"schedulerName": schedulerName, "containers": []any{map[string]any{"name": "c"}}}}
	}
	rayjob := func(spec map[string]any, annotations map[string]any) map[string]any {
		o := map[string]any{"apiVersion": "ray.io/v1", "kind": "RayJob", "metadata": meta(nil, annotations)}
		if spec != nil {
			o["spec"] = spec
		}
		return o
	}
	sc, pg, ix := cfg.SharedClusters.Enabled, cfg.PodGroups.Enabled, cfg.Indices.Enabled
	cases := []struct {
		name     string
		resource string
		object   map[string]any
		want     bool
	}{
		{"RayJob with rayClusterSpec", "rayjobs", rayjob(map[string]any{"entrypoint": "python x.py", "rayClusterSpec": map[string]any{}}, nil), sc},
		{"RayJob with rayClusterSpec, opt-out false", "rayjobs", rayjob(map[string]any{"rayClusterSpec": map[string]any{}}, optOutFalse), sc},
		{"RayJob with rayClusterSpec, opted out", "rayjobs", rayjob(map[string]any{"rayClusterSpec": map[string]any{}}, optOut), false},
		{"RayJob with clusterSelector only", "rayjobs", rayjob(map[string]any{"clusterSelector": map[string]any{"ray.io/cluster": "c"}}, nil), false},
		{"RayJob without spec", "rayjobs", rayjob(nil, nil), false},
		{"pod for " + scheduler, "pods", pod(scheduler, nil, nil), pg},
		{"pod for " + scheduler + ", opted out", "pods", pod(scheduler, nil, optOut), false},
		{"plain pod", "pods", pod("default-scheduler", nil, nil), false},
		{"plain pod with other labels", "pods", pod("default-scheduler", map[string]any{"app": "x"}, map[string]any{"a": "b"}), false},
		{"Ray worker pod", "pods", pod("default-scheduler", map[string]any{"ray.io/node-type": "worker"}, nil), ix},
		{"Ray head pod", "pods", pod("default-scheduler", map[string]any{"ray.io/node-type": "head"}, nil), false},
		{"Ray worker pod for " + scheduler, "pods", pod(scheduler, map[string]any{"ray.io/node-type": "worker"}, nil), pg || ix},
	}
	for _, c := range cases {
		got, err := calls(c.resource, c.object)
		if err != nil {
			p.add("%s: %v", c.name, err)
			continue
		}
		p.check(got == c.want, "matchConditions for %s: API server would call rayshare=%v, want %v", c.name, got, c.want)
	}
}

func checkServingCert(p *problems, certPEM, keyPEM, caPEM []byte, name, ns string) {
	if _, err := tls.X509KeyPair(certPEM, keyPEM); err != nil {
		p.add("selfSigned: tls.crt/tls.key: %v", err)
		return
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		p.add("selfSigned: ca.crt holds no certificate")
		return
	}
	block, _ := pem.Decode(certPEM)
	if block == nil {
		p.add("selfSigned: tls.crt is not PEM")
		return
	}
	cert, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		p.add("selfSigned: tls.crt: %v", err)
		return
	}
	for _, host := range []string{name + "." + ns + ".svc", name + "." + ns + ".svc.cluster.local"} {
		_, err := cert.Verify(x509.VerifyOptions{DNSName: host, Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
		p.check(err == nil, "selfSigned: serving certificate not valid for %s: %v", host, err)
	}
}
