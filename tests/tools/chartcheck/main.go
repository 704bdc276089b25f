// chartcheck checks what the rayshare Helm chart renders, beyond `helm lint`:
//
//	chartcheck manifests -release R -namespace NS -mode MODE [-ca-bundle B64] [-ray-auth-secrets] FILE
//	    Strictly decodes every rendered object into its Kubernetes type (unknown or
//	    misspelled fields fail), checks that the objects fit together (ServiceAccount,
//	    RBAC, Service, Deployment, webhook, certificates) and evaluates the webhook's CEL
//	    matchConditions against sample RayJobs and pods. -ray-auth-secrets: rendered with
//	    rbac.rayAuthSecrets (the ClusterRole also gets Secrets).
//	chartcheck config-fields CONFIG_RS VALUES SCHEMA
//	    Checks that `config` in values.yaml and in values.schema.json has exactly the fields
//	    of rayshare's Config struct in src/config/mod.rs (rayshare rejects unknown fields, so a
//	    renamed field would crash-loop the pods).
//	chartcheck readme [-write] VALUES README
//	    Checks (or, with -write, rewrites) the values table in README between the markers
//	    `<!-- values-table:start -->` and `<!-- values-table:end -->`, generated from the
//	    `# --` comments in values.yaml.
//	chartcheck installs [-templates DIR] README RENDER...
//	    Checks the README's "What it installs" table against the renders: every rendered
//	    kind has a row and every kind in the Object column is rendered (and every top-level
//	    `kind:` of the templates in DIR is rendered); the Notes of the rows naming ClusterRole
//	    and Role state each rendered rule as `resource[.group][/name] verb/verb/...` with
//	    exactly its verbs, and no other rule (installs.go).
package main

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/google/cel-go/cel"
	yamlv3 "go.yaml.in/yaml/v3"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

const webhookName = "rayshare.rayshare.io"

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: chartcheck manifests|readme|config-fields|installs ...")
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "manifests":
		err = manifestsCmd(os.Args[2:])
	case "readme":
		err = readmeCmd(os.Args[2:])
	case "config-fields":
		err = configFieldsCmd(os.Args[2:])
	case "installs":
		err = installsCmd(os.Args[2:])
	default:
		err = fmt.Errorf("unknown command %q", os.Args[1])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "chartcheck:", err)
		os.Exit(1)
	}
}

// ---------------------------------------------------------------------------------------
// manifests

type rendered struct {
	serviceAccounts []corev1.ServiceAccount
	clusterRoles    []rbacv1.ClusterRole
	bindings        []rbacv1.ClusterRoleBinding
	roles           []rbacv1.Role
	roleBindings    []rbacv1.RoleBinding
	configMaps      []corev1.ConfigMap
	secrets         []corev1.Secret
	services        []corev1.Service
	deployments     []appsv1.Deployment
	pdbs            []policyv1.PodDisruptionBudget
	netpols         []networkingv1.NetworkPolicy
	webhooks        []admissionv1.MutatingWebhookConfiguration
	namespaces      []corev1.Namespace
	other           []map[string]any // cert-manager and Prometheus Operator objects
}

type problems struct{ list []string }

func (p *problems) add(format string, args ...any) {
	p.list = append(p.list, fmt.Sprintf(format, args...))
}

func (p *problems) check(ok bool, format string, args ...any) {
	if !ok {
		p.add(format, args...)
	}
}

func manifestsCmd(args []string) error {
	fs := flag.NewFlagSet("manifests", flag.ExitOnError)
	release := fs.String("release", "rayshare", "release name")
	namespace := fs.String("namespace", "rayshare-system", "release namespace")
	mode := fs.String("mode", "selfSigned", "certs.mode the file was rendered with")
	caBundle := fs.String("ca-bundle", "", "provided mode: expected webhook caBundle (base64)")
	rayAuthSecrets := fs.Bool("ray-auth-secrets", false, "rendered with rbac.rayAuthSecrets: the ClusterRole may get Secrets")
	fs.Parse(args)
	if fs.NArg() != 1 {
		return errors.New("manifests: need exactly one file")
	}
	data, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	r, err := decodeAll(data)
	if err != nil {
		return err
	}
	p := &problems{}
	checkObjects(p, r, *release, *namespace, *mode, *caBundle, *rayAuthSecrets)
	if len(p.list) > 0 {
		return fmt.Errorf("%s (mode %s):\n  - %s", fs.Arg(0), *mode, strings.Join(p.list, "\n  - "))
	}
	fmt.Fprintf(os.Stderr, "chartcheck: %s (mode %s): %d objects OK\n", fs.Arg(0), *mode, r.count())
	return nil
}

