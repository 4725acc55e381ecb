{{/* The release's objects' name (release name, "pushfan" unless it contains it). */}}
{{- define "pushfan.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "pushfan.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "pushfan.labels" -}}
{{ include "pushfan.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "pushfan.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag }}
{{- end -}}

{{/* Whether the Secret holds the FCM service account's key (service-account.json). */}}
{{- define "pushfan.hasServiceAccount" -}}
{{- if or .Values.secrets.serviceAccountJSON (and .Values.secrets.existingSecret .Values.secrets.existingSecretHasServiceAccount) -}}true{{- end -}}
{{- end -}}

{{- define "pushfan.secretName" -}}
{{- default (include "pushfan.fullname" .) .Values.secrets.existingSecret -}}
{{- end -}}

{{/* Non-root, read-only: the image is FROM scratch, runs as 65532 and writes no files. */}}
{{- define "pushfan.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{- define "pushfan.containerSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
{{- end -}}

{{/* The environment every pushfan container gets: the one ConfigMap, the one Secret. */}}
{{- define "pushfan.envFrom" -}}
- configMapRef:
    name: {{ include "pushfan.fullname" . }}-env
- secretRef:
    name: {{ include "pushfan.secretName" . }}
{{- end -}}

{{- define "pushfan.env" -}}
- name: PUSHFAN_CONFIG
  value: /etc/pushfan/pushfan.yaml
{{- if include "pushfan.hasServiceAccount" . }}
- name: GOOGLE_APPLICATION_CREDENTIALS
  value: /etc/pushfan/secret/service-account.json
{{- end }}
{{- end -}}

{{- define "pushfan.volumeMounts" -}}
- name: config
  mountPath: /etc/pushfan/pushfan.yaml
  subPath: pushfan.yaml
  readOnly: true
{{- if include "pushfan.hasServiceAccount" . }}
- name: service-account
  mountPath: /etc/pushfan/secret
  readOnly: true
{{- end }}
{{- end -}}

{{- define "pushfan.volumes" -}}
- name: config
  configMap:
    name: {{ include "pushfan.fullname" . }}-config
{{- if include "pushfan.hasServiceAccount" . }}
- name: service-account
  secret:
    secretName: {{ include "pushfan.secretName" . }}
    items:
      - key: service-account.json
        path: service-account.json
{{- end }}
{{- end -}}
