{{/*
The pod of the server, the same for both workloads: the StatefulSet of a
bbolt store and the Deployment of a PostgreSQL one. It starts at the pod
template's metadata, for | nindent 4 under the workload's template:.
*/}}
{{- define "memgate.podTemplate" -}}
{{- $fullname := include "memgate.fullname" . }}
{{- $files := include "memgate.configFiles" . }}
{{- $postgres := eq .Values.storage.backend "postgres" -}}
metadata:
  labels:
    {{- include "memgate.labels" . | nindent 4 }}
    {{- with .Values.podLabels }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
  annotations:
    # A change of the settings rolls the pod.
    checksum/config: {{ include (print $.Template.BasePath "/configmap.yaml") . | sha256sum }}
    {{- with .Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
spec:
  serviceAccountName: {{ include "memgate.serviceAccountName" . }}
  # memgate never calls the Kubernetes API.
  automountServiceAccountToken: false
  enableServiceLinks: false
  {{- with .Values.imagePullSecrets }}
  imagePullSecrets:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.priorityClassName }}
  priorityClassName: {{ . }}
  {{- end }}
  # SIGTERM: stop accepting, drain for up to serve.shutdownGraceSeconds,
  # flush every store, exit 0; the pod gets that and 10 s more.
  terminationGracePeriodSeconds: {{ default (add (int .Values.serve.shutdownGraceSeconds) 10) .Values.terminationGracePeriodSeconds }}
  securityContext:
    {{- toYaml .Values.podSecurityContext | nindent 4 }}
  containers:
    - name: memgate
      image: {{ include "memgate.image" . | quote }}
      imagePullPolicy: {{ .Values.image.pullPolicy }}
      args:
        - serve
        {{- if not .Values.auth.readScope }}
        - --read-scope=
        {{- end }}
        {{- if not .Values.auth.writeScope }}
        - --write-scope=
        {{- end }}
      envFrom:
        - configMapRef:
            name: {{ $fullname }}
      {{- if or (eq .Values.auth.mode "token") (eq .Values.auth.mode "oauth") .Values.encryption.enabled .Values.admin.existingSecret $postgres .Values.serve.extraEnv }}
      env:
        {{- if eq .Values.auth.mode "token" }}
        - name: MEMGATE_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ include "memgate.authSecret" . }}
              key: {{ .Values.auth.tokenKey }}
        {{- end }}
        {{- if eq .Values.auth.mode "oauth" }}
        - name: MEMGATE_OAUTH_INTROSPECTION_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ include "memgate.authSecret" . }}
              key: {{ .Values.auth.introspectionTokenKey }}
        {{- end }}
        {{- if .Values.admin.existingSecret }}
        - name: MEMGATE_ADMIN_TOKEN
          valueFrom:
            secretKeyRef:
              name: {{ .Values.admin.existingSecret }}
              key: {{ .Values.admin.tokenKey }}
        {{- end }}
        {{- if .Values.encryption.enabled }}
        - name: MEMGATE_PASSPHRASE
          valueFrom:
            secretKeyRef:
              name: {{ include "memgate.encryptionSecret" . }}
              key: {{ .Values.encryption.passphraseKey }}
        {{- end }}
        {{- if $postgres }}
        - name: MEMGATE_POSTGRES_DSN
          valueFrom:
            secretKeyRef:
              name: {{ .Values.storage.postgres.existingSecret }}
              key: {{ .Values.storage.postgres.dsnKey }}
        {{- end }}
        {{- with .Values.serve.extraEnv }}
        {{- toYaml . | nindent 8 }}
        {{- end }}
      {{- end }}
      ports:
        - name: http
          containerPort: {{ .Values.containerPort }}
          protocol: TCP
      {{- with .Values.startupProbe }}
      startupProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.livenessProbe }}
      livenessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      {{- with .Values.readinessProbe }}
      readinessProbe:
        {{- toYaml . | nindent 8 }}
      {{- end }}
      resources:
        {{- toYaml .Values.resources | nindent 8 }}
      securityContext:
        {{- toYaml .Values.securityContext | nindent 8 }}
      volumeMounts:
        - name: data
          mountPath: /data
        {{- if eq .Values.auth.mode "tokensFile" }}
        - name: tokens
          mountPath: /etc/memgate/auth
          readOnly: true
        {{- end }}
        {{- if $files }}
        - name: files
          mountPath: /etc/memgate/config
          readOnly: true
        {{- end }}
  {{- if or $postgres (not .Values.persistence.enabled) (eq .Values.auth.mode "tokensFile") $files }}
  volumes:
    {{- if $postgres }}
    # Only a cache each replica can rebuild: the memories are in PostgreSQL.
    - name: data
      {{- with .Values.storage.postgres.cacheSizeLimit }}
      emptyDir:
        sizeLimit: {{ . | quote }}
      {{- else }}
      emptyDir: {}
      {{- end }}
    {{- else if not .Values.persistence.enabled }}
    - name: data
      emptyDir: {}
    {{- end }}
    {{- if eq .Values.auth.mode "tokensFile" }}
    # A Secret volume: an edit of the Secret reaches the file within the
    # kubelet's sync period, and memgate applies it without a restart.
    - name: tokens
      secret:
        secretName: {{ include "memgate.authSecret" . }}
        defaultMode: 0440
        items:
          - key: {{ .Values.auth.tokensFileKey }}
            path: tokens.jsonl
    {{- end }}
    {{- if $files }}
    - name: files
      configMap:
        name: {{ $fullname }}-files
    {{- end }}
  {{- end }}
  {{- with .Values.nodeSelector }}
  nodeSelector:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.affinity }}
  affinity:
    {{- toYaml . | nindent 4 }}
  {{- end }}
  {{- with .Values.tolerations }}
  tolerations:
    {{- toYaml . | nindent 4 }}
  {{- end }}
{{- end }}
