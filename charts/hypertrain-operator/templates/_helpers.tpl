{{- define "hypertrain.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "hypertrain.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "hypertrain.labels" -}}
app.kubernetes.io/name: {{ include "hypertrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end -}}

{{- define "hypertrain.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hypertrain.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "hypertrain.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "hypertrain.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- required "serviceAccount.name is required when serviceAccount.create is false" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Namespaces that get the trainer ServiceAccount and Role. */}}
{{- define "hypertrain.trainerNamespaces" -}}
{{- $ns := .Values.trainerServiceAccount.namespaces | default .Values.watchNamespaces | default (list .Release.Namespace) -}}
{{- toJson $ns -}}
{{- end -}}

{{/* Rules the operator needs on namespaced objects (least privilege). */}}
{{- define "hypertrain.namespacedRules" -}}
- apiGroups: ["hypertrain.dev"]
  resources: ["trainingjobs"]
  verbs: ["get", "list", "watch", "update", "patch", "delete"]
- apiGroups: ["hypertrain.dev"]
  resources: ["trainingjobs/status"]
  verbs: ["get", "update", "patch"]
- apiGroups: ["hypertrain.dev"]
  resources: ["trainingjobs/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["create", "delete", "get", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["services", "configmaps"]
  verbs: ["create", "delete", "get", "list", "watch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}
