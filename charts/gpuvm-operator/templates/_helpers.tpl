{{- define "gpuvm-operator.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "gpuvm-operator.fullname" -}}
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

{{- define "gpuvm-operator.selectorLabels" -}}
app.kubernetes.io/name: {{ include "gpuvm-operator.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "gpuvm-operator.labels" -}}
{{ include "gpuvm-operator.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "gpuvm-operator.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "gpuvm-operator.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* repository:tag, repository@digest, or repository:tag@digest when both are set. */}}
{{- define "gpuvm-operator.image" -}}
{{- $tag := .Values.image.tag | default .Chart.AppVersion -}}
{{- if .Values.image.digest -}}
{{- if .Values.image.tag -}}
{{- printf "%s:%s@%s" .Values.image.repository $tag .Values.image.digest -}}
{{- else -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- end -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository $tag -}}
{{- end -}}
{{- end -}}

{{/* The operator's RBAC rules: a ClusterRole's (installScope cluster) or each watched namespace's Role's
     (installScope namespace). The same as deploy/rbac.yaml (test/deploy/manifests.test.ts compares them). */}}
{{- define "gpuvm-operator.rbacRules" -}}
# The kinds: read through informers (list, watch), finalizers written with merge patches.
- apiGroups: ["gpucloud.dev"]
  resources: ["gpuvms", "gpudisks", "gpunetworks", "gpufirewallrules", "gpuvmpools"]
  verbs: ["list", "watch", "patch"]
# Objects the operator's own objects own: a GpuVmPool's GpuVms and GpuDisks, a GpuMachine's GpuVm, a GpuCluster's
# GpuNetwork and GpuFirewallRules (docs/cluster-api.md): created and deleted by the operator.
- apiGroups: ["gpucloud.dev"]
  resources: ["gpuvms", "gpudisks", "gpunetworks", "gpufirewallrules"]
  verbs: ["create", "delete"]
- apiGroups: ["gpucloud.dev"]
  resources: ["gpuvms/status", "gpudisks/status", "gpunetworks/status", "gpufirewallrules/status", "gpuvmpools/status"]
  verbs: ["patch"]
# Cluster API's infrastructure kinds (docs/cluster-api.md): read through informers, finalizers, clusterctl's
# block-move and the providerID patched (not a template's), status patched; the Clusters and Machines that own them read (bootstrap
# data, pause). A Machine's bootstrap data Secret is read live (get secrets) and copied to a Secret its GpuMachine owns.
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["gpuclusters", "gpumachines"]
  verbs: ["list", "watch", "patch"]
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["gpumachinetemplates"]
  verbs: ["list", "watch"]
- apiGroups: ["infrastructure.cluster.x-k8s.io"]
  resources: ["gpuclusters/status", "gpumachines/status", "gpumachinetemplates/status"]
  verbs: ["patch"]
- apiGroups: ["cluster.x-k8s.io"]
  resources: ["clusters", "machines"]
  verbs: ["list", "watch"]
# GpuBudgets: read (an informer, and a live list before each reservation); the ledger written through /status
# with the budget's resourceVersion as precondition (docs/budgets.md). Nothing else of a budget is written.
- apiGroups: ["gpucloud.dev"]
  resources: ["gpubudgets"]
  verbs: ["list", "watch"]
- apiGroups: ["gpucloud.dev"]
  resources: ["gpubudgets/status"]
  verbs: ["patch"]
# Secrets: credentials and referenced keys are read (the cache holds only those labelled gpucloud.dev/watch=true),
# a Machine's bootstrap data live; written are only the connection-details Secrets a GpuVm owns (create, patch;
# delete when it names another, with the owner's uid as precondition), the bootstrap data copies GpuMachines own
# (create; delete with them) and the credentials-in-use finalizer (patch). RBAC cannot say "only objects we own";
# the operator never writes any other.
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
# ConfigMaps: read for referenced scripts; written (and deleted) only as the connection details a GpuVm owns.
- apiGroups: [""]
  resources: ["configmaps"]
  verbs: ["get", "list", "watch", "create", "patch", "delete"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end -}}

{{/* Namespaces the operator watches: watchNamespaces, or with installScope namespace and none given, its own. */}}
{{- define "gpuvm-operator.watchNamespaces" -}}
{{- if .Values.watchNamespaces -}}
{{- join "," .Values.watchNamespaces -}}
{{- else if eq .Values.installScope "namespace" -}}
{{- .Release.Namespace -}}
{{- end -}}
{{- end -}}
