// The opt-in uninstall hook (uninstall.drain): a pre-delete Job that drains this
// installation's objects, and nothing else's, with the chart's ServiceAccount.

package main

import (
	"slices"

	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// checkHooks: with want, exactly one pre-delete Job running `rayshare drain --instance
// <the ConfigMap's instance>` as ServiceAccount name, in the Deployment's image, hardened
// like it, its pod out of the webhook and out of the Service; without want, no Job.
func checkHooks(p *problems, r *rendered, want bool, name, ns string, cfg featureConfig) {
	if !want {
		p.check(len(r.jobs) == 0, "uninstall.drain is off but %d Job(s) rendered", len(r.jobs))
		return
	}
	if len(r.jobs) != 1 {
		p.add("uninstall.drain: want exactly one Job, got %d", len(r.jobs))
		return
	}
	j := r.jobs[0]
	p.check(j.Namespace == ns, "drain Job namespace %q, want %q", j.Namespace, ns)
	p.check(j.Annotations["helm.sh/hook"] == "pre-delete", "drain Job is not a pre-delete hook: %v", j.Annotations)
	p.check(j.Annotations["helm.sh/hook-delete-policy"] != "", "drain Job has no hook-delete-policy")
	p.check(j.Spec.BackoffLimit != nil && *j.Spec.BackoffLimit == 0, "drain Job must not retry (a failed drain fails the uninstall)")
	p.check(j.Spec.ActiveDeadlineSeconds != nil, "drain Job needs activeDeadlineSeconds")
	checkDrainPod(p, r, j, name, cfg)
}

func checkDrainPod(p *problems, r *rendered, j batchv1.Job, name string, cfg featureConfig) {
	pod := j.Spec.Template
	p.check(pod.Spec.ServiceAccountName == name, "drain pod runs as %q, want the chart's ServiceAccount %q",
		pod.Spec.ServiceAccountName, name)
	p.check(pod.Labels["app.kubernetes.io/name"] != "", "drain pod lacks app.kubernetes.io/name (the webhook's objectSelector)")
	for _, svc := range r.services {
		sel := labels.SelectorFromSet(svc.Spec.Selector)
		p.check(!sel.Matches(labels.Set(pod.Labels)), "Service %s selects the drain pod", svc.Name)
	}
	if len(pod.Spec.Containers) != 1 {
		p.add("drain pod: want one container, got %d", len(pod.Spec.Containers))
		return
	}
	c := pod.Spec.Containers[0]
	p.check(cfg.Instance != "", "the ConfigMap names no instance")
	want := []string{"/usr/local/bin/rayshare", "drain", "--instance", cfg.Instance}
	p.check(len(c.Command) >= len(want) && slices.Equal(c.Command[:len(want)], want) && len(c.Args) == 0,
		"drain command %q, want %q ...", c.Command, want)
	p.check(slices.Contains(c.Command, "--wait-seconds"), "drain command %q has no --wait-seconds", c.Command)
	sc := c.SecurityContext
	p.check(sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
		sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation, "drain container securityContext incomplete")
	if len(r.deployments) == 1 && len(r.deployments[0].Spec.Template.Spec.Containers) == 1 {
		image := r.deployments[0].Spec.Template.Spec.Containers[0].Image
		p.check(c.Image == image, "drain image %q, the Deployment runs %q", c.Image, image)
	}
}
