{{/* The one image of every container: image.repository:image.tag (tag empty: appVersion). */}}
{{- define "och.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}
