#!/usr/bin/env bash
# make e2e-k8s: fedpca's Helm chart on a real single-node Kubernetes, each
# node installed by its own organisation.
#
#   build     the cluster's binaries from Go modules (cached: deploy/k8s/build.sh)
#   image     a static fedpca and its FROM-scratch image, and the pods' sandbox image
#   bring-up  etcd, the control plane, a containerd of its own, the kubelet and
#             kube-proxy, all inside a network namespace made here; the images
#             side-loaded (no registry)
#   dry-run   every manifest the chart renders (a member, the proxy, an owner
#             from a Secret, an owner from PostgreSQL, the demo's certificate
#             Job, a member from the demo's claim) applied with --dry-run=server
#   demo      the one-cluster demo: a certificate Job (role certs, one CA) and
#             three members reading their directories of its claim, helm test
#   readme    README.md's "Deploy on Kubernetes" block, run as written: eight
#             organisations, each with its own CA (fedpca certs init, issue,
#             export, import); each committee member, the proxy and each
#             hospital a release of its own in its organisation's namespace;
#             helm test, a PCA job at epsilon 1
#   isolation each member a release of its own in its own namespace under its
#             own CA; each node's key in one Secret only (its namespace's,
#             cert.pem and key.pem), referenced by its own pod only, and the
#             only key among the files the kubelet gave that pod; no pod with
#             a service-account token (nor any hook's); no other organisation's
#             namespace (its service account, its admin) can read a member's
#             Secret
#   upgrade   a rolling upgrade of every release (noise may be switched off)
#   pca       a PCA job, noise off, checked against the non-private run; the
#             proxy's pod is deleted in the middle of it (two uploads acknowledged)
#   dca       a DCA job, noise off, checked likewise, with one member stopped by
#             its operator: 2 of 3 switch; a drain of the node meanwhile is
#             refused by the other two members' own disruption budgets
#   uninstall every release
# then takes the cluster down and checks that the machine is as it was found:
# no process, network namespace, link, iptables rule, mount, cgroup or image
# left, Docker still answering. Each step prints its time.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
[ "$(id -u)" = 0 ] || { echo "e2e-k8s: needs root (a network namespace, mounts, cgroups)" >&2; exit 1; }
for c in nsenter ip iptables-save containerd ctr runc openssl docker jq; do
  command -v "$c" >/dev/null || { echo "e2e-k8s: $c is missing (Debian: containerd runc containernetworking-plugins iptables iproute2 openssl docker.io jq)" >&2; exit 1; }
done
[ -x /usr/lib/cni/bridge ] || { echo "e2e-k8s: /usr/lib/cni/bridge is missing (Debian: containernetworking-plugins)" >&2; exit 1; }
exec 9>/run/fedpca-e2e-k8s.lock
flock -n 9 || { echo "e2e-k8s: another e2e-k8s is running" >&2; exit 1; }

script_name=e2e-k8s
NETNS=fedpca-e2e-$$
WORK=$(mktemp -d /tmp/fedpca-k8s.XXXXXX)
trap 'rm -rf "$WORK"' EXIT   # until teardown's trap below
chmod 755 "$WORK"
image=fedpca:e2e-$$
# shellcheck source=deploy/k8s/cluster.sh
. "$root/deploy/k8s/cluster.sh"

t0=$(date +%s%N); step_ns=$t0; step_name=""; times=()
die() { echo "e2e-k8s: $*" >&2; exit 1; }
log() { printf '[e2e-k8s %6.1fs] %s\n' "$(( $(date +%s%N) - t0 ))e-9" "$*"; }
step() { # ends the running step (its time is printed and kept) and starts the next
  local now; now=$(date +%s%N)
  if [ -n "$step_name" ]; then
    local s; s=$(printf '%.1f' "$(( now - step_ns ))e-9")
    times+=("$(printf '%-10s %7s s' "$step_name" "$s")")
    log "step $step_name: ${s} s"
  fi
  # E2E_K8S_STOP_AFTER=STEP fails the run there: to check the cleanup of a
  # run that fails with its pods still up.
  if [ -n "$step_name" ] && [ "$step_name" = "${E2E_K8S_STOP_AFTER:-}" ]; then
    step_name=""; echo "e2e-k8s: stopping after $E2E_K8S_STOP_AFTER, as E2E_K8S_STOP_AFTER asks" >&2; exit 1
  fi
  step_name=$1; step_ns=$now
  [ -n "$step_name" ] && log "step $step_name: $2"
  return 0
}

