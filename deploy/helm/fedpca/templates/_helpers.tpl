{{/* Labels on every object; component is csp, proxy, owner, certs or test. */}}
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

{{/*
The release's node: its role's values (csp, proxy or owner), checked once
here. Every template of a node calls it first.
*/}}
{{- define "fedpca.node" -}}
{{- $role := .Values.role }}
{{- if not (has $role (list "csp" "proxy" "owner")) }}
{{- fail (printf "role %q: want csp, proxy or owner (a release runs one node of one organisation), or certs (the demo's certificate Job)" $role) }}
{{- end }}
{{- $v := index .Values $role }}
{{- if not $v.id }}{{ fail (printf "%s.id: name the node (its certificate's ID)" $role) }}{{ end }}
{{- if not .Values.certs.claim }}
{{- if not .Values.trust }}
{{- fail "trust: give the organisation's trust store, --set-file trust=ORG/trust.json (made by fedpca certs init and import)" }}
{{- end }}
{{- $t := fromJson .Values.trust }}
{{- if or (hasKey $t "Error") (not (kindIs "slice" $t.domains)) }}
{{- fail "trust: not a trust store (want the organisation's trust.json, {\"version\": 1, \"domains\": [...]}, from fedpca certs init and import)" }}
{{- end }}
{{- end }}
{{- end }}

{{/* The node's ID. */}}
{{- define "fedpca.id" -}}{{ (index .Values .Values.role).id }}{{- end }}

{{/* The Secret holding the node's key. */}}
{{- define "fedpca.secretName" -}}
{{ printf "%s%s-%s" .Values.certs.secretPrefix .Values.role (include "fedpca.id" .) }}
{{- end }}

{{/* The port the node's health is asked on. */}}
{{- define "fedpca.healthPort" -}}
{{- if eq .Values.role "owner" }}{{ .Values.owner.healthPort }}{{ else }}{{ (index .Values .Values.role).port }}{{ end }}
{{- end }}

{{/*
The pod-level pieces every pod of a node shares (the node's, its helm test's):
no service-account token (no pod of this chart calls the Kubernetes API), the
security context, and the init container that copies the node's credentials
from the volume "in" (the key Secret, or its directory of the demo's claim)
and its trust store (the ConfigMap "trust") into the in-memory volume "certs",
each file 0600 and owned by the node's user (a Secret's files are root's; the
nodes refuse a key that others can read).
*/}}
{{- define "fedpca.podCommon" -}}
automountServiceAccountToken: false
securityContext:
  {{- toYaml .Values.podSecurityContext | nindent 2 }}
{{- with .Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with .Values.affinity }}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end }}
initContainers:
  - name: certs
    image: {{ include "fedpca.image" . }}
    imagePullPolicy: {{ .Values.image.pullPolicy }}
    {{- if .Values.certs.claim }}
    args: [certs, --copy-from, /in, --out, /certs]
    {{- else }}
    args: [certs, --copy-from, /in, --trust, /trust/trust.json, --out, /certs]
    {{- end }}
    securityContext:
      {{- toYaml .Values.securityContext | nindent 6 }}
    resources:
      requests: {cpu: 10m, memory: 16Mi}
      limits: {memory: 64Mi}
    volumeMounts:
      {{- if .Values.certs.claim }}
      - {name: in, mountPath: /in, subPath: {{ printf "%s-%s" .Values.role (include "fedpca.id" .) | quote }}, readOnly: true}
      {{- else }}
      - {name: in, mountPath: /in, readOnly: true}
      - {name: trust, mountPath: /trust, readOnly: true}
      {{- end }}
      - {name: certs, mountPath: /certs}
{{- end }}

{{/*
The volumes of podCommon: "certs" and "tmp", and "in" and "trust": the node's
own key Secret (cert.pem and key.pem only) and its organisation's trust store,
or the demo's claim.
*/}}
{{- define "fedpca.certVolumes" -}}
- name: certs
  emptyDir: {medium: Memory, sizeLimit: 1Mi}
