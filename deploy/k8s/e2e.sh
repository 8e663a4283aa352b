#!/usr/bin/env bash
# make e2e-k8s: fedpca's Helm chart on a real single-node Kubernetes.
#
#   build    the cluster's binaries from Go modules (cached: deploy/k8s/build.sh)
#   image    a static fedpca and its FROM-scratch image, and the pods' sandbox image
#   bring-up etcd, the control plane, a containerd of its own, the kubelet and
#            kube-proxy, all inside a network namespace made here; the images
#            side-loaded (no registry)
#   dry-run  every manifest the chart renders (default values, committee only,
#            proxy only, owner only from a Secret, owner from PostgreSQL, the
#            demo's certificate Job) applied with --dry-run=server
#   demo     a committee release whose certificates a pre-install Job makes
#            (certs.generate), helm test
#   readme   README.md's "Deploy on Kubernetes" block, run as written: the
#            committee, the proxy and three owners as separate releases,
#            helm test, a PCA job at epsilon 1
#   upgrade  a rolling upgrade of every release (noise may be switched off)
#   pca      a PCA job, noise off, checked against the non-private run; the
#            proxy's pod is deleted in the middle of it (two uploads acknowledged)
#   dca      a DCA job, noise off, checked likewise, with one committee pod
#            deleted and kept down (node cordoned): 2 of 3 switch; a drain
#            meanwhile is refused by the PodDisruptionBudget
#   uninstall every release
# then takes the cluster down and checks that the machine is as it was found:
# no process, network namespace, link, iptables rule, mount, cgroup or image
# left, Docker still answering. Each step prints its time.
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$(pwd)
[ "$(id -u)" = 0 ] || { echo "e2e-k8s: needs root (a network namespace, mounts, cgroups)" >&2; exit 1; }
for c in nsenter ip iptables-save containerd ctr runc openssl docker; do
  command -v "$c" >/dev/null || { echo "e2e-k8s: $c is missing (Debian: containerd runc containernetworking-plugins iptables iproute2 openssl docker.io)" >&2; exit 1; }
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
ns=fedpca
# shellcheck source=deploy/k8s/cluster.sh
. "$root/deploy/k8s/cluster.sh"

t0=$(date +%s%N); step_ns=$t0; step_name=""; times=()
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
  echo "== fixed paths"; find /run/containerd /var/lib/cni /var/lib/kubelet "$HOME/.kube" -maxdepth 3 2>/dev/null | sort
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
    kc -n "$ns" get events --sort-by .lastTimestamp 2>&1 | tail -25
    for l in kubelet containerd kube-apiserver; do echo "--- $l"; tail -15 "$WORK/log/$l.log" 2>/dev/null; done
    for p in proxy-proxy-0 committee-csp-0 hospital-a-owner-0; do echo "--- $p"; kc -n "$ns" logs "$p" --all-containers --tail 15 2>&1; done
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
dry() { # name, then helm template's flags
  local name=$1; shift
  helm lint --strict "$chart" "$@" >"$WORK/lint-$name.log" || { cat "$WORK/lint-$name.log"; return 1; }
  helm template "dry-$name" "$chart" -n fedpca-dry --set image.tag="e2e-$$" "$@" >"$WORK/dry-$name.yaml"
  local kinds; kinds=$(grep -c '^kind:' "$WORK/dry-$name.yaml")
  [ "$kinds" -gt 0 ] || { echo "e2e-k8s: $name rendered nothing" >&2; return 1; }
  kubectl apply --dry-run=server -n fedpca-dry -f "$WORK/dry-$name.yaml" >"$WORK/dry-$name.out"
  log "dry-run $name: $kinds objects accepted ($(grep '^kind:' "$WORK/dry-$name.yaml" | sort | uniq -c | awk '{printf "%s%s %s", sep, $1, $3; sep=", "}'))"
}
dry default
dry committee-only --set proxy.enabled=false,owner.enabled=false
dry proxy-only --set committee.enabled=false,owner.enabled=false
dry owner-only --set committee.enabled=false,proxy.enabled=false,owner.data.secret=hospital-a-data
dry owner-postgres --set committee.enabled=false,proxy.enabled=false \
  --set 'owner.datasets[0].schema=schema.json,owner.datasets[0].source=postgres://fedpca@db.example:5432/clinic?table=patients' \
  --set owner.data.secret=schema,owner.postgresPassword.secret=db-password
