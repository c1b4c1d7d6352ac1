{{/* The chart's name, possibly overridden. */}}
{{- define "phased.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The prefix of every object name: <release>-phased, or fullnameOverride. */}}
{{- define "phased.fullname" -}}
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

{{- define "phased.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{ include "phased.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: phased
{{- end }}

{{- define "phased.selectorLabels" -}}
app.kubernetes.io/name: {{ include "phased.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "phased.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "phased.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository@digest when image.digest is set (what is pulled is then fixed), else repository:tag. */}}
{{- define "phased.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}
{{- end }}

{{/*
The operator pod's node affinity: off every node that carries a GPU label (the keys of each
settings.gpuTypes[*].nodeLabels, plus placement.gpuNodeLabelKeys) and off every node of a
Phased pool (phased.dev/job-uid, phased.dev/role), so the operator never competes with the
workloads it manages nor lands on a node it may cordon. affinity.nodeAffinity replaces it.
*/}}
{{- define "phased.nodeAffinity" -}}
{{- $keys := list "phased.dev/job-uid" "phased.dev/role" }}
{{- range $name, $type := .Values.settings.gpuTypes }}
{{- if $type }}
{{- range $key, $_ := $type.nodeLabels }}
{{- $keys = append $keys $key }}
{{- end }}
{{- end }}
{{- end }}
{{- $keys = concat $keys .Values.placement.gpuNodeLabelKeys | uniq -}}
requiredDuringSchedulingIgnoredDuringExecution:
  nodeSelectorTerms:
    - matchExpressions:
        {{- range $keys }}
        - key: {{ . | quote }}
          operator: DoesNotExist
        {{- end }}
{{- end }}

{{/* Where the settings file is mounted in the operator container. */}}
{{- define "phased.settingsDir" -}}/etc/phased{{- end }}

{{/*
Fail with a clear message when a prometheus-operator object is asked for on a cluster that
does not serve monitoring.coreos.com/v1 (`helm template` without --api-versions counts too).
*/}}
{{- define "phased.requireMonitoringAPI" -}}
{{- if not (.context.Capabilities.APIVersions.Has "monitoring.coreos.com/v1") }}
{{- fail (printf "%s is enabled, but this cluster does not serve monitoring.coreos.com/v1 (the prometheus-operator CRDs). Install prometheus-operator (e.g. kube-prometheus-stack) first, or set %s=false. With `helm template`, pass --api-versions monitoring.coreos.com/v1." .what .key) }}
{{- end }}
{{- end }}

{{/* Checks the schema cannot express. */}}
{{- define "phased.validate" -}}
{{- if eq (int .Values.settings.metricsPort) (int .Values.settings.healthPort) }}
{{- fail (printf "settings.metricsPort and settings.healthPort must differ (both are %v)" .Values.settings.metricsPort) }}
{{- end }}
{{- if not .Values.settings.gpuTypes }}
{{- fail "settings.gpuTypes is empty: keep at least one GPU type (H100, H200 or Ascend910B)" }}
{{- end }}
{{- end }}

{{/* The settings file: values.settings, with the report endpoint filled in when enabled. */}}
{{- define "phased.settings" -}}
{{- $settings := deepCopy .Values.settings -}}
{{- if .Values.reports.enabled -}}
{{- $reports := deepCopy (default dict $settings.reports) -}}
{{- $port := int (default 8082 $reports.port) -}}
{{- if not $reports.url -}}
{{- $_ := set $reports "url" (printf "http://%s-reports.%s.svc:%d" (include "phased.fullname" .) .Release.Namespace $port) -}}
{{- end -}}
{{- if not $reports.keyFile -}}
{{- $_ := set $reports "keyFile" (printf "%s/key" (include "phased.reportKeyDir" .)) -}}
{{- end -}}
{{- $_ := set $settings "reports" $reports -}}
{{- end -}}
{{- toYaml $settings -}}
{{- end }}

{{- define "phased.reportKeyDir" -}}/etc/phased-report-key{{- end }}

{{- define "phased.reportKeySecret" -}}
{{- .Values.reports.existingSecret | default (printf "%s-report-key" (include "phased.fullname" .)) -}}
{{- end }}