func (r *rendered) count() int {
	return len(r.serviceAccounts) + len(r.clusterRoles) + len(r.bindings) + len(r.configMaps) +
		len(r.secrets) + len(r.services) + len(r.deployments) + len(r.pdbs) + len(r.webhooks) +
		len(r.namespaces) + len(r.netpols) + len(r.other)
}

func decodeAll(data []byte) (*rendered, error) {
	r := &rendered{}
	reader := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		doc, err := reader.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		var meta metav1.TypeMeta
		if err := yaml.Unmarshal(doc, &meta); err != nil {
			return nil, fmt.Errorf("document %d: %w", i, err)
		}
		if meta.Kind == "" {
			continue // comments only
		}
		key := meta.APIVersion + "/" + meta.Kind
		if key == "v1/ConfigMap" && strings.HasSuffix(metaName(doc), "-dashboard") {
			key = "dashboard" // checked by tests/tools/monitorcheck
		}
		var target any
		switch key {
		case "v1/ServiceAccount":
			r.serviceAccounts = append(r.serviceAccounts, corev1.ServiceAccount{})
			target = &r.serviceAccounts[len(r.serviceAccounts)-1]
		case "rbac.authorization.k8s.io/v1/ClusterRole":
			r.clusterRoles = append(r.clusterRoles, rbacv1.ClusterRole{})
			target = &r.clusterRoles[len(r.clusterRoles)-1]
		case "rbac.authorization.k8s.io/v1/ClusterRoleBinding":
			r.bindings = append(r.bindings, rbacv1.ClusterRoleBinding{})
			target = &r.bindings[len(r.bindings)-1]
		case "rbac.authorization.k8s.io/v1/Role":
			r.roles = append(r.roles, rbacv1.Role{})
			target = &r.roles[len(r.roles)-1]
		case "rbac.authorization.k8s.io/v1/RoleBinding":
			r.roleBindings = append(r.roleBindings, rbacv1.RoleBinding{})
			target = &r.roleBindings[len(r.roleBindings)-1]
		case "v1/ConfigMap":
			r.configMaps = append(r.configMaps, corev1.ConfigMap{})
			target = &r.configMaps[len(r.configMaps)-1]
		case "v1/Secret":
			r.secrets = append(r.secrets, corev1.Secret{})
			target = &r.secrets[len(r.secrets)-1]
		case "v1/Service":
			r.services = append(r.services, corev1.Service{})
			target = &r.services[len(r.services)-1]
		case "v1/Namespace":
			r.namespaces = append(r.namespaces, corev1.Namespace{})
			target = &r.namespaces[len(r.namespaces)-1]
		case "apps/v1/Deployment":
			r.deployments = append(r.deployments, appsv1.Deployment{})
			target = &r.deployments[len(r.deployments)-1]
		case "policy/v1/PodDisruptionBudget":
			r.pdbs = append(r.pdbs, policyv1.PodDisruptionBudget{})
			target = &r.pdbs[len(r.pdbs)-1]
		case "networking.k8s.io/v1/NetworkPolicy":
			r.netpols = append(r.netpols, networkingv1.NetworkPolicy{})
			target = &r.netpols[len(r.netpols)-1]
		case "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration":
			r.webhooks = append(r.webhooks, admissionv1.MutatingWebhookConfiguration{})
			target = &r.webhooks[len(r.webhooks)-1]
		case "cert-manager.io/v1/Issuer", "cert-manager.io/v1/Certificate",
			"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicy",
			"admissionregistration.k8s.io/v1/ValidatingAdmissionPolicyBinding",
			"monitoring.coreos.com/v1/ServiceMonitor", "monitoring.coreos.com/v1/PrometheusRule", "dashboard":
			var m map[string]any
			if err := yaml.Unmarshal(doc, &m); err != nil {
				return nil, fmt.Errorf("document %d (%s): %w", i, key, err)
			}
			r.other = append(r.other, m)
			continue
		default:
			return nil, fmt.Errorf("document %d: unexpected object %s", i, key)
		}
		// Strict: unknown fields and duplicate keys are errors.
		if err := yaml.UnmarshalStrict(doc, target); err != nil {
			return nil, fmt.Errorf("document %d (%s): %w", i, key, err)
		}
	}
	return r, nil
}