dry demo-certs --set certs.generate=true,certs.extra='{user/alice,operator/ops}'
kubectl delete namespace fedpca-dry --wait=false >/dev/null

step demo "the demo's certificates: a committee release with certs.generate (pre-install Job), helm test"
helm install demo "$chart" -n fedpca-demo --create-namespace --set certs.generate=true,proxy.enabled=false,owner.enabled=false \
  --wait --timeout 5m >/dev/null
helm test demo -n fedpca-demo >/dev/null
kubectl -n fedpca-demo get pods,pvc --no-headers | awk '{print "  " $1, $2, $3}'
helm uninstall demo -n fedpca-demo --wait >/dev/null
kubectl delete namespace fedpca-demo --wait=true --timeout 3m >/dev/null
log "demo: the Job issued the certificates, three members served from them, helm test passed"

step readme "README.md's \"Deploy on Kubernetes\" block, as written"
marker='<!-- e2e-k8s: deploy/k8s/e2e.sh runs this block as written -->'
awk -v m="$marker" '$0 == m {f = 1; next} f && !b && /^```/ {b = 1; next} b && /^```/ {exit} b {print}' README.md >"$WORK/readme.sh"
[ -s "$WORK/readme.sh" ] || { echo "e2e-k8s: README.md has no block after: $marker" >&2; exit 1; }
mkdir -p "$WORK/readme/deploy" && cp -r deploy/helm "$WORK/readme/deploy/"
(cd "$WORK/readme" && bash -euo pipefail "$WORK/readme.sh")
r=$WORK/readme
[ -s "$r/out/pca/result.json" ] || { echo "e2e-k8s: the README's job wrote no result" >&2; exit 1; }
proxy_addr="$(kubectl -n $ns get svc proxy-proxy -o jsonpath='{.spec.clusterIP}'):7000"
log "the README's block ran: 5 releases, helm test passed, a PCA job at epsilon 1 done (proxy at $proxy_addr)"
committee_key() { kubectl -n $ns logs proxy-proxy-0 -c proxy 2>/dev/null | grep '"committee key ready"' | tail -1 | grep -o '"key":"[^"]*"'; }
key_before=$(committee_key)
[ -n "$key_before" ] || { echo "e2e-k8s: the proxy logged no committee key" >&2; exit 1; }

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
metadata: {name: hospital-c-data, namespace: $ns}
spec:
  accessModes: [ReadOnlyMany]
  storageClassName: ""
  volumeName: pv-data-c
  resources: {requests: {storage: 1Gi}}
Y
for rel in committee proxy hospital-a hospital-b hospital-c; do
  extra=(); [ "$rel" = hospital-c ] && extra=(--set owner.data.secret=,owner.data.existingClaim=hospital-c-data)
  helm upgrade "$rel" "$r/deploy/helm/fedpca" -n $ns --reuse-values --set allowNoNoise=true "${extra[@]}" --wait --timeout 5m >/dev/null
done
for s in committee-csp proxy-proxy hospital-a-owner hospital-b-owner hospital-c-owner; do
  kubectl -n $ns rollout status "sts/$s" --timeout 5m >/dev/null
