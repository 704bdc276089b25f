#!/usr/bin/env bash
# Checks the rayshare Helm chart:
#   - `helm lint --strict` in each certificate mode;
#   - `helm template` in each mode (selfSigned, certManager, provided) and in a few other
#     configurations, each strictly decoded and cross-checked by tests/tools/chartcheck
#     (ServiceAccount/RBAC/Service/Deployment/webhook fit together, certificates verify,
#     the webhook's CEL matchConditions are evaluated against sample RayJobs and pods);
#   - values that must be refused are refused;
#   - `config` in values.yaml / values.schema.json has exactly the fields of src/config/mod.rs;
#   - the README's values table matches values.yaml;
#   - the README's "What it installs" table names exactly the kinds the renders above have
#     (one of them with every optional object on), and its ClusterRole and Role rows state
#     exactly the rendered RBAC rules;
#   - deploy/manifests/rayshare.yaml equals a fresh render;
#   - one version in Cargo.toml, Chart.yaml (version, appVersion), CHANGELOG.md, the
#     manifests' image and the release workflow; kubeVersion is what the tests run;
#   - `helm package` makes the chart, which lints and renders as the directory does.
#
#   tests/tools/check-chart.sh            check
#   tests/tools/check-chart.sh --update   regenerate deploy/manifests/rayshare.yaml and the
#                                         README values table, then check
#
# deploy/manifests/rayshare.yaml is rendered with certs.mode=certManager: selfSigned mode
# generates a random CA and key at every render, so its output is neither reproducible nor
# fit to commit (it would publish a private key). The certManager render is deterministic,
# so the comparison is exact.
set -euo pipefail

update=0
case "${1:-}" in
  "") ;;
  --update) update=1 ;;
  *) echo "usage: $0 [--update]" >&2; exit 2 ;;
esac

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"
chart=charts/rayshare
manifest=deploy/manifests/rayshare.yaml

log() { echo "check-chart: $*" >&2; }
fail() { echo "check-chart: FAIL: $*" >&2; exit 1; }

helm="$(tests/tools/build-helm.sh)"
helm_version="$("$helm" version --short)"

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

log "building chartcheck"
(cd tests/tools/chartcheck && GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off go build -o "$work/chartcheck" .) \
  || fail "cannot build tests/tools/chartcheck"
chartcheck="$work/chartcheck"
(cd tests/tools/chartcheck && GOFLAGS="-mod=readonly -buildvcs=false" GOWORK=off go test ./... >&2) \
  || fail "chartcheck's own tests"

# A throwaway CA bundle for `provided` mode (rendering does not parse it), base64 and PEM.
printf -- '-----BEGIN CERTIFICATE-----\nZHVtbXk=\n-----END CERTIFICATE-----\n' >"$work/ca.pem"
dummy_ca="$(base64 <"$work/ca.pem" | tr -d '\n')"
mode_args() {
  case "$1" in
    selfSigned) echo "--set certs.mode=selfSigned" ;;
    certManager) echo "--set certs.mode=certManager" ;;
    provided) echo "--set certs.mode=provided --set certs.existingSecret=rayshare-tls-provided --set certs.caBundle=$dummy_ca" ;;
  esac
}

# 1. lint
for mode in selfSigned certManager provided; do
  log "helm lint --strict ($mode)"
  # shellcheck disable=SC2046
  "$helm" lint --strict "$chart" --namespace rayshare-system $(mode_args "$mode") >"$work/lint.out" 2>&1 \
    || { cat "$work/lint.out" >&2; fail "helm lint ($mode)"; }
done

