// Rendered objects: decoded strictly and checked against each other.

package main

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

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
	jobs            []batchv1.Job // the uninstall hook
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
	webhook := fs.Bool("webhook", true, "rendered with webhook.enabled (false: no MutatingWebhookConfiguration)")
	drainHook := fs.Bool("uninstall-drain", false, "rendered with uninstall.drain: the pre-delete drain Job")
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
	cfg := checkObjects(p, r, *release, *namespace, *mode, *caBundle, *rayAuthSecrets, *webhook)
	checkHooks(p, r, *drainHook, fullname(*release), *namespace, cfg)
	if len(p.list) > 0 {
		return fmt.Errorf("%s (mode %s):\n  - %s", fs.Arg(0), *mode, strings.Join(p.list, "\n  - "))
	}
	fmt.Fprintf(os.Stderr, "chartcheck: %s (mode %s): %d objects OK\n", fs.Arg(0), *mode, r.count())
	return nil
}

func (r *rendered) count() int {
	return len(r.serviceAccounts) + len(r.clusterRoles) + len(r.bindings) + len(r.configMaps) +
		len(r.secrets) + len(r.services) + len(r.deployments) + len(r.pdbs) + len(r.webhooks) +
		len(r.namespaces) + len(r.netpols) + len(r.jobs) + len(r.other)
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
		case "batch/v1/Job":
			r.jobs = append(r.jobs, batchv1.Job{})
			target = &r.jobs[len(r.jobs)-1]
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

// checkObjects checks the objects against each other; it returns the feature config.
func checkObjects(p *problems, r *rendered, release, ns, mode, wantCABundle string, rayAuthSecrets, webhook bool) featureConfig {
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

	// Webhook (webhook.enabled=false: none, and no certificate to check against it).
	if !webhook {
		p.check(len(r.webhooks) == 0, "webhook.enabled=false rendered %d MutatingWebhookConfiguration(s)", len(r.webhooks))
		return cfg
	}
	if !one("MutatingWebhookConfiguration", len(r.webhooks)) {
		return cfg
	}
	mwc := r.webhooks[0]
	p.check(mwc.Name == name, "MutatingWebhookConfiguration is %q, want %q", mwc.Name, name)
	if !(len(mwc.Webhooks) == 1) {
		p.add("want ONE webhook entry, got %d", len(mwc.Webhooks))
		return cfg
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
			return cfg
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
	return cfg
}
