# A single-node Kubernetes inside a network namespace, for make e2e-k8s.
# Sourced by deploy/k8s/e2e.sh, which sets BIN (deploy/k8s/build.sh's output)
# and WORK (a scratch directory), then calls cluster_up and, however it ends,
# cluster_down.
#
# Everything listens and routes inside the namespace $NETNS: etcd, the API
# server, the controllers, a containerd of its own (CRI on; Docker's own
# containerd is left alone), the kubelet and kube-proxy. The node's address
# is on an interface in it, the pods' bridge is in it, and the iptables
# rules kube-proxy and CNI write are in it: they go with the namespace.
# Daemons share the host's mount namespace (the kubelet's volume mounts must
# be seen by containerd), so cluster_down unmounts what they mounted.

NETNS=${NETNS:-fedpca-e2e}
NODE_IP=10.250.0.1        # on node0, one end of a veth pair in $NETNS (no dummy driver on these VMs)
POD_CIDR=10.244.0.0/24    # the bridge cni0 in $NETNS
SERVICE_CIDR=10.96.0.0/24
NODE_NAME=fedpca-e2e

inns() { nsenter --net="/run/netns/$NETNS" -- "$@"; }

# start NAME CMD...: a daemon in the namespace, its PID recorded.
start() {
  local name=$1; shift
  inns "$@" >"$WORK/log/$name.log" 2>&1 &
  echo "$! $name" >>"$WORK/pids"
}

k8s_certs() {
  local d=$WORK/pki; mkdir -p "$d"
  (
    cd "$d"
    openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=fedpca-e2e-ca 2>/dev/null
    issue() { # name subject [SANs]
      openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
      if [ -n "${3:-}" ]; then printf 'subjectAltName=%s\n' "$3" >"$1.ext"; else : >"$1.ext"; fi
      openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -days 2 -out "$1.crt" -extfile "$1.ext" 2>/dev/null
    }
    issue apiserver /CN=kube-apiserver "IP:$NODE_IP,IP:127.0.0.1,IP:${SERVICE_CIDR%.*}.1,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:localhost"
    issue admin "/O=system:masters/CN=admin"
    openssl genrsa -out sa.key 2048 2>/dev/null
    openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  )
  cat >"$WORK/admin.conf" <<KC
apiVersion: v1
kind: Config
clusters:
- name: e2e
  cluster: {server: "https://$NODE_IP:6443", certificate-authority: "$d/ca.crt"}
users:
- name: admin
  user: {client-certificate: "$d/admin.crt", client-key: "$d/admin.key"}
contexts:
- name: e2e
  context: {cluster: e2e, user: admin}
current-context: e2e
KC
}

containerd_config() {
  mkdir -p "$WORK/containerd" "$WORK/cni"
  cat >"$WORK/containerd/config.toml" <<TOML
version = 2
root = "$WORK/containerd/root"
state = "$WORK/containerd/state"
[grpc]
  address = "$WORK/containerd/containerd.sock"
[ttrpc]
  address = "$WORK/containerd/containerd.sock.ttrpc"
[plugins."io.containerd.internal.v1.opt"]
  path = "$WORK/containerd/opt"
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "fedpca.local/pause:e2e"
  # The VM lacks CAP_SYS_RESOURCE: runc may only raise oom_score_adj.
  restrict_oom_score_adj = true
  netns_mounts_under_state_dir = true
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = "$WORK/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$WORK/cni"
TOML
  cat >"$WORK/cni/10-fedpca-e2e.conflist" <<JSON
{"cniVersion": "0.4.0", "name": "fedpca-e2e", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": "$POD_CIDR"}]], "routes": [{"dst": "0.0.0.0/0"}],
            "dataDir": "$WORK/cni/ipam"}},
  {"type": "firewall"},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
JSON
}

kubelet_config() {
  cat >"$WORK/kubelet.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: 0.0.0.0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: "$WORK/pki/ca.crt"}
authorization: {mode: Webhook}
cgroupDriver: cgroupfs
containerRuntimeEndpoint: "unix://$WORK/containerd/containerd.sock"
failSwapOn: false
podLogsDir: "$WORK/pod-logs"
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
evictionHard: {memory.available: "100Mi", nodefs.available: "1%", imagefs.available: "1%"}
serializeImagePulls: false
maxPods: 50
YAML
}

# shellcheck source=scripts/lib/wait.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../scripts/lib/wait.sh"   # wait_for DESCRIPTION SECONDS COMMAND...