# 2. renders: "name|release|namespace|mode|helm args"
renders=(
  "selfSigned|rayshare|rayshare-system|selfSigned|"
  "certManager|rayshare|rayshare-system|certManager|"
  "provided|rayshare|rayshare-system|provided|"
  "provided-pem|rayshare|rayshare-system|provided|--set-file certs.caBundle=$work/ca.pem"
  "certManager-issuerRef|rayshare|rayshare-system|certManager|--set certs.certManager.issuerRef.name=corp-ca --set certs.certManager.issuerRef.kind=ClusterIssuer"
  "other-release|team-hooks|platform|selfSigned|--set replicaCount=1 --set serviceMonitor.enabled=true --set priorityClassName=high --set image.digest=sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
  "pods-only|rayshare|rayshare-system|selfSigned|--set config.sharedClusters.enabled=false --set config.indices.enabled=false --set config.podGroups.schedulerNames={volcano,kai-scheduler}"
  "rayjobs-and-indices|rayshare|rayshare-system|selfSigned|--set config.podGroups.enabled=false --set webhook.failurePolicy=Fail --set webhook.reinvocationPolicy=Never"
  "monitoring|rayshare|rayshare-system|selfSigned|--set grafanaDashboard.enabled=true --set prometheusRule.enabled=true --set serviceMonitor.enabled=true"
  "kuberay-volcano|rayshare|rayshare-system|selfSigned|--set kuberay.batchScheduler=volcano"
  # Admission off through the chart: no MutatingWebhookConfiguration.
  "webhook-off|rayshare|rayshare-system|selfSigned|--set webhook.enabled=false"
  # The uninstall hook of another release, with its own instance name.
  "uninstall-drain|team-hooks|platform|certManager|--set uninstall.drain=true --set config.instance=team-a --set uninstall.force=true"
  "network-policy|rayshare|rayshare-system|selfSigned|--set clientAuth.caConfigMap=apiserver-client-ca --set networkPolicy.enabled=true --set networkPolicy.egress.enabled=true --set-json networkPolicy.webhookFrom=[{\"ipBlock\":{\"cidr\":\"10.0.0.0/24\"}}]"
  # Every optional object on (certManager's objects come from the certManager renders).
  "all-features|rayshare|rayshare-system|selfSigned|--set replicaCount=2 --set podDisruptionBudget.enabled=true --set rbac.ownObjectsPolicy=true --set rbac.rayAuthSecrets=true --set serviceMonitor.enabled=true --set prometheusRule.enabled=true --set grafanaDashboard.enabled=true --set networkPolicy.enabled=true --set networkPolicy.egress.enabled=true --set clientAuth.caConfigMap=apiserver-client-ca --set kuberay.batchScheduler=volcano --set uninstall.drain=true"
)
for r in "${renders[@]}"; do
  IFS='|' read -r name release ns mode extra <<<"$r"
  log "helm template: $name"
  out="$work/render-$name.yaml"
  # shellcheck disable=SC2046,SC2086
  "$helm" template "$release" "$chart" --namespace "$ns" $(mode_args "$mode") $extra >"$out" \
    || fail "helm template ($name)"
  check_args=()
  [[ "$mode" == provided ]] && check_args=(-ca-bundle "$dummy_ca")
  [[ "$extra" == *rbac.rayAuthSecrets=true* ]] && check_args+=(-ray-auth-secrets)
  [[ "$extra" == *webhook.enabled=false* ]] && check_args+=(-webhook=false)
  [[ "$extra" == *uninstall.drain=true* ]] && check_args+=(-uninstall-drain)
  "$chartcheck" manifests -release "$release" -namespace "$ns" -mode "$mode" "${check_args[@]}" "$out" \
    || fail "rendered manifests ($name)"
done

# The README's "What it installs" table against every render above.
"$chartcheck" installs -templates "$chart/templates" "$chart/README.md" "$work"/render-*.yaml \
  || fail "README \"What it installs\" table differs from the chart (fix the table in $chart/README.md)"

# The webhook alone, as the e2e harness takes it.
"$helm" template rayshare "$chart" -n rayshare-system --show-only templates/webhook.yaml >"$work/webhook.yaml" \
  || fail "--show-only templates/webhook.yaml"
[[ "$(grep -c '^kind: MutatingWebhookConfiguration$' "$work/webhook.yaml")" == 1 &&
   "$(grep -c '^kind:' "$work/webhook.yaml")" == 1 ]] \
  || fail "--show-only templates/webhook.yaml must render exactly one MutatingWebhookConfiguration"

