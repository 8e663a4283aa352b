{{/* Labels on every object; component is csp, proxy, owner or certs. */}}
{{- define "fedpca.labels" -}}
app.kubernetes.io/name: fedpca
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/version: {{ .root.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .root.Release.Service }}
app.kubernetes.io/component: {{ .component }}
helm.sh/chart: {{ printf "%s-%s" .root.Chart.Name .root.Chart.Version }}
{{- end }}

{{- define "fedpca.selector" -}}
app.kubernetes.io/name: fedpca
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{- define "fedpca.image" -}}
{{ printf "%s:%s" .Values.image.repository .Values.image.tag | quote }}
{{- end }}

{{/* The Secret holding one node's credentials. */}}
{{- define "fedpca.secretName" -}}
{{ printf "%s%s-%s" .root.Values.certs.secretPrefix .role .id }}
{{- end }}

{{/* The claims the demo's certificate Job writes. */}}
{{- define "fedpca.certsClaim" -}}{{ .Release.Name }}-certs{{- end }}
{{- define "fedpca.caClaim" -}}{{ .Release.Name }}-ca{{- end }}

{{/*
The pod-level pieces every node shares: its security context, the volume "in"
holding its credentials as mounted (a Secret, or the demo's claim), and the
in-memory volume "certs" its init container copies them into, 0600 and owned
by the node's user (a Secret's files are root's; the nodes refuse a key that
others can read).
*/}}
{{- define "fedpca.podCommon" -}}
securityContext:
  {{- toYaml .root.Values.podSecurityContext | nindent 2 }}
{{- with .root.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .root.Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
initContainers:
  - name: certs
    image: {{ include "fedpca.image" .root }}
    imagePullPolicy: {{ .root.Values.image.pullPolicy }}
    args: [certs, --copy-from, {{ printf "/in/%s" .from | quote }}, --out, /certs]
    {{- if .env }}
    env:
      {{- toYaml .env | nindent 6 }}
    {{- end }}
    securityContext:
      {{- toYaml .root.Values.securityContext | nindent 6 }}
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {memory: 64Mi}
    volumeMounts:
      - {name: in, mountPath: /in, readOnly: true}
      - {name: certs, mountPath: /certs}
{{- end }}

{{/* The volumes of podCommon: "in" and "certs", then /tmp. */}}
{{- define "fedpca.certVolumes" -}}
- name: certs
  emptyDir: {medium: Memory, sizeLimit: 1Mi}
- name: tmp
  emptyDir: {sizeLimit: 64Mi}
{{- if .root.Values.certs.generate }}
- name: in
  persistentVolumeClaim:
    claimName: {{ include "fedpca.certsClaim" .root }}
    readOnly: true
{{- else if .byIndex }}
- name: in
  projected:
    defaultMode: 0440
    sources:
      {{- range $i, $id := .ids }}
      - secret:
          name: {{ include "fedpca.secretName" (dict "root" $.root "role" $.role "id" $id) }}
          items:
            - {key: ca.pem, path: {{ printf "by-index/%d/ca.pem" $i }}}
            - {key: cert.pem, path: {{ printf "by-index/%d/cert.pem" $i }}}
            - {key: key.pem, path: {{ printf "by-index/%d/key.pem" $i }}}
      {{- end }}
{{- else }}
- name: in
  secret:
    secretName: {{ include "fedpca.secretName" (dict "root" .root "role" .role "id" (first .ids)) }}
    defaultMode: 0440
    items:
      - {key: ca.pem, path: {{ printf "%s-%s/ca.pem" .role (first .ids) }}}
      - {key: cert.pem, path: {{ printf "%s-%s/cert.pem" .role (first .ids) }}}
      - {key: key.pem, path: {{ printf "%s-%s/key.pem" .role (first .ids) }}}
{{- end }}
{{- end }}

{{/* A node container's common settings: image, env, security, probes. */}}
{{- define "fedpca.nodeCommon" -}}
image: {{ include "fedpca.image" .root }}
imagePullPolicy: {{ .root.Values.image.pullPolicy }}
env:
  - {name: FEDPCA_LOG_JSON, value: {{ .root.Values.logJSON | quote }}}
  - {name: FEDPCA_LOG_LEVEL, value: {{ .root.Values.logLevel | quote }}}
  - {name: FEDPCA_ALLOW_NO_NOISE, value: {{ .root.Values.allowNoNoise | quote }}}
  - {name: GOMEMLIMIT, value: {{ .goMemLimit | quote }}}
  {{- with .env }}
  {{- toYaml . | nindent 2 }}
  {{- end }}
securityContext:
  {{- toYaml .root.Values.securityContext | nindent 2 }}
resources:
  {{- toYaml .resources | nindent 2 }}
{{- $health := list "/fedpca" "health" "--addr" (printf "127.0.0.1:%d" (int .port)) "--certs" "/certs" "--expect" .role }}
startupProbe:
  exec: {command: {{ toJson $health }}}
  periodSeconds: 2
  timeoutSeconds: {{ .root.Values.probes.timeoutSeconds }}
  failureThreshold: {{ .root.Values.probes.startupFailureThreshold }}
readinessProbe:
  exec: {command: {{ toJson $health }}}
  periodSeconds: {{ .root.Values.probes.periodSeconds }}
  timeoutSeconds: {{ .root.Values.probes.timeoutSeconds }}
  failureThreshold: 2
livenessProbe:
  exec: {command: {{ toJson $health }}}
  periodSeconds: {{ .root.Values.probes.periodSeconds }}
  timeoutSeconds: {{ .root.Values.probes.timeoutSeconds }}
  failureThreshold: {{ .root.Values.probes.failureThreshold }}
{{- end }}

{{/* The arguments every node daemon takes. */}}
{{- define "fedpca.nodeArgs" -}}
- --certs
- /certs
- --state
- /state
{{- if .Values.metricsPort }}
- --metrics-listen
- {{ printf ":%d" (int .Values.metricsPort) | quote }}
{{- end }}
{{- end }}

{{/* The claim template of a node's state. */}}
{{- define "fedpca.stateClaim" -}}
- metadata:
    name: state
  spec:
    accessModes: [ReadWriteOnce]
    {{- with .root.Values.persistence.storageClass }}
    storageClassName: {{ . }}
    {{- end }}
    resources:
      requests:
        storage: {{ .storage }}
{{- end }}

{{/* Operators' ports: ingress rules for them. */}}
{{- define "fedpca.operatorIngress" -}}
{{- if and .Values.networkPolicy.operatorFrom .Values.metricsPort }}
- from:
    {{- toYaml .Values.networkPolicy.operatorFrom | nindent 4 }}
  ports:
    - {port: {{ .Values.metricsPort }}, protocol: TCP}
    {{- if and .Values.proxy.enabled .Values.proxy.statusPort }}
    - {port: {{ .Values.proxy.statusPort }}, protocol: TCP}
    {{- end }}
{{- end }}
{{- end }}

{{/* Name resolution, for the peers given by DNS name. */}}
{{- define "fedpca.dnsEgress" -}}
- ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end }}