// meta_name is the metadata.name of a YAML document ("" when it has none). The Grafana
// dashboard ConfigMap is checked by tests/tools/monitorcheck, not here.
func metaName(doc []byte) string {
	var m struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
	}
	_ = yaml.Unmarshal(doc, &m)
	return m.Metadata.Name
}

func fullname(release string) string {
	if strings.Contains(release, "rayshare") {
		return release
	}
	return release + "-rayshare"
}

func checkObjects(p *problems, r *rendered, release, ns, mode, wantCABundle string, rayAuthSecrets bool) {
	name := fullname(release)
	one := func(kind string, n int) bool {
		p.check(n == 1, "want exactly one %s, got %d", kind, n)
		return n == 1
	}
	for _, o := range r.other {
		if md, _ := o["metadata"].(map[string]any); md != nil {
			if v, ok := md["namespace"]; ok {
				p.check(v == ns, "%v %v: namespace %v, want %s", o["kind"], md["name"], v, ns)
			}
		}
	}

	// ServiceAccount and RBAC.
	if one("ServiceAccount", len(r.serviceAccounts)) {
		sa := r.serviceAccounts[0]
		p.check(sa.Name == name && sa.Namespace == ns,
			"ServiceAccount is %s/%s, want %s/%s (the e2e harness runs as system:serviceaccount:%s:%s)",
			sa.Namespace, sa.Name, ns, name, ns, name)
	}
	if one("ClusterRole", len(r.clusterRoles)) {
		checkRules(p, r.clusterRoles[0].Rules, rayAuthSecrets)
	}
	if one("ClusterRoleBinding", len(r.bindings)) && len(r.clusterRoles) == 1 {
		b := r.bindings[0]
		checkBinding(p, "ClusterRoleBinding", b.RoleRef, "ClusterRole", r.clusterRoles[0].Name, b.Subjects, name, ns)
	}

	// The leader Lease: get, watch and update of that one name, in the release namespace.
	if one("Role", len(r.roles)) {
		role := r.roles[0]
		want := []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			ResourceNames: []string{"rayshare-reconciler"}, Verbs: []string{"get", "list", "watch", "update"}}}
		p.check(role.Namespace == ns && reflect.DeepEqual(role.Rules, want),
			"Role %s/%s rules %+v, want %+v", role.Namespace, role.Name, role.Rules, want)
	}
	if one("RoleBinding", len(r.roleBindings)) && len(r.roles) == 1 {
		b := r.roleBindings[0]
		checkBinding(p, "RoleBinding", b.RoleRef, "Role", r.roles[0].Name, b.Subjects, name, ns)
	}

	// Feature config.
	var cfg featureConfig
	if one("ConfigMap", len(r.configMaps)) {
		text, ok := r.configMaps[0].Data["config.yaml"]
		p.check(ok, "ConfigMap has no config.yaml")
		if err := yaml.Unmarshal([]byte(text), &cfg); err != nil {
			p.add("ConfigMap config.yaml: %v", err)
		}
	}

	// Service.
	var httpsPort int32
	var svcPorts = map[string]corev1.ServicePort{}
	if one("Service", len(r.services)) {
		svc := r.services[0]
		p.check(svc.Name == name && svc.Namespace == ns, "Service is %s/%s, want %s/%s", svc.Namespace, svc.Name, ns, name)
		for _, port := range svc.Spec.Ports {
			svcPorts[port.Name] = port
		}
		https, ok := svcPorts["https"]
		p.check(ok && https.TargetPort.String() == "https", "Service needs port `https` targeting container port `https`")
		httpsPort = https.Port
		_, ok = svcPorts["admin"]
		p.check(ok, "Service needs port `admin`")
	}

	// Deployment.
	var tlsSecret string
	var podLabels map[string]string
	if one("Deployment", len(r.deployments)) {
		d := r.deployments[0]
		tlsSecret, podLabels = checkDeployment(p, d, name, ns, r)
		if len(r.services) == 1 {
			sel := labels.SelectorFromSet(r.services[0].Spec.Selector)
			p.check(len(r.services[0].Spec.Selector) > 0 && sel.Matches(labels.Set(podLabels)),
				"Service selector %v does not select the pods (%v)", r.services[0].Spec.Selector, podLabels)
		}
		for _, np := range r.netpols {
			sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
			p.check(err == nil && sel.Matches(labels.Set(podLabels)), "NetworkPolicy does not select the pods")
			ports := map[int32]bool{}
			for _, rule := range np.Spec.Ingress {
				for _, port := range rule.Ports {
					ports[port.Port.IntVal] = true
				}
			}
			for _, c := range d.Spec.Template.Spec.Containers {
				for _, cp := range c.Ports {
					p.check(ports[cp.ContainerPort], "NetworkPolicy does not admit container port %d", cp.ContainerPort)
				}
			}
		}
		if d.Spec.Replicas != nil && *d.Spec.Replicas > 1 {
			if one("PodDisruptionBudget", len(r.pdbs)) {
				pdb := r.pdbs[0]
				sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
				p.check(err == nil && sel.Matches(labels.Set(podLabels)), "PodDisruptionBudget does not select the pods")
				p.check(pdb.Spec.MinAvailable != nil && pdb.Spec.MinAvailable.IntValue() >= 1,
					"PodDisruptionBudget minAvailable should be >= 1")
			}
		}
	}

	// Webhook.
	if !one("MutatingWebhookConfiguration", len(r.webhooks)) {
		return
	}
	mwc := r.webhooks[0]
	p.check(mwc.Name == name, "MutatingWebhookConfiguration is %q, want %q", mwc.Name, name)
	if !(len(mwc.Webhooks) == 1) {
		p.add("want ONE webhook entry, got %d", len(mwc.Webhooks))
		return
	}
	wh := mwc.Webhooks[0]
	checkWebhook(p, wh, name, ns, httpsPort, podLabels, cfg)

	// Certificates.
	caBundle := wh.ClientConfig.CABundle
	injectFrom := mwc.Annotations["cert-manager.io/inject-ca-from"]
	switch mode {
	case "selfSigned":
		p.check(injectFrom == "", "selfSigned: unexpected cert-manager.io/inject-ca-from")
		var secret *corev1.Secret
		for i := range r.secrets {
			if r.secrets[i].Name == tlsSecret {
				secret = &r.secrets[i]
			}
		}
		if secret == nil {
			p.add("selfSigned: no Secret %q (mounted by the Deployment)", tlsSecret)
			return
		}
		p.check(secret.Type == corev1.SecretTypeTLS, "selfSigned: Secret type %q, want kubernetes.io/tls", secret.Type)
		p.check(bytes.Equal(secret.Data["ca.crt"], caBundle), "selfSigned: webhook caBundle differs from the Secret's ca.crt")
		checkServingCert(p, secret.Data["tls.crt"], secret.Data["tls.key"], caBundle, name, ns)
	case "certManager":
		p.check(len(caBundle) == 0, "certManager: caBundle must be left to the CA injector")
		var certName string
		for _, o := range r.other {
			if o["kind"] != "Certificate" {
				continue
			}
			spec, _ := o["spec"].(map[string]any)
			if spec["secretName"] == tlsSecret {
				certName = o["metadata"].(map[string]any)["name"].(string)
				dns, _ := spec["dnsNames"].([]any)
				p.check(slices.Contains(dns, any(fmt.Sprintf("%s.%s.svc", name, ns))),
					"certManager: Certificate %s lacks dnsName %s.%s.svc", certName, name, ns)
			}
		}
		p.check(certName != "", "certManager: no Certificate writes Secret %q", tlsSecret)
		p.check(injectFrom == ns+"/"+certName, "certManager: inject-ca-from %q, want %s/%s", injectFrom, ns, certName)
		p.check(len(r.secrets) == 0, "certManager: the chart must not render Secrets")
	case "provided":
		want, _ := base64.StdEncoding.DecodeString(wantCABundle)
		p.check(bytes.Equal(caBundle, want), "provided: caBundle is not the given one")
		p.check(len(r.secrets) == 0, "provided: the chart must not render Secrets")
		p.check(injectFrom == "", "provided: unexpected cert-manager.io/inject-ca-from")
	default:
		p.add("unknown mode %q", mode)
	}
}

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