done
kubectl -n $ns get pods -l app.kubernetes.io/name=fedpca -o custom-columns=POD:.metadata.name,STARTED:.status.startTime,READY:.status.containerStatuses[0].ready --no-headers
log "every release at revision 2: $(helm list -n $ns -o json | grep -o '"revision":"[0-9]*"' | sort | uniq -c | tr -s ' ')"
# A restarted owner reads the same files from its Secret: its jobs stay
# charged to the same ledger (the budget is not spent again).
for h in hospital-a hospital-b; do
  if kubectl -n $ns logs "$h-owner-0" -c owner | grep -F "charged to another source's ledger"; then
    echo "e2e-k8s: $h lost track of its ledger across the upgrade" >&2; exit 1
  fi
done
log "hospital-a and hospital-b, restarted, still charge their jobs to the same ledgers"
wait_for "the upgraded proxy's committee key" 60 committee_key
[ "$(committee_key)" = "$key_before" ] || { echo "e2e-k8s: the committee key changed in the upgrade: $key_before, now $(committee_key)" >&2; exit 1; }
log "the committee key is the same after the upgrade: $key_before"

fedpca dataset export wdbc --owners hospital-a,hospital-b,hospital-c --out "$WORK/ref-data" --seed 7 >/dev/null
cmp -s "$WORK/ref-data/all.csv" "$r/data/all.csv" || { echo "e2e-k8s: the README's data is not the reference's" >&2; exit 1; }
"$WORK/img/fedpca" reference --schema "$r/data/schema.json" --data "$r/data/all.csv" --analysis pca --k 3 --out "$WORK/ref-pca" >/dev/null
"$WORK/img/fedpca" reference --schema "$r/data/schema.json" --data "$r/data/all.csv" --analysis dca --k 1 --out "$WORK/ref-dca" >/dev/null
user_run() { # out, then the job's flags
  local out=$1; shift
  fedpca user run --certs "$r/certs/user-alice" --keys "$r/keys" --proxy "$proxy_addr" --schema "$r/data/schema.json" \
    --owners hospital-a,hospital-b,hospital-c --committee csp-1,csp-2,csp-3 --out "$out" --deadline 4m --no-noise "$@"
}
uploads() { kubectl -n $ns logs proxy-proxy-0 2>/dev/null | grep -c '"upload included"' || true; }

step pca "PCA, noise off; the proxy's pod deleted after two acknowledged uploads"
kubectl -n $ns scale sts hospital-c-owner --replicas 0 >/dev/null
kubectl -n $ns wait --for=delete pod/hospital-c-owner-0 --timeout 120s >/dev/null 2>&1 || true
before=$(uploads)
user_run "$WORK/out/pca" --analysis pca --k 3 >"$WORK/pca.log" 2>&1 &
job=$!
for _ in $(seq 1 240); do
  kill -0 "$job" 2>/dev/null || break
  [ "$(( $(uploads) - before ))" -ge 2 ] && break
  sleep 0.5
done
[ "$(( $(uploads) - before ))" -ge 2 ] || { cat "$WORK/pca.log"; echo "e2e-k8s: no two uploads before the proxy's deletion" >&2; exit 1; }
log "two uploads acknowledged: deleting pod proxy-proxy-0 (grace 0)"
kubectl -n $ns delete pod proxy-proxy-0 --grace-period 0 --force >/dev/null 2>&1
sleep 2
kubectl -n $ns wait --for=condition=Ready pod/proxy-proxy-0 --timeout 180s >/dev/null
log "the proxy is back (same claim); starting hospital-c"
kubectl -n $ns scale sts hospital-c-owner --replicas 1 >/dev/null
wait "$job" || { cat "$WORK/pca.log"; echo "e2e-k8s: the PCA job failed" >&2; exit 1; }
"$WORK/img/fedpca" compare --result "$WORK/out/pca/result.json" --reference "$WORK/ref-pca/result.json" --tolerance 1e-9
grep -q '"num_owners": 3' "$WORK/out/pca/result.json" || { echo "e2e-k8s: the PCA job lost an upload" >&2; exit 1; }
log "PCA matches the non-private run, with all 3 uploads (2 acknowledged before the proxy's deletion; hospital-c's rows from its claim)"