- name: tmp
  emptyDir: {sizeLimit: 64Mi}
{{- if .Values.certs.claim }}
- name: in
  persistentVolumeClaim: {claimName: {{ .Values.certs.claim }}, readOnly: true}
{{- else }}
- name: in
  secret:
    secretName: {{ include "fedpca.secretName" . }}
    defaultMode: 0440
    items:
      - {key: cert.pem, path: cert.pem}
      - {key: key.pem, path: key.pem}
- name: trust
  configMap:
    name: {{ .Release.Name }}-trust
    items:
      - {key: trust.json, path: trust.json}
{{- end }}
{{- end }}

{{/* The node container's common settings: image, env, security, probes. */}}
{{- define "fedpca.nodeCommon" -}}
{{- $v := index .Values .Values.role -}}
image: {{ include "fedpca.image" . }}
imagePullPolicy: {{ .Values.image.pullPolicy }}
env:
  - {name: FEDPCA_LOG_JSON, value: {{ .Values.logJSON | quote }}}
  - {name: FEDPCA_LOG_LEVEL, value: {{ .Values.logLevel | quote }}}
  - {name: FEDPCA_ALLOW_NO_NOISE, value: {{ .Values.allowNoNoise | quote }}}
  - {name: GOMEMLIMIT, value: {{ $v.goMemLimit | quote }}}
  {{- if and (eq .Values.role "owner") .Values.owner.postgresPassword.secret }}
  - name: PGPASSWORD
    valueFrom:
      secretKeyRef: {name: {{ .Values.owner.postgresPassword.secret }}, key: {{ .Values.owner.postgresPassword.key }}}
  {{- end }}
securityContext:
  {{- toYaml .Values.securityContext | nindent 2 }}
resources:
  {{- toYaml $v.resources | nindent 2 }}
{{- $health := list "/fedpca" "health" "--addr" (printf "127.0.0.1:%d" (int (include "fedpca.healthPort" .))) "--certs" "/certs" "--expect" .Values.role }}
startupProbe:
  exec: {command: {{ toJson $health }}}
  periodSeconds: 2
  timeoutSeconds: {{ .Values.probes.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.startupFailureThreshold }}
readinessProbe:
  exec: {command: {{ toJson $health }}}
  periodSeconds: {{ .Values.probes.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.timeoutSeconds }}
  failureThreshold: 2
livenessProbe:
  exec: {command: {{ toJson $health }}}
  periodSeconds: {{ .Values.probes.periodSeconds }}
  timeoutSeconds: {{ .Values.probes.timeoutSeconds }}
  failureThreshold: {{ .Values.probes.failureThreshold }}
{{- end }}

{{/*
NetworkPolicy peers: the pods of a component (csp, proxy) in the namespaces
given (none: the release's own), then further peers.
*/}}
{{- define "fedpca.peers" -}}
{{- $pods := dict "matchLabels" (dict "app.kubernetes.io/name" "fedpca" "app.kubernetes.io/component" .component) }}
{{- $peers := list }}
{{- range .namespaces }}
{{- $peers = append $peers (dict "namespaceSelector" (dict "matchLabels" (dict "kubernetes.io/metadata.name" .)) "podSelector" $pods) }}
{{- else }}
{{- $peers = append $peers (dict "podSelector" $pods) }}
{{- end }}
{{- toYaml (concat $peers .extra) }}
{{- end }}

{{/* Operators' ports: an ingress rule for them. */}}
{{- define "fedpca.operatorIngress" -}}
{{- $ports := list }}
{{- if .Values.metricsPort }}{{ $ports = append $ports .Values.metricsPort }}{{ end }}
{{- if and (eq .Values.role "proxy") .Values.proxy.statusPort }}{{ $ports = append $ports .Values.proxy.statusPort }}{{ end }}
{{- if and .Values.networkPolicy.operatorFrom $ports }}
- from:
    {{- toYaml .Values.networkPolicy.operatorFrom | nindent 4 }}
  ports:
    {{- range $ports }}
    - {port: {{ . }}, protocol: TCP}
    {{- end }}
{{- end }}
{{- end }}

{{/* Name resolution, for the peers given by DNS name. */}}
{{- define "fedpca.dnsEgress" -}}
- ports:
    - {port: 53, protocol: UDP}
    - {port: 53, protocol: TCP}
{{- end }}
