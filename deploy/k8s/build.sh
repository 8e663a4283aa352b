#!/usr/bin/env bash
# Builds the single-node Kubernetes that make e2e-k8s runs, from Go modules
# only: kube-apiserver, kube-controller-manager, kube-scheduler, kubelet,
# kube-proxy and kubectl (k8s.io/kubernetes), etcd (go.etcd.io/etcd/server),
# helm (helm.sh/helm/v3) and the pods' sandbox ("pause") binary.
#
# The binaries are cached in $FEDPCA_K8S_CACHE/<versions>/bin (default
# ~/.cache/fedpca-k8s): a second run finds them and returns at once. Prints
# the directory on its last line of stdout.
set -euo pipefail
K8S_VERSION=1.34.2      # k8s.io/kubernetes v1.34.2, its staging modules v0.34.2
ETCD_VERSION=3.6.8
HELM_VERSION=3.22.0
here=$(cd "$(dirname "$0")" && pwd)
cache=${FEDPCA_K8S_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/fedpca-k8s}
# The cache key: the versions and this script (a change to either rebuilds).
key="k8s$K8S_VERSION-etcd$ETCD_VERSION-helm$HELM_VERSION-$(cat "$here/build.sh" "$here/pause.go" | sha256sum | cut -c1-12)"
dir="$cache/$key"
bins=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl etcd helm pause)
if [ -f "$dir/bin/.complete" ]; then
  echo "k8s binaries: cached in $dir/bin" >&2
  echo "$dir/bin"; exit 0
fi
mkdir -p "$dir/bin"
minor=${K8S_VERSION#*.}; minor=${minor%%.*}
ldk8s="-s -w -X k8s.io/component-base/version.gitVersion=v$K8S_VERSION -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
export CGO_ENABLED=0 GOFLAGS=-mod=mod GOWORK=off
src=$(mktemp -d); trap 'rm -rf "$src"' EXIT

# Kubernetes: a wrapper module whose mains are the project's own cmd/*/ files,
# with every staging module (the `=> ./staging/...` replaces of its go.mod)
# taken from the module proxy at the matching v0.x version.
t0=$(date +%s)
mkdir -p "$src/k8s" && cd "$src/k8s"
go mod init fedpca.local/k8s >/dev/null 2>&1
go mod download -json "k8s.io/kubernetes@v$K8S_VERSION" >/dev/null
kmod=$(go env GOMODCACHE)/cache/download/k8s.io/kubernetes/@v/v$K8S_VERSION.mod
kdir=$(go env GOMODCACHE)/k8s.io/kubernetes@v$K8S_VERSION
{
  echo "require k8s.io/kubernetes v$K8S_VERSION"
  sed -n 's|^\s*\(k8s.io/[a-z0-9-]*\) => ./staging/.*|replace \1 => \1 v0.'"${K8S_VERSION#1.}"'|p' "$kmod"
} >> go.mod
for c in kube-apiserver/apiserver kube-controller-manager/controller-manager kube-scheduler/scheduler \
         kubelet/kubelet kube-proxy/proxy kubectl/kubectl; do
  mkdir -p "cmd/${c%/*}" && cp "$kdir/cmd/$c.go" "cmd/${c%/*}/main.go"
done
go mod tidy >/dev/null
go build -trimpath -ldflags "$ldk8s" -o "$dir/bin/" ./cmd/...
echo "k8s binaries: kubernetes v$K8S_VERSION built in $(( $(date +%s) - t0 )) s" >&2

t0=$(date +%s)
mkdir -p "$src/etcd" && cd "$src/etcd"
go mod init fedpca.local/etcd >/dev/null 2>&1
printf 'package main\n\nimport (\n\t"os"\n\n\t"go.etcd.io/etcd/server/v3/etcdmain"\n)\n\nfunc main() { etcdmain.Main(os.Args) }\n' > main.go
go get "go.etcd.io/etcd/server/v3@v$ETCD_VERSION" >/dev/null 2>&1
go mod tidy >/dev/null
go build -trimpath -ldflags "-s -w" -o "$dir/bin/etcd" .
echo "k8s binaries: etcd v$ETCD_VERSION built in $(( $(date +%s) - t0 )) s" >&2

t0=$(date +%s)
GOBIN="$dir/bin" go install -trimpath -ldflags "-s -w -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMajor=1 -X helm.sh/helm/v3/pkg/chartutil.k8sVersionMinor=$minor" \
  "helm.sh/helm/v3/cmd/helm@v$HELM_VERSION"
echo "k8s binaries: helm v$HELM_VERSION built in $(( $(date +%s) - t0 )) s" >&2

cd "$here" && go build -trimpath -ldflags "-s -w" -o "$dir/bin/pause" ./pause.go
for b in "${bins[@]}"; do [ -x "$dir/bin/$b" ] || { echo "k8s binaries: $b missing" >&2; exit 1; }; done
touch "$dir/bin/.complete"
echo "$dir/bin"