# What the machine looks like before: compared after the cluster is gone.
# Other sessions' Docker containers may come and go meanwhile: their links
# (veth*, br-*) and rules (DOCKER*, br-*) are left out; ours would be KUBE-*,
# CNI-*, cni0, node0.
snapshot() (
  set +e +o pipefail
  echo "== links"; ip -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep -Ev '^(veth|br-)' | sort
  echo "== netns"; ip netns list | awk '{print $1}' | grep fedpca-e2e | sort
  echo "== /run/netns"; ls -d /run/netns 2>/dev/null; awk '$5 == "/run/netns" {print $5}' /proc/self/mountinfo
  echo "== iptables"; { iptables-save; iptables-legacy-save; } 2>/dev/null | grep -v '^#' | grep -Ev 'DOCKER|br-|docker' | sed 's/\[[0-9]*:[0-9]*\]//' | sort
  echo "== mounts"; awk -v w="$WORK" 'index($5, w) == 1 || $5 ~ /fedpca-e2e/ {print $5}' /proc/self/mountinfo | sort
  echo "== cgroups"; ls -d /sys/fs/cgroup/*/kubepods 2>/dev/null
  # Docker's containerd puts its shims' sockets in /run/containerd/s too
  # (making the directories if need be): those another session's containers
  # listen on, and the two directories, are not ours to compare.
  echo "== fixed paths"; find /run/containerd /var/lib/cni /var/lib/kubelet "$HOME/.kube" -maxdepth 3 2>/dev/null |
    grep -vxF -f <(echo /run/containerd; echo /run/containerd/s; awk 'NR > 1 && $8 ~ "^/run/containerd/s/" {print $8}' /proc/net/unix) | sort
  echo "== images"; docker images -q "$image" fedpca.local/pause:e2e 2>/dev/null
  echo "== logs"; ls -d /var/log/containers /var/log/pods 2>/dev/null; ls /var/log/containers /var/log/pods 2>/dev/null | sort
  # (the patterns' last character in brackets: grep's own command line does not match)
  echo "== processes"; grep -las -e "${WORK%?}[${WORK: -1}]" -e "${NETNS%?}[${NETNS: -1}]" /proc/[0-9]*/cmdline 2>/dev/null |
    while read -r f; do echo "${f%/cmdline} $(tr '\0' ' ' <"$f" 2>/dev/null | cut -c1-120)"; done
)
snapshot >"$WORK/before"

teardown() {
  local status=$?
  set +e
  step "" ""
  if [ "$status" -ne 0 ] && [ -f "$WORK/admin.conf" ]; then
    log "failed (exit $status): the cluster's state"
    kc get nodes,pods,pvc,svc -A -o wide 2>&1 | head -60
    kc get events -A --sort-by .lastTimestamp 2>&1 | tail -25
    for l in kubelet containerd kube-apiserver; do echo "--- $l"; tail -15 "$WORK/log/$l.log" 2>/dev/null; done
    for p in proxy-op/proxy-0 csp-op-1/csp-1-0 hospital-a/hospital-a-0; do echo "--- $p"; kc -n "${p%/*}" logs "${p#*/}" --all-containers --tail 15 2>&1; done
  fi
  local td=$(date +%s%N)
  cluster_down
  docker rmi -f "$image" fedpca.local/pause:e2e >/dev/null 2>&1
  snapshot >"$WORK.after" 2>&1
  local diff; diff=$(diff "$WORK/before" "$WORK.after")
  rm -f "$WORK.after"
  if [ -n "${KEEP:-}" ]; then echo "kept $WORK"; else rm -rf "$WORK"; fi
  rm -f /run/fedpca-e2e-k8s.lock
  times+=("$(printf '%-10s %7s s' cleanup "$(printf '%.1f' "$(( $(date +%s%N) - td ))e-9")")")
  if [ -n "$diff" ]; then
    echo "e2e-k8s: the machine is not as it was found:" >&2; echo "$diff" >&2; status=1
  elif ! docker info >/dev/null 2>&1; then
    echo "e2e-k8s: docker info fails after the run" >&2; status=1
  else
    log "cleanup: the machine is as it was found (processes, namespace, links, iptables, mounts, cgroups, images); docker info answers"
  fi
  echo "== e2e-k8s times"; printf '  %s\n' "${times[@]}"
  printf '  %-10s %7.1f s\n' total "$(( $(date +%s%N) - t0 ))e-9"
  [ "$status" = 0 ] && echo "e2e-k8s: ok" || echo "e2e-k8s: FAILED" >&2
  exit "$status"
}
trap teardown EXIT
trap 'exit 130' INT TERM

step build "the cluster's binaries (Go modules; cached between runs)"
BIN=$("$root/deploy/k8s/build.sh" | tail -1)