// ---------------------------------------------------------------------------------------
// readme

const (
	tableStart = "<!-- values-table:start -->"
	tableEnd   = "<!-- values-table:end -->"
)

func readmeCmd(args []string) error {
	fs := flag.NewFlagSet("readme", flag.ExitOnError)
	write := fs.Bool("write", false, "rewrite the table instead of checking it")
	fs.Parse(args)
	if fs.NArg() != 2 {
		return errors.New("readme: need VALUES and README")
	}
	values, err := os.ReadFile(fs.Arg(0))
	if err != nil {
		return err
	}
	readme, err := os.ReadFile(fs.Arg(1))
	if err != nil {
		return err
	}
	table, err := valuesTable(values)
	if err != nil {
		return err
	}
	text := string(readme)
	i, j := strings.Index(text, tableStart), strings.Index(text, tableEnd)
	if i < 0 || j < i {
		return fmt.Errorf("%s: markers %s / %s not found", fs.Arg(1), tableStart, tableEnd)
	}
	updated := text[:i+len(tableStart)] + "\n" + table + text[j:]
	if updated == text {
		return nil
	}
	if *write {
		return os.WriteFile(fs.Arg(1), []byte(updated), 0o644)
	}
	return fmt.Errorf("%s: values table is out of date (run tests/tools/check-chart.sh --update)", fs.Arg(1))
}

