{{/* Names, labels, image and API version shared by every template. */}}

{{/* Chart name, or nameOverride; at most 63 characters. */}}
{{- define "dra-driver-nvidia-gpu.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* fullnameOverride, else the release name when it already holds the chart name, else
     <release>-<name>. */}}
{{- define "dra-driver-nvidia-gpu.fullname" -}}
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

{{- define "dra-driver-nvidia-gpu.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.labels" -}}
helm.sh/chart: {{ include "dra-driver-nvidia-gpu.chart" . }}
{{ include "dra-driver-nvidia-gpu.templateLabels" . }}
{{- end }}

{{/* Labels without the chart version: they go on pod templates, where a version change would
     roll every pod for nothing. */}}
{{- define "dra-driver-nvidia-gpu.templateLabels" -}}
app.kubernetes.io/name: {{ include "dra-driver-nvidia-gpu.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- if .Chart.AppVersion }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels; the component (kubelet-plugin, controller, webhook) comes from the caller:
     include "dra-driver-nvidia-gpu.selectorLabels" (dict "context" . "component" "webhook") */}}
{{- define "dra-driver-nvidia-gpu.selectorLabels" -}}
{{- if .context.Values.selectorLabelsOverride -}}
{{ toYaml .context.Values.selectorLabelsOverride }}
{{- else -}}
{{ include "dra-driver-nvidia-gpu.name" .context }}-component: {{ .component }}
{{- end }}
{{- end }}

{{- define "dra-driver-nvidia-gpu.fullimage" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default (printf "v%s" .Chart.AppVersion)) }}
{{- end }}

{{/* Service accounts. */}}
{{- define "dra-driver-nvidia-gpu.serviceAccountName" -}}
{{- default (printf "%s-service-account" (include "dra-driver-nvidia-gpu.fullname" .)) .Values.serviceAccount.name }}
{{- end }}
{{- define "dra-driver-nvidia-gpu.kubeletPluginServiceAccountName" -}}
{{- printf "%s-kubeletplugin" (include "dra-driver-nvidia-gpu.serviceAccountName" .) }}
{{- end }}
{{- define "dra-driver-nvidia-gpu.controllerServiceAccountName" -}}
{{- printf "%s-controller" (include "dra-driver-nvidia-gpu.serviceAccountName" .) }}
{{- end }}
{{- define "dra-driver-nvidia-gpu.webhookServiceAccountName" -}}
{{- default (printf "%s-webhook-service-account" (include "dra-driver-nvidia-gpu.fullname" .)) .Values.webhook.serviceAccount.name }}
{{- end }}

{{/* resource.k8s.io version for DeviceClasses: resourceApiVersion, else the newest served. */}}
{{- define "dra-driver-nvidia-gpu.resourceApiVersion" -}}
{{- if .Values.resourceApiVersion }}
{{- .Values.resourceApiVersion }}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1/DeviceClass" }}
{{- "resource.k8s.io/v1" }}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta2/DeviceClass" }}
{{- "resource.k8s.io/v1beta2" }}
{{- else if .Capabilities.APIVersions.Has "resource.k8s.io/v1beta1/DeviceClass" }}
{{- "resource.k8s.io/v1beta1" }}
{{- else }}
{{- fail "resourceApiVersion: the cluster serves no resource.k8s.io version with DeviceClasses (v1, v1beta2 or v1beta1); enable the DynamicResourceAllocation API, or set resourceApiVersion to one of those (helm template: --api-versions resource.k8s.io/v1/DeviceClass)" }}
{{- end }}
{{- end }}

{{/* FEATURE_GATES value: "Name=bool,..." in key order, with a trailing comma. */}}
{{- define "dra-driver-nvidia-gpu.featureGates" -}}
{{- range $k, $v := .Values.featureGates }}{{ $k }}={{ $v }},{{ end }}
{{- end }}

{{/* True ("true") when a feature gate is set to true. */}}
{{- define "dra-driver-nvidia-gpu.gate" -}}
{{- if hasKey .context.Values.featureGates .gate }}{{ if eq (toString (index .context.Values.featureGates .gate)) "true" }}true{{ end }}{{ end }}
{{- end }}

{{/* imagePullSecrets as comma-separated names (entries are {name: x} maps or plain names). */}}
{{- define "dra-driver-nvidia-gpu.pullSecretNames" -}}
{{- $names := list }}
{{- range .Values.imagePullSecrets }}
{{- if kindIs "map" . }}
{{- $names = append $names .name }}
{{- else }}
{{- $names = append $names . }}
{{- end }}
{{- end }}
{{- join "," $names }}
{{- end }}

{{/*
"true" when the API server authorizes ResourceClaim status writes per field (Kubernetes >= 1.36,
gate DRAResourceClaimGranularStatusAuthorization, beta and on): status.devices entries of driver
D then need resourceclaims/driver named D, and the verb "associated-node:patch" limits them to
claims allocated on the node a pod-bound token names. Older servers cannot confine a node's
status writes, so the plugin writes no device status there (docs/helm.md, "RBAC").
*/}}
{{- define "dra-driver-nvidia-gpu.granularStatusAuthorization" -}}
{{- if semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version }}true{{ end }}
{{- end }}

{{/*
"true" when the kubelet plugins' DaemonSet rolls by surge by default: each node gets its new plugin
pod beside the old one, which stops once the new one is Ready (maxSurge 1, maxUnavailable 0). Both
serve at once on sockets named after their pods (POD_UID), which needs kubelets >= 1.33: older
kubelets keep one registration per driver and drop it when the old pod's socket goes. The chart
sees only the API server's version, and kubelets may be up to three minor versions older than it
(Kubernetes' version skew policy), so surge is the default from API server 1.36 on. Not with
hostNetwork: two pods of one node cannot bind the same health and metrics ports. An explicit
kubeletPlugin.updateStrategy wins (docs/helm.md, "Rolling updates of the kubelet plugins").
*/}}
{{- define "dra-driver-nvidia-gpu.kubeletPluginSurge" -}}
{{- if and (not .Values.kubeletPlugin.updateStrategy) (not .Values.kubeletPlugin.hostNetwork) (semverCompare ">=1.36.0-0" .Capabilities.KubeVersion.Version) }}true{{ end }}
{{- end }}

{{/* The kubelet plugins' DaemonSet updateStrategy: kubeletPlugin.updateStrategy when set, else surge where the cluster supports it ("kubeletPluginSurge"), else stop-then-start on every node at once. */}}
{{- define "dra-driver-nvidia-gpu.kubeletPluginUpdateStrategy" -}}
{{- if .Values.kubeletPlugin.updateStrategy }}
{{- toYaml .Values.kubeletPlugin.updateStrategy }}
{{- else if include "dra-driver-nvidia-gpu.kubeletPluginSurge" . }}
type: RollingUpdate
rollingUpdate:
  maxSurge: 1
  maxUnavailable: 0
{{- else }}
type: RollingUpdate
rollingUpdate:
  maxUnavailable: 100%
{{- end }}
{{- end }}

{{/* "true" when the gpu plugin writes device status: deviceStatus not false, on a server that confines it. */}}
{{- define "dra-driver-nvidia-gpu.deviceStatus" -}}
{{- if and .Values.resources.gpus.enabled (ne (toString .Values.kubeletPlugin.containers.gpus.deviceStatus) "false") (include "dra-driver-nvidia-gpu.granularStatusAuthorization" .) }}true{{ end }}
{{- end }}