step image "a static fedpca, its FROM-scratch image and the sandbox image, saved for side-loading"
mkdir -p "$WORK/img/rootfs/state" "$WORK/img/rootfs/certs" "$WORK/img/rootfs/ca" "$WORK/img/rootfs/out" "$WORK/pause" "$WORK/bin"
CGO_ENABLED=0 go build -trimpath -o "$WORK/img/fedpca" ./cmd/fedpca
docker build -q -t "$image" -f deploy/Dockerfile "$WORK/img" >/dev/null
cp "$BIN/pause" "$WORK/pause/pause"
printf 'FROM scratch\nCOPY pause /pause\nENTRYPOINT ["/pause"]\n' >"$WORK/pause/Dockerfile"
docker build -q -t fedpca.local/pause:e2e "$WORK/pause" >/dev/null
docker save -o "$WORK/images.tar" "$image" fedpca.local/pause:e2e
docker rmi -f "$image" fedpca.local/pause:e2e >/dev/null

step bring-up "etcd, API server, controllers, scheduler, containerd, kubelet, kube-proxy in netns $NETNS"
cluster_up
side_load "$WORK/images.tar"
# The README's block installs the chart's default image, fedpca:latest: a
# tag in this cluster's containerd only.
ctr -a "$WORK/containerd/containerd.sock" -n k8s.io images tag "docker.io/library/$image" docker.io/library/fedpca:latest >/dev/null
# The commands the README's block calls: kubectl and helm against this
# cluster, fedpca from the image's binary, all in the namespace.
cat >"$WORK/bin/kubectl" <<W
#!/bin/sh
HOME="$WORK/home" exec nsenter --net=/run/netns/$NETNS -- "$BIN/kubectl" --kubeconfig "$WORK/admin.conf" "\$@"
W
cat >"$WORK/bin/helm" <<W
#!/bin/sh
HOME="$WORK/home" KUBECONFIG="$WORK/admin.conf" HELM_CACHE_HOME="$WORK/helm/cache" HELM_CONFIG_HOME="$WORK/helm/config" HELM_DATA_HOME="$WORK/helm/data" \
  exec nsenter --net=/run/netns/$NETNS -- "$BIN/helm" "\$@"
W
cat >"$WORK/bin/fedpca" <<W
#!/bin/sh
exec nsenter --net=/run/netns/$NETNS -- "$WORK/img/fedpca" "\$@"
W
chmod +x "$WORK/bin/"*
export PATH="$WORK/bin:$PATH"
# No storage provisioner here: the claims bind to hostPath volumes made now,
# owned by the nodes' user.
for i in $(seq 1 14); do
  mkdir -p "$WORK/pv/$i" && chown 65532:65532 "$WORK/pv/$i" && chmod 700 "$WORK/pv/$i"
  printf 'apiVersion: v1\nkind: PersistentVolume\nmetadata: {name: pv-%s}\nspec:\n  capacity: {storage: 1Gi}\n  accessModes: [ReadWriteOnce]\n  persistentVolumeReclaimPolicy: Retain\n  hostPath: {path: "%s", type: Directory}\n---\n' "$i" "$WORK/pv/$i"
done | kubectl apply -f - >/dev/null
kubectl get nodes -o wide

step dry-run "every rendered manifest, applied with --dry-run=server"
chart=deploy/helm/fedpca
kubectl create namespace fedpca-dry >/dev/null
"$WORK/img/fedpca" certs init --org "$WORK/dry-org" >/dev/null
trust=(--set-file "trust=$WORK/dry-org/trust.json")
dry() { # name, then helm template's flags
  local name=$1; shift
  helm lint --strict "$chart" "$@" >"$WORK/lint-$name.log" || { cat "$WORK/lint-$name.log"; return 1; }
  helm template "dry-$name" "$chart" -n fedpca-dry --set image.tag="e2e-$$" "$@" >"$WORK/dry-$name.yaml"
  local kinds; kinds=$(grep -c '^kind:' "$WORK/dry-$name.yaml")
  [ "$kinds" -gt 0 ] || die "$name rendered nothing"
  kubectl apply --dry-run=server -n fedpca-dry -f "$WORK/dry-$name.yaml" >"$WORK/dry-$name.out"
  log "dry-run $name: $kinds objects accepted ($(grep '^kind:' "$WORK/dry-$name.yaml" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $3; sep=", "}'))"
}
dry csp "${trust[@]}" --set role=csp,csp.id=csp-2,networkPolicy.proxyNamespace=proxy-op \
  --set 'networkPolicy.operatorFrom[0].namespaceSelector.matchLabels.team=ops'
dry proxy "${trust[@]}" --set role=proxy --set 'networkPolicy.committeeNamespaces={csp-op-1,csp-op-2,csp-op-3}' \
  --set 'networkPolicy.proxyFrom[0].ipBlock.cidr=10.0.0.0/8'
dry owner "${trust[@]}" --set role=owner,owner.data.secret=hospital-a-data,networkPolicy.proxyNamespace=proxy-op
dry owner-postgres "${trust[@]}" --set role=owner \
  --set 'owner.datasets[0].schema=schema.json,owner.datasets[0].source=postgres://fedpca@db.example:5432/clinic?table=patients' \
  --set owner.data.secret=schema,owner.postgresPassword.secret=db-password \
  --set 'networkPolicy.ownerTo[0].ipBlock.cidr=192.0.2.10/32'