# 3. values that must be refused: "name|helm args"
refusals=(
  "unknown cert mode|--set certs.mode=bogus"
  "provided without a Secret|--set certs.mode=provided"
  "unknown config key|--set config.podGroups.bogus=1"
  "config timeout beyond the webhook timeout|--set webhook.timeoutSeconds=3"
  "webhook timeout above 30s|--set webhook.timeoutSeconds=31"
  "shutdown delay + drain longer than the grace period|--set drainTimeoutSeconds=25"
  "every feature off|--set config.sharedClusters.enabled=false --set config.podGroups.enabled=false --set config.indices.enabled=false"
  "bad failurePolicy|--set webhook.failurePolicy=Maybe"
  "unknown KubeRay batch scheduler|--set kuberay.batchScheduler=slurm"
  # Chart.yaml's kubeVersion: only what the tests run (the control plane's 1.36).
  "Kubernetes older than tested|--kube-version 1.35.0"
  "uninstall hook without a wait|--set uninstall.waitSeconds=-1"
)
for r in "${refusals[@]}"; do
  IFS='|' read -r name extra <<<"$r"
  # shellcheck disable=SC2086
  if "$helm" template rayshare "$chart" -n rayshare-system $extra >/dev/null 2>"$work/refusal.err"; then
    fail "values not refused: $name ($extra)"
  fi
done
log "${#refusals[@]} bad value sets refused"

# 4. `config` in values.yaml and the schema has exactly the fields of src/config/mod.rs
"$chartcheck" config-fields src/config/mod.rs "$chart/values.yaml" "$chart/values.schema.json" \
  || fail "config fields differ from src/config/mod.rs"

# 5. README values table
readme_args=()
[[ $update == 1 ]] && readme_args=(-write)
"$chartcheck" readme "${readme_args[@]}" "$chart/values.yaml" "$chart/README.md" || fail "README values table"

# 6. deploy/manifests/rayshare.yaml
render_manifest() {
  cat <<'EOF'
# rayshare for kubectl users:  kubectl apply -f deploy/manifests/rayshare.yaml
#
# GENERATED, do not edit: tests/tools/check-chart.sh --update renders it as
#   helm template rayshare charts/rayshare --namespace rayshare-system --set certs.mode=certManager
# plus the Namespace below.
#
# Certificates come from cert-manager (certs.mode=certManager), which must be installed with
# its CA injector. The chart's default mode (selfSigned) generates a random CA and private key
# at every render: a committed copy would publish that key, and the file could not be
# checked against a fresh render. Use the Helm chart for the selfSigned or provided modes.
---
apiVersion: v1
kind: Namespace
metadata:
  name: rayshare-system
  labels:
    app.kubernetes.io/part-of: rayshare
    pod-security.kubernetes.io/enforce: restricted
EOF
  "$helm" template rayshare "$chart" --namespace rayshare-system --set certs.mode=certManager
}
render_manifest >"$work/manifest.yaml" || fail "rendering $manifest"
"$chartcheck" manifests -mode certManager "$work/manifest.yaml" || fail "$manifest render"
if [[ $update == 1 ]]; then
  mkdir -p "$(dirname "$manifest")"
  cp "$work/manifest.yaml" "$manifest"
  log "wrote $manifest"
fi
if ! diff -u "$manifest" "$work/manifest.yaml" >"$work/manifest.diff" 2>&1; then
  head -40 "$work/manifest.diff" >&2
  fail "$manifest is out of date (run tests/tools/check-chart.sh --update)"
fi

# 7. versions, and the packaged chart (what the release workflow pushes)
"$chartcheck" versions Cargo.toml "$chart/Chart.yaml" "$chart/values.yaml" CHANGELOG.md "$manifest" \
  .github/workflows/release.yml tests/controlplane/go.mod || fail "versions disagree"
"$helm" package "$chart" -d "$work/package" >/dev/null || fail "helm package"
packaged=("$work"/package/rayshare-*.tgz)
[[ ${#packaged[@]} == 1 && -f "${packaged[0]}" ]] || fail "helm package made ${packaged[*]}"
"$helm" lint --strict "${packaged[0]}" --namespace rayshare-system >"$work/lint.out" 2>&1 \
  || { cat "$work/lint.out" >&2; fail "helm lint (packaged)"; }
"$helm" template rayshare "${packaged[0]}" --namespace rayshare-system --set certs.mode=certManager \
  --set uninstall.drain=true >"$work/packaged.yaml" || fail "helm template (packaged)"
"$helm" template rayshare "$chart" --namespace rayshare-system --set certs.mode=certManager \
  --set uninstall.drain=true | diff -u - "$work/packaged.yaml" >&2 || fail "the packaged chart renders differently"
log "packaged $(basename "${packaged[0]}"): lints and renders as the directory"

echo "check-chart: OK (helm $helm_version): lint x3, ${#renders[@]} renders checked (selfSigned, certManager, provided, ...), ${#refusals[@]} bad value sets refused, config fields match src/config/mod.rs, README tables and $manifest up to date"
