{{/* The labels every object carries (deploy/base's kustomization adds the same). */}}
{{- define "draguard.labels" -}}
app.kubernetes.io/part-of: draguard
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The namespaces no webhook entry is sent writes of: the exemptions and the release's own. */}}
{{- define "draguard.exemptNamespaces" -}}
{{- $names := concat .Values.exemptions.namespaces (list .Release.Namespace) | uniq -}}
[{{ join ", " $names }}]
{{- end }}

{{/* The same, as a CEL list of strings (the fail-open Namespace entry's condition). */}}
{{- define "draguard.exemptNamespacesCEL" -}}
{{- $names := concat .Values.exemptions.namespaces (list .Release.Namespace) | uniq -}}
[{{ range $i, $n := $names }}{{ if $i }}, {{ end }}'{{ $n }}'{{ end }}]
{{- end }}

{{/* cert-manager's CA injector fills caBundle of every entry from the Certificate's CA. */}}
{{- define "draguard.caInjection" -}}
{{- if eq .Values.certificates.mode "cert-manager" -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/draguard
{{- end -}}
{{- end }}
