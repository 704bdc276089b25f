// The Deployment: hardened, and wired to the Service, certificates and config.

package main

import (
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

func checkDeployment(p *problems, d appsv1.Deployment, name, ns string, r *rendered) (string, map[string]string) {
	tmpl := d.Spec.Template
	podLabels := tmpl.Labels
	p.check(d.Namespace == ns, "Deployment namespace %q", d.Namespace)
	sel, err := metav1.LabelSelectorAsSelector(d.Spec.Selector)
	p.check(err == nil && sel.Matches(labels.Set(podLabels)), "Deployment selector does not match its pods")
	p.check(tmpl.Spec.ServiceAccountName == name, "pods run as ServiceAccount %q, want %q", tmpl.Spec.ServiceAccountName, name)
	p.check(tmpl.Annotations["checksum/config"] != "", "pods lack the checksum/config annotation")
	psc := tmpl.Spec.SecurityContext
	p.check(psc != nil && psc.RunAsNonRoot != nil && *psc.RunAsNonRoot && psc.SeccompProfile != nil &&
		psc.SeccompProfile.Type == corev1.SeccompProfileTypeRuntimeDefault, "pod securityContext incomplete")
	p.check(len(tmpl.Spec.Containers) == 1, "want one container")
	if len(tmpl.Spec.Containers) != 1 {
		return "", podLabels
	}
	c := tmpl.Spec.Containers[0]
	sc := c.SecurityContext
	p.check(sc != nil && sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem &&
		sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation &&
		sc.RunAsUser != nil && *sc.RunAsUser == 65532 &&
		sc.Capabilities != nil && slices.Contains(sc.Capabilities.Drop, corev1.Capability("ALL")),
		"container securityContext incomplete")
	p.check(c.Resources.Requests.Cpu() != nil && !c.Resources.Requests.Memory().IsZero() && !c.Resources.Limits.Memory().IsZero(),
		"container resources incomplete")
	ports := map[string]int32{}
	for _, port := range c.Ports {
		ports[port.Name] = port.ContainerPort
	}
	env := map[string]corev1.EnvVar{}
	for _, e := range c.Env {
		env[e.Name] = e
	}
	p.check(env["RAYSHARE_LISTEN"].Value == fmt.Sprintf("0.0.0.0:%d", ports["https"]), "RAYSHARE_LISTEN does not match port https")
	p.check(env["RAYSHARE_ADMIN_LISTEN"].Value == fmt.Sprintf("0.0.0.0:%d", ports["admin"]), "RAYSHARE_ADMIN_LISTEN does not match port admin")
	for _, n := range []string{"POD_NAME", "POD_NAMESPACE"} {
		p.check(env[n].ValueFrom != nil && env[n].ValueFrom.FieldRef != nil, "%s must come from the downward API", n)
	}
	p.check(c.LivenessProbe != nil && c.LivenessProbe.HTTPGet != nil && c.LivenessProbe.HTTPGet.Path == "/livez" &&
		c.LivenessProbe.HTTPGet.Port.String() == "admin", "liveness probe must be GET /livez on admin")
	p.check(c.ReadinessProbe != nil && c.ReadinessProbe.HTTPGet != nil && c.ReadinessProbe.HTTPGet.Path == "/readyz" &&
		c.ReadinessProbe.HTTPGet.Port.String() == "admin", "readiness probe must be GET /readyz on admin")

	mounts := map[string]string{}
	for _, m := range c.VolumeMounts {
		p.check(m.SubPath == "", "mount %s uses subPath (updates would not arrive)", m.Name)
		mounts[m.MountPath] = m.Name
	}
	vols := map[string]corev1.Volume{}
	for _, v := range tmpl.Spec.Volumes {
		vols[v.Name] = v
	}
	tlsVol, cfgVol := vols[mounts["/etc/rayshare/tls"]], vols[mounts["/etc/rayshare/config"]]
	p.check(env["RAYSHARE_TLS_CERT"].Value == "/etc/rayshare/tls/tls.crt" && env["RAYSHARE_TLS_KEY"].Value == "/etc/rayshare/tls/tls.key",
		"TLS env does not point into /etc/rayshare/tls")
	p.check(env["RAYSHARE_CONFIG"].Value == "/etc/rayshare/config/config.yaml", "RAYSHARE_CONFIG does not point at the ConfigMap")
	var tlsSecret string
	if tlsVol.Secret != nil {
		tlsSecret = tlsVol.Secret.SecretName
	} else {
		p.add("/etc/rayshare/tls is not a Secret volume")
	}
	p.check(cfgVol.ConfigMap != nil && len(r.configMaps) == 1 && cfgVol.ConfigMap.Name == r.configMaps[0].Name,
		"/etc/rayshare/config is not the chart's ConfigMap")
	return tlsSecret, podLabels
}