dry demo-certs --set role=certs
dry demo-csp --set role=csp,certs.claim=demo-certs
kubectl delete namespace fedpca-dry --wait=false >/dev/null

# The pods (and the Jobs', StatefulSets' pod templates) of a kubectl JSON
# object or list that hold a service-account token: one line each, naming
# the pod and how.
token_holders() {
  jq -r '(.items // [.])[] | select(.kind | IN("Pod", "Job", "StatefulSet", "Deployment", "DaemonSet", "ReplicaSet")) |
    (.spec.template.spec // .spec) as $s | "\(.metadata.namespace // "-")/\(.kind)/\(.metadata.name)" as $n |
    (if $s.automountServiceAccountToken != false then "\($n): automountServiceAccountToken is not false" else empty end),
    ($s.volumes[]? | select(any(.projected.sources[]?; .serviceAccountToken)) | "\($n): volume \(.name) projects a service-account token"),
    (($s.containers + ($s.initContainers // []))[] | .name as $c | .volumeMounts[]? |
      select(.mountPath | startswith("/var/run/secrets/kubernetes.io")) | "\($n): container \($c) mounts \(.mountPath)")'
}
# The hooks of a release (its helm test pod, the demo's Job), as a kubectl
# JSON list.
hooks() {
  helm get hooks "$1" -n "$2" >"$WORK/hooks.yaml"
  if grep -q '^kind:' "$WORK/hooks.yaml"; then kubectl create --dry-run=client -o json -f "$WORK/hooks.yaml"; fi | jq -s '{items: [.[] | .items // [.] | .[]]}'
}

step demo "the one-cluster demo: a certificate Job (one CA), three members from its claim, helm test"
kubectl create namespace fedpca-demo >/dev/null
helm install demo-certs "$chart" -n fedpca-demo --set role=certs,'certs.nodes={csp/csp-1,csp/csp-2,csp/csp-3}' --wait --timeout 3m >/dev/null
for i in 1 2 3; do
  helm install "csp-$i" "$chart" -n fedpca-demo --set "role=csp,csp.id=csp-$i,certs.claim=demo-certs" >/dev/null
done
wait_for "the demo's three member pods" 60 sh -c '[ "$(kubectl -n fedpca-demo get pods -l app.kubernetes.io/component=csp -o name | wc -l)" = 3 ]'
kubectl -n fedpca-demo wait --for=condition=Ready pod -l app.kubernetes.io/component=csp --timeout 3m >/dev/null
for i in 1 2 3; do helm test "csp-$i" -n fedpca-demo >/dev/null; done
kubectl -n fedpca-demo get pods,pvc --no-headers | awk '{print "  " $1, $2, $3}'
held=$( { kubectl -n fedpca-demo get pods -o json | token_holders; hooks demo-certs fedpca-demo | token_holders; hooks csp-1 fedpca-demo | token_holders; } )
[ -z "$held" ] || die "service-account tokens in the demo: $held"
for i in 3 2 1; do helm uninstall "csp-$i" -n fedpca-demo --wait >/dev/null; done
helm uninstall demo-certs -n fedpca-demo --wait >/dev/null
kubectl delete namespace fedpca-demo --wait=true --timeout 3m >/dev/null
log "demo: the Job issued the certificates, three members served from their directories of its claim, helm test passed; no pod or hook with a token"

step readme "README.md's \"Deploy on Kubernetes\" block, as written"
marker='<!-- e2e-k8s: deploy/k8s/e2e.sh runs this block as written -->'
awk -v m="$marker" '$0 == m {f = 1; next} f && !b && /^```/ {b = 1; next} b && /^```/ {exit} b {print}' README.md >"$WORK/readme.sh"
[ -s "$WORK/readme.sh" ] || die "README.md has no block after: $marker"
mkdir -p "$WORK/readme/deploy" && cp -r deploy/helm "$WORK/readme/deploy/"
(cd "$WORK/readme" && bash -euo pipefail "$WORK/readme.sh") >"$WORK/readme.log" 2>&1 || { tail -40 "$WORK/readme.log"; die "the README's block failed (above: the end of its output)"; }
r=$WORK/readme
[ -s "$r/out/pca/result.json" ] || die "the README's job wrote no result"
members=(csp-op-1/csp-1 csp-op-2/csp-2 csp-op-3/csp-3)
releases=("${members[@]}" proxy-op/proxy hospital-a/hospital-a hospital-b/hospital-b hospital-c/hospital-c)
proxy_addr="$(kubectl -n proxy-op get svc proxy -o jsonpath='{.spec.clusterIP}'):7000"
log "the README's block ran: ${#releases[@]} releases in ${#releases[@]} namespaces, helm test passed, a PCA job at epsilon 1 done (proxy at $proxy_addr)"
proxy_log() { kubectl -n proxy-op logs proxy-0 -c proxy 2>/dev/null; }
committee_key() { proxy_log | grep '"committee key ready"' | tail -1 | grep -o '"key":"[^"]*"'; }
key_before=$(committee_key)
[ -n "$key_before" ] || die "the proxy logged no committee key"

step isolation "each organisation's key in its own namespace's Secret and pod only; no service-account token"
# Each node as its organisation issued it, one a line: its namespace (the
# organisation's), role, ID (its release's name too), SPIFFE ID, key
# fingerprint and the SHA-256 of its key file.
nodes=$(for rel in "${releases[@]}"; do
  ns=${rel%/*} id=${rel#*/}
  case $ns in csp-op-*) role=csp ;; proxy-op) role=proxy ;; *) role=owner ;; esac
  "$WORK/img/fedpca" certs show --certs "$r/orgs/$ns/$role-$id" |
    awk -v pre="$ns $role $id" -v h="$(sha256sum <"$r/orgs/$ns/$role-$id/key.pem" | cut -c1-64)" \
      'NR == 1 {spiffe = $1} NR == 2 {print pre, spiffe, $2, h}'
done)
[ "$(wc -l <<<"$nodes")" = "${#releases[@]}" ] || die "fedpca certs show gave no identity for every node: $nodes"
# Each member: the only release in its namespace; its pod runs under the key
# its organisation issued, from a certificate that its organisation's CA
# signed and the other members' organisations' CAs did not.
for m in "${members[@]}"; do
  ns=${m%/*} rel=${m#*/}
  [ "$(helm list -n "$ns" -q)" = "$rel" ] || die "namespace $ns holds the releases $(helm list -n "$ns" -q | xargs), not $rel alone"
  read -r _ _ _ id key _ <<<"$(grep "^$ns " <<<"$nodes")"
  got=$(kubectl -n "$ns" logs "$rel-0" -c csp | jq -Rr 'fromjson? | select(.["@message"] == "identity") | "\(.id) \(.key)"' | tail -1)
  [ "$got" = "$id $key" ] || die "$ns/$rel-0 runs as '$got', not as its organisation issued it: $id $key"
  kubectl -n "$ns" get secret "fedpca-csp-$rel" -o jsonpath='{.data.cert\.pem}' | base64 -d >"$WORK/$rel.cert.pem"
  for o in "${members[@]}"; do
    if openssl verify -CAfile "$r/orgs/${o%/*}/ca/ca.pem" "$WORK/$rel.cert.pem" >/dev/null 2>&1; then
      [ "$o" = "$m" ] || die "$rel's certificate verifies under ${o%/*}'s CA too"
    else
      [ "$o" != "$m" ] || die "$rel's certificate does not verify under its own organisation's CA ($ns)"
    fi
  done