step dca "DCA, noise off; committee pod committee-csp-1 (csp-2) deleted and kept down"
kubectl -n $ns wait --for=condition=Ready pod/hospital-c-owner-0 --timeout 180s >/dev/null
kubectl cordon fedpca-e2e >/dev/null
kubectl -n $ns delete pod committee-csp-1 --wait=true --timeout 60s >/dev/null
kubectl -n $ns get pods -l app.kubernetes.io/component=csp --no-headers
# The PodDisruptionBudget (minAvailable 2) now refuses to evict another member.
if kubectl drain fedpca-e2e --pod-selector app.kubernetes.io/instance=committee,app.kubernetes.io/component=csp \
    --delete-emptydir-data --timeout 8s >"$WORK/drain.log" 2>&1; then
  cat "$WORK/drain.log"; echo "e2e-k8s: a drain evicted a second committee member" >&2; exit 1
fi
grep -q "disruption budget" "$WORK/drain.log" || { cat "$WORK/drain.log"; echo "e2e-k8s: the drain failed for another reason than the budget" >&2; exit 1; }
running=$(kubectl -n $ns get pods -l app.kubernetes.io/component=csp --field-selector status.phase=Running --no-headers | wc -l)
[ "$running" = 2 ] || { echo "e2e-k8s: $running members running after the refused drain, not 2" >&2; exit 1; }
log "the PodDisruptionBudget refused to evict a second member (2 of 3 running)"
user_run "$WORK/out/dca" --analysis dca --k 1 >"$WORK/dca.log" 2>&1 || { cat "$WORK/dca.log"; echo "e2e-k8s: the DCA job failed" >&2; exit 1; }
phase=$(kubectl -n $ns get pod committee-csp-1 -o jsonpath='{.status.phase}' 2>/dev/null || echo gone)
[ "$phase" != Running ] || { echo "e2e-k8s: committee-csp-1 came back during the job" >&2; exit 1; }
switched=$(grep -o 'key switch by [^—]*' "$WORK/dca.log" | tail -1)
case "$switched" in *csp-1*csp-3*) ;; *) cat "$WORK/dca.log"; echo "e2e-k8s: expected a switch by csp-1 and csp-3, got: $switched" >&2; exit 1 ;; esac
"$WORK/img/fedpca" compare --result "$WORK/out/dca/result.json" --reference "$WORK/ref-dca/result.json" --tolerance 1e-9
grep -q '"num_owners": 3' "$WORK/out/dca/result.json" || { echo "e2e-k8s: the DCA job lost an upload" >&2; exit 1; }
kubectl -n $ns logs proxy-proxy-0 | grep -E '"job done"' | tail -1
log "DCA matches the non-private run: $switched (csp-2's pod $phase)"
kubectl uncordon fedpca-e2e >/dev/null
kubectl -n $ns wait --for=condition=Ready pod/committee-csp-1 --timeout 180s >/dev/null
log "committee-csp-1 back with its claim"

step uninstall "helm uninstall of every release"
for rel in hospital-c hospital-b hospital-a proxy committee; do helm uninstall "$rel" -n $ns --wait --timeout 3m >/dev/null; done
# The StatefulSets' pods go by garbage collection, after helm returns.
kubectl -n $ns wait --for=delete pod -l app.kubernetes.io/name=fedpca --timeout 180s >/dev/null 2>&1 || true
left=$(kubectl -n $ns get all,networkpolicy,pdb,secret -l app.kubernetes.io/name=fedpca -o name)
[ -z "$left" ] || { echo "e2e-k8s: left after uninstall: $left" >&2; exit 1; }
log "uninstalled: no pod, service, statefulset, policy or budget left; the state claims stay, as StatefulSets leave them: $(kubectl -n $ns get pvc -o name | wc -l)"
kubectl delete namespace $ns --wait=true --timeout 3m >/dev/null
step "" ""
