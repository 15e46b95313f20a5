{{/* The chart's name, cut to fit a label. */}}
{{- define "memgate.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name: the names of its objects. */}}
{{- define "memgate.fullname" -}}
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

{{- define "memgate.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "memgate.selectorLabels" -}}
app.kubernetes.io/name: {{ include "memgate.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{- define "memgate.labels" -}}
helm.sh/chart: {{ include "memgate.chart" . }}
{{ include "memgate.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/component: server
{{- end }}

{{- define "memgate.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "memgate.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "memgate.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (default (printf "v%s" .Chart.AppVersion) .Values.image.tag) }}
{{- end }}
{{- end }}

{{/* The Secret of the auth mode: existingSecret, else <fullname>-auth. */}}
{{- define "memgate.authSecret" -}}
{{- default (printf "%s-auth" (include "memgate.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{- define "memgate.encryptionSecret" -}}
{{- default (printf "%s-encryption" (include "memgate.fullname" .)) .Values.encryption.existingSecret }}
{{- end }}

{{/*
The Host header values the server accepts besides loopback: the Service's
names in the cluster, the ingress hosts, and serve.allowHosts. Without
them every request through the Service or the ingress gets 403.
*/}}
{{- define "memgate.allowHosts" -}}
{{- $svc := include "memgate.fullname" . }}
{{- $hosts := list $svc (printf "%s.%s" $svc .Release.Namespace) (printf "%s.%s.svc" $svc .Release.Namespace) (printf "%s.%s.svc.%s" $svc .Release.Namespace .Values.clusterDomain) }}
{{- if .Values.ingress.enabled }}
{{- range .Values.ingress.hosts }}
{{- $hosts = append $hosts . }}
{{- end }}
{{- end }}
{{- range .Values.serve.allowHosts }}
{{- $hosts = append $hosts . }}
{{- end }}
{{- join "," (uniq $hosts) }}
{{- end }}

{{/* The public URL: serve.publicURL, else https://<first ingress host><path>. */}}
{{- define "memgate.publicURL" -}}
{{- if .Values.serve.publicURL }}
{{- .Values.serve.publicURL }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts }}
{{- printf "https://%s%s" (first .Values.ingress.hosts) .Values.serve.path }}
{{- end }}
{{- end }}

{{/* Files of the ConfigMap (public keys and CA certificates, never secrets). */}}
{{- define "memgate.configFiles" -}}
{{- if and (eq .Values.auth.mode "jwt") .Values.auth.jwt.jwks }}
jwks.json: {{ .Values.auth.jwt.jwks | quote }}
{{- end }}
{{- if and (eq .Values.auth.mode "jwt") .Values.auth.jwt.caCert }}
jwt-ca.pem: {{ .Values.auth.jwt.caCert | quote }}
{{- end }}
{{- if and (eq .Values.auth.mode "oauth") .Values.auth.oauth.caCert }}
oauth-ca.pem: {{ .Values.auth.oauth.caCert | quote }}
{{- end }}
{{- end }}

{{/* The settings the chart owns, which serve.flags may not set. */}}
{{- define "memgate.ownedFlags" -}}
transport bind allow-remote data-dir allow-host path tokens-file encrypt passphrase-env metrics shutdown-grace store replica-staleness migrate
{{- end }}

{{/* Variables that hold secrets: never in the ConfigMap. */}}
{{- define "memgate.secretFlags" -}}
token oauth-introspection-token passphrase new-passphrase admin-token embedder-key postgres-dsn
{{- end }}

{{/* The schema migration's Job. */}}
{{- define "memgate.migrationJob" -}}
{{- printf "%s-migrate" (include "memgate.fullname" . | trunc 55 | trimSuffix "-") }}
{{- end }}

{{/* The Secret and key of the migration Job's DSN: its own, else the replicas'. */}}
{{- define "memgate.migrationSecret" -}}
{{- default .Values.storage.postgres.existingSecret .Values.storage.postgres.migrationJob.existingSecret }}
{{- end }}

{{- define "memgate.migrationKey" -}}
{{- default .Values.storage.postgres.dsnKey .Values.storage.postgres.migrationJob.dsnKey }}
{{- end }}

{{/* "true" when more than one replica may run: replicaCount, or the autoscaler's maximum. */}}
{{- define "memgate.severalReplicas" -}}
{{- if or (gt (int .Values.replicaCount) 1) (and .Values.autoscaling.enabled (gt (int .Values.autoscaling.maxReplicas) 1)) }}true{{ end }}
{{- end }}