cluster_up() {
  mkdir -p "$WORK/log" "$WORK/pod-logs" "$WORK/etcd"
  [ ! -d /var/log/containers ] || : >"$WORK/had-var-log-containers"
  : >"$WORK/pids"
  # ip netns add makes /run/netns (a shared bind mount) if it is missing:
  # cluster_down removes it again then, once no namespace is left in it.
  [ -d /run/netns ] || : >"$WORK/made-run-netns"
  # Fixed paths the daemons write whatever their flags: the shims' sockets
  # (/run/containerd/s), the CNI result cache (/var/lib/cni) and the device
  # plugin socket (/var/lib/kubelet/device-plugins). cluster_down removes
  # what is ours in them, and each directory it made.
  local d
  for d in /run/containerd /run/containerd/s /var/lib/cni /var/lib/cni/results /var/lib/kubelet /var/lib/kubelet/device-plugins; do
    [ -e "$d" ] || echo "$d" >>"$WORK/made-dirs"
  done
  ip netns add "$NETNS"
  inns ip link set lo up
  inns ip link add node0 type veth peer name node0-peer
  inns ip addr add "$NODE_IP/24" dev node0
  inns ip link set node0-peer up
  inns ip link set node0 up
  inns ip route add default dev node0
  inns sysctl -qw net.ipv4.ip_forward=1
  inns sysctl -qw net.bridge.bridge-nf-call-iptables=1 2>/dev/null || true
  k8s_certs
  containerd_config
  kubelet_config
  start containerd containerd --config "$WORK/containerd/config.toml"
  start etcd "$BIN/etcd" --data-dir "$WORK/etcd" --listen-client-urls http://127.0.0.1:2379 \
    --advertise-client-urls http://127.0.0.1:2379 --listen-peer-urls http://127.0.0.1:2380 \
    --initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster default=http://127.0.0.1:2380 \
    --unsafe-no-fsync
  local p=$WORK/pki
  start kube-apiserver "$BIN/kube-apiserver" --etcd-servers http://127.0.0.1:2379 \
    --advertise-address "$NODE_IP" --bind-address 0.0.0.0 --secure-port 6443 \
    --service-cluster-ip-range "$SERVICE_CIDR" --client-ca-file "$p/ca.crt" \
    --tls-cert-file "$p/apiserver.crt" --tls-private-key-file "$p/apiserver.key" \
    --service-account-key-file "$p/sa.pub" --service-account-signing-key-file "$p/sa.key" \
    --service-account-issuer https://kubernetes.default.svc --authorization-mode Node,RBAC \
    --kubelet-client-certificate "$p/admin.crt" --kubelet-client-key "$p/admin.key" \
    --kubelet-preferred-address-types InternalIP
  mkdir -p "$WORK/home"
  wait_for "the API server" 90 kc get --raw /readyz
  start kube-controller-manager "$BIN/kube-controller-manager" --kubeconfig "$WORK/admin.conf" \
    --authentication-kubeconfig "$WORK/admin.conf" --authorization-kubeconfig "$WORK/admin.conf" \
    --service-account-private-key-file "$p/sa.key" --root-ca-file "$p/ca.crt" \
    --leader-elect=false --bind-address 127.0.0.1 --use-service-account-credentials=false
  start kube-scheduler "$BIN/kube-scheduler" --kubeconfig "$WORK/admin.conf" \
    --authentication-kubeconfig "$WORK/admin.conf" --authorization-kubeconfig "$WORK/admin.conf" \
    --leader-elect=false --bind-address 127.0.0.1
  wait_for "containerd" 30 ctr -a "$WORK/containerd/containerd.sock" version
  start kubelet "$BIN/kubelet" --config "$WORK/kubelet.yaml" --kubeconfig "$WORK/admin.conf" \
    --root-dir "$WORK/kubelet" --cert-dir "$WORK/kubelet-pki" --hostname-override "$NODE_NAME" --node-ip "$NODE_IP"
  start kube-proxy "$BIN/kube-proxy" --kubeconfig "$WORK/admin.conf" --hostname-override "$NODE_NAME" \
    --cluster-cidr "$POD_CIDR" --proxy-mode iptables --conntrack-max-per-core 0 \
    --metrics-bind-address 127.0.0.1:10249 --healthz-bind-address 127.0.0.1:10256
  wait_for "the node" 120 kc wait --for=condition=Ready "node/$NODE_NAME" --timeout 1s
  wait_for "the default service account" 60 kc -n default get serviceaccount default
}

# kubectl (and helm) keep a discovery cache in $HOME/.kube: HOME is the
# scratch directory's for them.
kc() { HOME="$WORK/home" inns "$BIN/kubectl" --kubeconfig "$WORK/admin.conf" "$@"; }

# side_load TAR: import an image archive (docker save) into the cluster's containerd.
side_load() { ctr -a "$WORK/containerd/containerd.sock" -n k8s.io images import "$1" >/dev/null; }

