{{/*
The release's full name: fullnameOverride, else the release name. Every object's name is config/'s with its prefix
"ts-controller-manager-" replaced by "<full name>-": release "ts-controller-manager" gives config/default's names
exactly; release "ops" gives "ops-controller-manager" (the metrics Service's name, the longest, must stay within 63
characters: release names up to 29 characters).
*/}}
{{- define "tscm.fullname" -}}
{{- .Values.fullnameOverride | default .Release.Name -}}
{{- end -}}

{{- define "tscm.prefix" -}}
{{- printf "%s-" (include "tscm.fullname" .) -}}
{{- end -}}

{{/* Labels Helm's form adds to config/'s on every object's metadata (never on selectors or Pod templates). */}}
{{- define "tscm.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{/* The watched namespaces, comma-separated: the release's first, then watch.namespaces (namespaced scope). */}}
{{- define "tscm.watchNamespaceList" -}}
{{- prepend .Values.watch.namespaces .Release.Namespace | uniq | join "," -}}
{{- end -}}

{{/* WATCH_NAMESPACE: "" (every namespace) for scope cluster, else the list above. */}}
{{- define "tscm.watchNamespaces" -}}
{{- if eq .Values.watch.scope "namespaced" -}}
{{- include "tscm.watchNamespaceList" . -}}
{{- end -}}
{{- end -}}