done
cas=$(for m in "${members[@]}"; do sha256sum <"$r/orgs/${m%/*}/ca/ca.pem"; done | sort -u | wc -l)
[ "$cas" = 3 ] || die "the three members' organisations share a CA ($cas distinct)"
for h in hospital-a hospital-b hospital-c; do
  kubectl -n $h logs $h-0 -c owner | grep '"owner running"' | grep -q 'each member of its own trust domain' ||
    die "$h does not require a committee of distinct organisations (committeeDistinctDomains): $(kubectl -n $h logs $h-0 -c owner | grep '"owner running"')"
done
log "each member a release of its own in its own namespace, under its own CA, running under the key its organisation issued; each owner refuses a committee of fewer organisations"
# Every Secret in the cluster that holds a key.pem: it must be one node's,
# in that node's namespace, holding cert.pem and key.pem only; and every
# node's key is in exactly one Secret.
kubectl get secrets -A -o json | jq -r '.items[] | select(.data["key.pem"]) | "\(.metadata.namespace) \(.metadata.name) \(.data | keys | join(",")) \(.data["key.pem"])"' |
  while read -r ns name keys b64; do
    h=$(base64 -d <<<"$b64" | sha256sum | cut -c1-64)
    owner=$(awk -v h="$h" '$6 == h {print $1 "/" $3}' <<<"$nodes")
    [ -n "$owner" ] || die "Secret $ns/$name holds a key.pem of no node"
    [ "${owner%/*}" = "$ns" ] || die "Secret $ns/$name holds the key of $owner, another organisation's node"
    [ "$keys" = "cert.pem,key.pem" ] || die "Secret $ns/$name holds $keys, not cert.pem and key.pem only"
    echo "$owner"
  done >"$WORK/key-secrets"
