{{/*
Chart name (the `app.kubernetes.io/name` label and the webhook's objectSelector).
*/}}
{{- define "rayshare.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Full name, as `helm create` makes it: the release name when it already contains the chart
name (release `rayshare` -> `rayshare`), else `<release>-<chart>`. The ServiceAccount,
Service, ClusterRole(Binding) and MutatingWebhookConfiguration all carry this name.
*/}}
{{- define "rayshare.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/*
This installation's name (config `instance`, default the full name): rayshare labels what
it admits and makes with it (`rayshare.io/instance`); `rayshare drain --instance` takes it.
*/}}
{{- define "rayshare.instance" -}}
{{- default (include "rayshare.fullname" .) .Values.config.instance }}
{{- end }}

{{- define "rayshare.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "rayshare.selectorLabels" -}}
app.kubernetes.io/name: {{ include "rayshare.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "rayshare.labels" -}}
helm.sh/chart: {{ include "rayshare.chart" . }}
{{ include "rayshare.selectorLabels" . }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/component: webhook
app.kubernetes.io/part-of: rayshare
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
Labels of the uninstall hook's Job and pod: `app.kubernetes.io/name` keeps the pod out of
the webhook (its objectSelector), and without `app.kubernetes.io/instance` neither the
Service nor the PodDisruptionBudget selects it.
*/}}
{{- define "rayshare.hookLabels" -}}
helm.sh/chart: {{ include "rayshare.chart" . }}
app.kubernetes.io/name: {{ include "rayshare.name" . }}
app.kubernetes.io/component: uninstall-drain
app.kubernetes.io/part-of: rayshare
app.kubernetes.io/managed-by: {{ .Release.Service }}
rayshare.io/uninstall-of: {{ .Release.Name }}
{{- end }}

{{- define "rayshare.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* Name of the Secret holding the serving certificate (tls.crt, tls.key). */}}
{{- define "rayshare.tlsSecretName" -}}
{{- if eq .Values.certs.mode "provided" }}
{{- required "certs.existingSecret is required when certs.mode=provided" .Values.certs.existingSecret }}
{{- else }}
{{- printf "%s-tls" (include "rayshare.fullname" .) }}
{{- end }}
{{- end }}

{{/* DNS names the API server may use for the Service. */}}
{{- define "rayshare.serviceDNSNames" -}}
{{- $svc := printf "%s.%s.svc" (include "rayshare.fullname" .) .Release.Namespace }}
{{- list $svc (printf "%s.cluster.local" $svc) | toJson }}
{{- end }}

{{/*
selfSigned mode: the CA and serving certificate, generated once per render and shared by the
Secret and the webhook's caBundle (both templates include this; the result is cached in
.Values under a private key so that every template sees the same certificate). On upgrades
the existing Secret is looked up and its tls.crt / tls.key / ca.crt are kept, so the
certificate does not change on every `helm upgrade`. (`helm template` and `--dry-run`
cannot look up, so they always print a fresh certificate.)
Returns nothing; read the result with `index .Values "__rayshareSelfSignedCerts"`.
*/}}
{{- define "rayshare.selfSignedCerts" -}}
{{- if not (hasKey .Values "__rayshareSelfSignedCerts") }}
{{- $secretName := include "rayshare.tlsSecretName" . }}
{{- $existing := lookup "v1" "Secret" .Release.Namespace $secretName }}
{{- $data := dict }}
{{- if and $existing (hasKey $existing "data") }}
{{- $old := $existing.data | default dict }}
{{- if and (index $old "tls.crt") (index $old "tls.key") (index $old "ca.crt") }}
{{- $data = dict "tls.crt" (index $old "tls.crt") "tls.key" (index $old "tls.key") "ca.crt" (index $old "ca.crt") }}
{{- end }}
{{- end }}
{{- if not $data }}
{{- $fullname := include "rayshare.fullname" . }}
{{- $dnsNames := include "rayshare.serviceDNSNames" . | fromJsonArray }}
{{- $days := int .Values.certs.selfSigned.validityDays }}
{{- $ca := genCA (printf "%s-ca" $fullname) $days }}
{{- $cert := genSignedCert (first $dnsNames) nil $dnsNames $days $ca }}
{{- $data = dict "tls.crt" ($cert.Cert | b64enc) "tls.key" ($cert.Key | b64enc) "ca.crt" ($ca.Cert | b64enc) }}
{{- end }}
{{- $_ := set .Values "__rayshareSelfSignedCerts" $data }}
{{- end }}
{{- end }}

{{/* The webhook's caBundle (base64 PEM), or empty when cert-manager injects it. */}}
{{- define "rayshare.caBundle" -}}
{{- if eq .Values.certs.mode "selfSigned" }}
{{- include "rayshare.selfSignedCerts" . }}
{{- index (index .Values "__rayshareSelfSignedCerts") "ca.crt" }}
{{- else if eq .Values.certs.mode "provided" }}
{{- $bundle := required "certs.caBundle is required when certs.mode=provided" .Values.certs.caBundle }}
{{- if hasPrefix "-----BEGIN" (trim $bundle) }}
{{- $bundle | b64enc }}
{{- else }}
{{- $bundle | nospace }}
{{- end }}
{{- end }}
{{- end }}

{{/* CEL list literal of the scheduler names that get PodGroups, e.g. ['volcano']. */}}
{{- define "rayshare.celSchedulerNames" -}}
{{- $names := list }}
{{- range .Values.config.podGroups.schedulerNames }}
{{- $names = append $names (printf "'%s'" .) }}
{{- end }}
{{- printf "[%s]" (join ", " $names) }}
{{- end }}

{{/*
Consistency checks across values that the JSON schema cannot express.
*/}}
{{- define "rayshare.validate" -}}
{{- if le (int .Values.terminationGracePeriodSeconds) (add (int .Values.shutdownDelaySeconds) (int .Values.drainTimeoutSeconds)) }}
{{- fail "terminationGracePeriodSeconds must be larger than shutdownDelaySeconds + drainTimeoutSeconds" }}
{{- end }}
{{- $budgetMs := mul (int .Values.webhook.timeoutSeconds) 1000 }}
{{- $c := .Values.config }}
{{- range $field, $ms := dict "admissionTimeoutMs" $c.admissionTimeoutMs "sharedClusters.createTimeoutMs" $c.sharedClusters.createTimeoutMs "podGroups.createTimeoutMs" $c.podGroups.createTimeoutMs "indices.claimTimeoutMs" $c.indices.claimTimeoutMs }}
{{- if and $ms (ge (int $ms) $budgetMs) }}
{{- fail (printf "config.%s (%v ms) must be below webhook.timeoutSeconds (%d s)" $field $ms (int $.Values.webhook.timeoutSeconds)) }}
{{- end }}
{{- end }}
{{- if not (or $c.sharedClusters.enabled $c.podGroups.enabled $c.indices.enabled) }}
{{- fail "config: at least one of sharedClusters, podGroups, indices must be enabled" }}
{{- end }}
{{- if and $c.podGroups.enabled (empty $c.podGroups.schedulerNames) }}
{{- fail "config.podGroups.schedulerNames must name at least one scheduler" }}
{{- end }}
{{- end }}