type row struct{ key, def, desc string }

// valuesTable makes one row per documented key (a `# --` comment above it). Undocumented
// mappings are descended into; an undocumented leaf is an error.
func valuesTable(values []byte) (string, error) {
	var doc yamlv3.Node
	if err := yamlv3.Unmarshal(values, &doc); err != nil {
		return "", err
	}
	if len(doc.Content) != 1 || doc.Content[0].Kind != yamlv3.MappingNode {
		return "", errors.New("values.yaml is not a mapping")
	}
	var rows []row
	var undocumented []string
	var walk func(prefix string, m *yamlv3.Node) error
	walk = func(prefix string, m *yamlv3.Node) error {
		for k := 0; k+1 < len(m.Content); k += 2 {
			key, val := m.Content[k], m.Content[k+1]
			path := prefix + key.Value
			desc, documented := docComment(key.HeadComment)
			if val.Kind == yamlv3.MappingNode && len(val.Content) > 0 && hasDocumented(val) {
				if err := walk(path+".", val); err != nil {
					return err
				}
				continue
			}
			if !documented {
				if val.Kind == yamlv3.MappingNode && len(val.Content) > 0 {
					if err := walk(path+".", val); err != nil {
						return err
					}
					continue
				}
				undocumented = append(undocumented, path)
				continue
			}
			var v any
			if err := val.Decode(&v); err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			def, err := json.Marshal(v)
			if err != nil {
				return fmt.Errorf("%s: %w", path, err)
			}
			rows = append(rows, row{path, string(def), desc})
		}
		return nil
	}
	if err := walk("", doc.Content[0]); err != nil {
		return "", err
	}
	if len(undocumented) > 0 {
		return "", fmt.Errorf("values.yaml: keys without a `# --` description: %s", strings.Join(undocumented, ", "))
	}
	var b strings.Builder
	b.WriteString("| Key | Default | Description |\n|-----|---------|-------------|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", r.key, strings.ReplaceAll(r.def, "|", `\|`), strings.ReplaceAll(r.desc, "|", `\|`))
	}
	return b.String(), nil
}

func hasDocumented(m *yamlv3.Node) bool {
	for k := 0; k+1 < len(m.Content); k += 2 {
		if _, ok := docComment(m.Content[k].HeadComment); ok {
			return true
		}
		if m.Content[k+1].Kind == yamlv3.MappingNode && hasDocumented(m.Content[k+1]) {
			return true
		}
	}
	return false
}

// docComment returns the text of a `# -- ...` comment block (continued by `#` lines).
func docComment(c string) (string, bool) {
	lines := strings.Split(c, "\n")
	start := -1
	for i, l := range lines {
		if strings.HasPrefix(strings.TrimSpace(l), "# --") {
			start = i
		}
	}
	if start < 0 {
		return "", false
	}
	var parts []string
	for i, l := range lines[start:] {
		l = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(l), "#"))
		if i == 0 {
			l = strings.TrimSpace(strings.TrimPrefix(l, "--"))
		}
		if l != "" {
			parts = append(parts, l)
		}
	}
	return strings.Join(parts, " "), true
}

// ---------------------------------------------------------------------------------------
// config-fields

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
