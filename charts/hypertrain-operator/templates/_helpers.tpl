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

{{/* Rules the operator needs on namespaced objects: exactly what its code
calls (operator/cmd/permissions.cc; //charts:helm_chart_test compares them).
pods patch is called only under Kueue (a failed job's pod group is ended on one
terminated pod). configmaps patch is never called: the operator holds it so that
it may grant it, scoped to one ConfigMap, to each job's trainer ServiceAccount.
The gang schedulers' PodGroups are in gang-rbac.yaml. */}}
{{- define "hypertrain.namespacedRules" -}}
- apiGroups: ["hypertrain.dev"]
  resources: ["trainingjobs"]
  verbs: ["get", "list", "watch", "delete"]
- apiGroups: ["hypertrain.dev"]
  resources: ["trainingjobs/status"]
  verbs: ["update"]
- apiGroups: ["hypertrain.dev"]
  resources: ["trainingjobs/finalizers"]
  verbs: ["update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["create", "delete", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["services"]
  verbs: ["create", "list", "watch"]
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["create", "list", "watch", "patch"]
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create"]
- apiGroups: [""]
  resources: ["serviceaccounts"]
  verbs: ["create", "list", "watch"]
- apiGroups: ["rbac.authorization.k8s.io"]
  resources: ["roles", "rolebindings"]
  verbs: ["create", "list", "watch"]
{{- end -}}