# cluster_down: stops every daemon by PID, then whatever containers and
# mounts are left, and removes the namespace (its bridge and iptables rules
# with it), the pods' cgroups and the scratch directory.
cluster_down() {
  [ -n "${WORK:-}" ] && [ -d "$WORK" ] || return 0
  local sock=$WORK/containerd/containerd.sock
  # Pods still there (a run that failed midway): let the kubelet stop them.
  if [ -f "$WORK/admin.conf" ] && kc get --raw /readyz >/dev/null 2>&1; then
    kc delete pods --all -A --grace-period 2 --timeout 60s >/dev/null 2>&1 || true
  fi
  if [ -f "$WORK/pids" ]; then
    # The kubelet and kube-proxy first, so that nothing restarts the pods.
    for name in kubelet kube-proxy kube-scheduler kube-controller-manager kube-apiserver etcd; do
      local pid; pid=$(awk -v n="$name" '$2 == n {print $1}' "$WORK/pids")
      [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
    done
  fi
  local ids=""
  if [ -S "$sock" ]; then
    # The pods' tasks and containers, then their sandboxes.
    ids=$(ctr -a "$sock" -n k8s.io containers ls -q 2>/dev/null || true)
    for id in $ids; do ctr -a "$sock" -n k8s.io tasks kill -s SIGKILL "$id" >/dev/null 2>&1 || true; done
    sleep 1
    for id in $ids; do
      ctr -a "$sock" -n k8s.io tasks delete -f "$id" >/dev/null 2>&1 || true
      ctr -a "$sock" -n k8s.io containers delete "$id" >/dev/null 2>&1 || true
    done
  fi
  local pid; pid=$(awk '$2 == "containerd" {print $1}' "$WORK/pids" 2>/dev/null)
  [ -n "$pid" ] && kill "$pid" 2>/dev/null || true
  # Wait for the daemons (each by its PID) to be gone.
  for _ in $(seq 1 40); do
    local alive=0
    while read -r p _; do kill -0 "$p" 2>/dev/null && alive=1; done <"$WORK/pids"
    [ "$alive" = 0 ] && break
    sleep 0.5
  done
  while read -r p n; do
    if kill -0 "$p" 2>/dev/null; then echo "e2e-k8s: $n ($p) did not stop; killing it" >&2; kill -9 "$p" 2>/dev/null || true; fi
  done <"$WORK/pids"
  # Shims and container processes that outlived containerd: every process
  # still in the namespace, and in the pods' cgroups.
  if [ -e "/run/netns/$NETNS" ]; then
    for p in $(ip netns pids "$NETNS" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
  fi
  for c in /sys/fs/cgroup/*/kubepods; do
    [ -d "$c" ] || continue
    find "$c" -name cgroup.procs -exec cat {} + 2>/dev/null | while read -r p; do kill -9 "$p" 2>/dev/null || true; done
  done
  sleep 0.5
  # Mounts under the scratch directory (volumes, overlay roots, the pods'
  # network namespaces), deepest first.
  awk -v w="$WORK" 'index($5, w) == 1 {print $5}' /proc/self/mountinfo | sort -r | while read -r m; do
    umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null || true
  done
  # The pods' cgroups (the kubelet's kubepods tree in every hierarchy), deepest first.
  for c in /sys/fs/cgroup/*/kubepods; do
    [ -d "$c" ] && find "$c" -depth -type d -exec rmdir {} + 2>/dev/null || true
  done
  # Container log links the kubelet made in /var/log/containers (a fixed
  # path), and that directory if the kubelet made it.
  for l in /var/log/containers/*; do
    [ -L "$l" ] && case "$(readlink "$l")" in "$WORK"/*) rm -f "$l" ;; esac
  done
  [ -e "$WORK/had-var-log-containers" ] || rmdir /var/log/containers 2>/dev/null || true
  # What the daemons left in the fixed paths: CNI results of our network
  # and our sandboxes, the kubelet's device plugin socket, then every
  # directory this run made, if it is empty by now.
  # Our sandboxes are also those with a result of our network, fedpca-e2e.
  local f
  for f in /var/lib/cni/results/fedpca-e2e-*-eth0; do
    [ -e "$f" ] || continue
    f=${f##*/fedpca-e2e-}; ids="$ids ${f%-eth0}"
  done
  rm -f /var/lib/cni/results/fedpca-e2e-* 2>/dev/null
  for id in $ids; do rm -f /var/lib/cni/results/cni-loopback-"$id"-lo; done
  # A shim killed before it cleaned up leaves its socket, named by the hash
  # of containerd's address, the namespace and the pod's ID.
  for id in $ids; do
    rm -f "/run/containerd/s/$(printf '%s' "$sock/k8s.io/$id" | sha256sum | cut -c1-64)"
  done
  if grep -qx /var/lib/kubelet/device-plugins "$WORK/made-dirs" 2>/dev/null; then
    rm -f /var/lib/kubelet/device-plugins/kubelet.sock
  fi
  if [ -f "$WORK/made-dirs" ]; then
    tac "$WORK/made-dirs" | while read -r d; do rmdir "$d" 2>/dev/null || true; done
  fi
  ip netns del "$NETNS" 2>/dev/null || true
  if [ -e "$WORK/made-run-netns" ] && [ -z "$(ls -A /run/netns 2>/dev/null)" ]; then
    umount /run/netns 2>/dev/null; rmdir /run/netns 2>/dev/null || true
  fi
}
