{{/* Names, labels and the pieces every opsconsole pod shares (env, security, volumes, the extra kinds). */}}

{{- define "opsconsole.fullname" -}}
{{- default "opsconsole" .Values.fullnameOverride | trunc 50 | trimSuffix "-" -}}
{{- end -}}

{{- define "opsconsole.labels" -}}
app.kubernetes.io/name: opsconsole
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/* selector labels of one component: (dict "ctx" $ "component" "web") */}}
{{- define "opsconsole.selector" -}}
app.kubernetes.io/name: opsconsole
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "opsconsole.componentLabels" -}}
{{ include "opsconsole.labels" .ctx }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "opsconsole.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end -}}

{{- define "opsconsole.secretName" -}}
{{ .Values.existingSecret | default (printf "%s-secrets" (include "opsconsole.fullname" .)) }}
{{- end -}}

{{- define "opsconsole.auditSecretName" -}}
{{ .Values.audit.existingSecret | default (printf "%s-audit-key" (include "opsconsole.fullname" .)) }}
{{- end -}}

{{/* envFrom + env of a process: (dict "ctx" $ "redis" true) */}}
{{- define "opsconsole.env" -}}
envFrom:
  - configMapRef: {name: {{ include "opsconsole.fullname" .ctx }}-config}
env:
  - name: SECRET_KEY
    valueFrom: {secretKeyRef: {name: {{ include "opsconsole.secretName" .ctx }}, key: SECRET_KEY}}
  - name: DATABASE_URL
    valueFrom: {secretKeyRef: {name: {{ include "opsconsole.secretName" .ctx }}, key: DATABASE_URL}}
{{- if .redis }}
  - name: REDIS_URL
    valueFrom: {secretKeyRef: {name: {{ include "opsconsole.secretName" .ctx }}, key: REDIS_URL}}
{{- end }}
{{- with .extra }}
{{ toYaml . | indent 2 }}
{{- end }}
{{- with .ctx.Values.extraEnv }}
{{ toYaml . | indent 2 }}
{{- end }}
{{- end -}}

{{- define "opsconsole.containerSecurity" -}}
securityContext: {{ toJson .Values.containerSecurityContext }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
{{- end -}}

{{/* the pod-level fields every workload shares */}}
{{- define "opsconsole.podCommon" -}}
securityContext: {{ toJson .Values.podSecurityContext }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets: {{ toJson . }}
{{- end }}
{{- end -}}

{{/* mounts of the writable data and tmp directories, and of the extra kinds */}}
{{- define "opsconsole.mounts" -}}
- {name: data, mountPath: /data}
- {name: tmp, mountPath: /tmp}
{{- if .Values.extraKinds.image }}
- {name: kinds, mountPath: /opt/opsconsole/kinds, readOnly: true}
{{- end }}
{{- end -}}

{{- define "opsconsole.volumes" -}}
- {name: data, emptyDir: {}}
- {name: tmp, emptyDir: {}}
{{- if .Values.extraKinds.image }}
- {name: kinds, emptyDir: {}}
{{- end }}
{{- end -}}

{{/* the init container that copies the extra kinds' packages into the pod (none without extraKinds.image) */}}
{{- define "opsconsole.kindsInit" -}}
{{- if .Values.extraKinds.image }}
- name: extra-kinds
  image: {{ .Values.extraKinds.image }}
  imagePullPolicy: {{ .Values.image.pullPolicy }}
  command: ["sh", "-c", "cp -R {{ .Values.extraKinds.path }}/. /opt/opsconsole/kinds/"]
  securityContext: {{ toJson .Values.containerSecurityContext }}
  resources: {requests: {cpu: 10m, memory: 32Mi}, limits: {cpu: 200m, memory: 64Mi}}
  volumeMounts:
    - {name: kinds, mountPath: /opt/opsconsole/kinds}
{{- end }}
{{- end -}}