sort "$WORK/key-secrets" | uniq -c | awk '$1 != 1 {exit 1}' || die "a node's key is in more than one Secret: $(sort "$WORK/key-secrets" | uniq -d)"
[ "$(wc -l <"$WORK/key-secrets")" = "${#releases[@]}" ] || die "only $(wc -l <"$WORK/key-secrets") of the ${#releases[@]} nodes' keys are in Secrets"
# Each pod references its own key Secret and no other fedpca- Secret (in
# volumes, projected sources, env), and holds no service-account token.
kubectl get pods -A -o json >"$WORK/pods.json"
nodepods='.items[] | select(.metadata.labels["app.kubernetes.io/component"] != "test")'
[ "$(jq "[$nodepods] | length" "$WORK/pods.json")" = "${#releases[@]}" ] ||
  die "$(jq "[$nodepods] | length" "$WORK/pods.json") pods, not ${#releases[@]}: $(jq -r "$nodepods | .metadata.name" "$WORK/pods.json" | xargs)"
jq -r "$nodepods"' | "\(.metadata.namespace) \(.metadata.name) \(.metadata.uid) \([(.spec.volumes[]? | .secret.secretName // empty, (.projected.sources[]?.secret.name // empty)),
  ((.spec.containers + (.spec.initContainers // []))[] | (.env[]?.valueFrom.secretKeyRef.name // empty), (.envFrom[]?.secretRef.name // empty))] | unique | join(","))"' "$WORK/pods.json" |
  while read -r ns pod uid secrets; do
    read -r _ role id _ _ hash <<<"$(grep "^$ns " <<<"$nodes")"
    [ "$pod" = "$id-0" ] || die "pod $ns/$pod: not the node of its namespace ($id-0)"
    keyed=$(tr , '\n' <<<"$secrets" | grep '^fedpca-' | xargs)
    [ "$keyed" = "fedpca-$role-$id" ] || die "pod $ns/$pod references the key Secrets '$keyed', not its own fedpca-$role-$id alone"
    # What the kubelet gave the pod: every private key among its volumes'
    # files is its own.
    vols=$WORK/kubelet/pods/$uid/volumes
    [ -d "$vols/kubernetes.io~secret/in" ] || die "no key volume for $ns/$pod in $vols"
    if find "$vols" -path '*serviceaccount*' -o -name token | grep -q .; then die "pod $ns/$pod has a token file: $(find "$vols" -name token)"; fi
    n=0
    while read -r f; do
      [ "$(sha256sum <"$f" | cut -c1-64)" = "$hash" ] || die "pod $ns/$pod holds another key than its own: ${f#"$vols"/}"
      n=$((n + 1))
    done < <(grep -rlZ -- '-----BEGIN PRIVATE KEY-----' "$vols" | tr '\0' '\n')
    [ "$n" -ge 2 ] || die "pod $ns/$pod: $n copies of its own key among its volumes, not 2 (the Secret's, the init container's)"
  done
held=$( { token_holders <"$WORK/pods.json"; for rel in "${releases[@]}"; do hooks "${rel#*/}" "${rel%/*}" | token_holders; done; } )
[ -z "$held" ] || die "service-account tokens: $held"
# The check above finds a token where Kubernetes gives one by default.
probe=$(kubectl -n csp-op-1 run token-probe --image fedpca.local/pause:e2e --restart Never --dry-run=server -o json | token_holders)
[ -n "$probe" ] || die "the token check misses the token of a pod that keeps the default"
log "every key in one Secret, of its own namespace (cert.pem and key.pem); each pod references and holds its own key alone; no pod or hook holds a service-account token (a pod that keeps the default would: $(head -1 <<<"$probe"), ...)"
# RBAC: no organisation's namespace (its service account, its admin bound
# to it alone) may read a member's Secret in another's; each admin reads its
# own node's.
can() { kubectl auth can-i get "secret/$3" -n "$2" --as "$1" 2>/dev/null </dev/null || true; }
while read -r ns role id _; do
  kubectl -n "$ns" create rolebinding org-admin --clusterrole admin --user "admin@$ns" >/dev/null </dev/null
  [ "$(can "admin@$ns" "$ns" "fedpca-$role-$id")" = yes ] || die "admin@$ns cannot read its own node's Secret: the checks below would prove nothing"
  for m in "${members[@]}"; do
    [ "${m%/*}" = "$ns" ] && continue
    for who in "system:serviceaccount:$ns:default" "admin@$ns"; do
      [ "$(can "$who" "${m%/*}" "fedpca-csp-${m#*/}")" = no ] || die "$who can read ${m%/*}'s Secret fedpca-csp-${m#*/}"
    done
  done
done <<<"$nodes"
log "no organisation's namespace (its service account, its admin) may read a member's Secret in another's; each admin reads its own node's"

step upgrade "helm upgrade of every release (allowNoNoise=true), rolling; hospital-c's rows now from a claim"
# hospital-c's rows move from its Secret to a volume of its own (a claim
# bound to a hostPath volume holding the same files), read-only.
mkdir -p "$WORK/data-c" && cp "$r/data/schema.json" "$r/data/hospital-c.csv" "$WORK/data-c/" && chmod 755 "$WORK/data-c"
kubectl apply -f - >/dev/null <<Y
apiVersion: v1
kind: PersistentVolume
metadata: {name: pv-data-c}
spec:
  capacity: {storage: 1Gi}
  accessModes: [ReadOnlyMany]
  hostPath: {path: "$WORK/data-c", type: Directory}
---
apiVersion: v1
kind: PersistentVolumeClaim
metadata: {name: hospital-c-data, namespace: hospital-c}
spec:
  accessModes: [ReadOnlyMany]
  storageClassName: ""
  volumeName: pv-data-c
  resources: {requests: {storage: 1Gi}}
Y
for rel in "${releases[@]}"; do
  extra=(); [ "$rel" = hospital-c/hospital-c ] && extra=(--set owner.data.secret=,owner.data.existingClaim=hospital-c-data)
  helm upgrade "${rel#*/}" "$r/deploy/helm/fedpca" -n "${rel%/*}" --reuse-values --set allowNoNoise=true "${extra[@]}" --wait --timeout 5m >/dev/null
done
for rel in "${releases[@]}"; do
  kubectl -n "${rel%/*}" rollout status "sts/${rel#*/}" --timeout 5m >/dev/null
done
kubectl get pods -A -l app.kubernetes.io/name=fedpca -o custom-columns=NAMESPACE:.metadata.namespace,POD:.metadata.name,STARTED:.status.startTime,READY:.status.containerStatuses[0].ready --no-headers
log "every release at revision 2: $(helm list -A -o json | jq -r '.[].revision' | sort | uniq -c | xargs)"
# A restarted owner reads the same files from its Secret: its jobs stay
# charged to the same ledger (the budget is not spent again).
for h in hospital-a hospital-b; do
  if kubectl -n $h logs "$h-0" -c owner | grep -F "charged to another source's ledger"; then
    die "$h lost track of its ledger across the upgrade"
  fi
done
log "hospital-a and hospital-b, restarted, still charge their jobs to the same ledgers"
wait_for "the upgraded proxy's committee key" 60 committee_key
[ "$(committee_key)" = "$key_before" ] || die "the committee key changed in the upgrade: $key_before, now $(committee_key)"
log "the committee key is the same after the upgrade: $key_before"

fedpca dataset export wdbc --owners hospital-a,hospital-b,hospital-c --out "$WORK/ref-data" --seed 7 >/dev/null
cmp -s "$WORK/ref-data/all.csv" "$r/data/all.csv" || die "the README's data is not the reference's"
"$WORK/img/fedpca" reference --schema "$r/data/schema.json" --data "$r/data/all.csv" --analysis pca --k 3 --out "$WORK/ref-pca" >/dev/null
"$WORK/img/fedpca" reference --schema "$r/data/schema.json" --data "$r/data/all.csv" --analysis dca --k 1 --out "$WORK/ref-dca" >/dev/null
user_run() { # out, then the job's flags
  local out=$1; shift
  fedpca user run --certs "$r/orgs/research/user-alice" --keys "$r/keys" --proxy "$proxy_addr" --schema "$r/data/schema.json" \
    --owners hospital-a,hospital-b,hospital-c --committee csp-1,csp-2,csp-3 --committee-distinct-domains \
    --out "$out" --deadline 4m --no-noise "$@"
}
uploads() { proxy_log | grep -c '"upload included"' || true; }

step pca "PCA, noise off; the proxy's pod deleted after two acknowledged uploads"
kubectl -n hospital-c scale sts hospital-c --replicas 0 >/dev/null
kubectl -n hospital-c wait --for=delete pod/hospital-c-0 --timeout 120s >/dev/null 2>&1 || true
before=$(uploads)
user_run "$WORK/out/pca" --analysis pca --k 3 >"$WORK/pca.log" 2>&1 &
job=$!
for _ in $(seq 1 240); do
  kill -0 "$job" 2>/dev/null || break
  [ "$(( $(uploads) - before ))" -ge 2 ] && break
  sleep 0.5
done
[ "$(( $(uploads) - before ))" -ge 2 ] || { cat "$WORK/pca.log"; die "no two uploads before the proxy's deletion"; }
log "two uploads acknowledged: deleting pod proxy-op/proxy-0 (grace 0)"
kubectl -n proxy-op delete pod proxy-0 --grace-period 0 --force >/dev/null 2>&1
sleep 2
kubectl -n proxy-op wait --for=condition=Ready pod/proxy-0 --timeout 180s >/dev/null
log "the proxy is back (same claim); starting hospital-c"
kubectl -n hospital-c scale sts hospital-c --replicas 1 >/dev/null
wait "$job" || { cat "$WORK/pca.log"; die "the PCA job failed"; }
"$WORK/img/fedpca" compare --result "$WORK/out/pca/result.json" --reference "$WORK/ref-pca/result.json" --tolerance 1e-9
grep -q '"num_owners": 3' "$WORK/out/pca/result.json" || die "the PCA job lost an upload"
log "PCA matches the non-private run, with all 3 uploads (2 acknowledged before the proxy's deletion; hospital-c's rows from its claim)"

step dca "DCA, noise off; csp-2 stopped by its operator; a drain refused by csp-1's and csp-3's own budgets"
kubectl -n hospital-c wait --for=condition=Ready pod/hospital-c-0 --timeout 180s >/dev/null
# csp-op-2 stops its member (scaled to 0: a deliberate stop, which its own
# budget does not block, agreed with the other members' operators). No one
# budget spans the committee (no cluster holds every member): each member's
# operator keeps its own up, and a drain of the node meanwhile evicts neither
# csp-1 nor csp-3.
kubectl -n csp-op-2 scale sts csp-2 --replicas 0 >/dev/null
kubectl -n csp-op-2 wait --for=delete pod/csp-2-0 --timeout 60s >/dev/null 2>&1 || true
if kubectl drain fedpca-e2e --pod-selector app.kubernetes.io/component=csp --delete-emptydir-data --timeout 8s >"$WORK/drain.log" 2>&1; then
  cat "$WORK/drain.log"; die "a drain evicted a committee member"
fi
kubectl uncordon fedpca-e2e >/dev/null
for m in csp-op-1/csp-1 csp-op-3/csp-3; do
  grep -q "evicting pods/\"${m#*/}-0\" -n \"${m%/*}\".*disruption budget" "$WORK/drain.log" ||
    { cat "$WORK/drain.log"; die "the drain was not refused by ${m#*/}'s disruption budget"; }
  [ "$(kubectl -n "${m%/*}" get pod "${m#*/}-0" -o jsonpath='{.status.phase}')" = Running ] || die "${m#*/}-0 is not running after the refused drain"
done
log "csp-2 stopped by its operator; the drain was refused by csp-1's and csp-3's own budgets (both running)"
user_run "$WORK/out/dca" --analysis dca --k 1 >"$WORK/dca.log" 2>&1 || { cat "$WORK/dca.log"; die "the DCA job failed"; }
[ -z "$(kubectl -n csp-op-2 get pods -o name)" ] || die "csp-2 came back during the job"
switched=$(grep -o 'key switch by [^—]*' "$WORK/dca.log" | tail -1)
case "$switched" in *csp-1*csp-3*) ;; *) cat "$WORK/dca.log"; die "expected a switch by csp-1 and csp-3, got: $switched" ;; esac
"$WORK/img/fedpca" compare --result "$WORK/out/dca/result.json" --reference "$WORK/ref-dca/result.json" --tolerance 1e-9
grep -q '"num_owners": 3' "$WORK/out/dca/result.json" || die "the DCA job lost an upload"
proxy_log | grep -E '"job done"' | tail -1
log "DCA matches the non-private run: $switched (csp-2 stopped)"
kubectl -n csp-op-2 scale sts csp-2 --replicas 1 >/dev/null
wait_for "csp-2's pod" 60 kubectl -n csp-op-2 get pod csp-2-0
kubectl -n csp-op-2 wait --for=condition=Ready pod/csp-2-0 --timeout 180s >/dev/null
log "csp-2 back with its claim"

step uninstall "helm uninstall of every release"
for rel in hospital-c/hospital-c hospital-b/hospital-b hospital-a/hospital-a proxy-op/proxy "${members[@]}"; do
  helm uninstall "${rel#*/}" -n "${rel%/*}" --wait --timeout 3m >/dev/null
done
# The StatefulSets' pods go by garbage collection, after helm returns.
kubectl wait --for=delete pod -A -l app.kubernetes.io/name=fedpca --timeout 180s >/dev/null 2>&1 || true
left=$(kubectl get all,networkpolicy,pdb,configmap,secret -A -l app.kubernetes.io/name=fedpca -o name)
[ -z "$left" ] || die "left after uninstall: $left"
log "uninstalled: no pod, service, statefulset, policy, budget or trust store left; the state claims stay, as StatefulSets leave them: $(kubectl get pvc -A --no-headers | wc -l)"
for rel in "${releases[@]}"; do kubectl delete namespace "${rel%/*}" --wait=false >/dev/null; done
for rel in "${releases[@]}"; do kubectl wait --for=delete "namespace/${rel%/*}" --timeout 3m >/dev/null 2>&1 || true; done
step "" ""
