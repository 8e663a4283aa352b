#!/usr/bin/env bash
# End-to-end test of the docker deployment (make e2e-docker):
#   build a static fedpca and a FROM-scratch image (nothing is pulled),
#   start deploy/docker-compose.yml with owners holding slices of wdbc,
#   run a PCA job (noise off) and check it against the non-private result
#   computed from the same rows; run a DCA job (noise off) during which the
#   proxy container is killed and restarted and one CSP node is stopped, and
#   check it too; run PCA and DCA at epsilon 1 and print them;
#   then tear everything down, volumes included.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)

if docker compose version >/dev/null 2>&1; then
  compose_cmd=(docker compose)
elif command -v docker-compose >/dev/null 2>&1; then
  compose_cmd=(docker-compose)
else
  echo "e2e-docker: neither 'docker compose' nor docker-compose is installed" >&2
  exit 1
fi
project="fedpca-e2e-$$"
image="fedpca:e2e-$$"
work=$(mktemp -d)
export FEDPCA_IMAGE="$image" FEDPCA_DATA_DIR="$work/data" FEDPCA_OUT_DIR="$work/out" FEDPCA_ALLOW_NO_NOISE=true
compose() { "${compose_cmd[@]}" -p "$project" -f "$root/deploy/docker-compose.yml" "$@"; }
log() { printf '\n[e2e %6.1fs] %s\n' "$(( $(date +%s%N) - start_ns ))e-9" "$*"; }
start_ns=$(date +%s%N)

teardown() {
  status=$?
  log "tearing down (exit status $status)"
  if [ "$status" -ne 0 ]; then
    compose logs --no-color --tail 40 proxy csp-1 csp-2 owner-c 2>/dev/null || true
  fi
  docker rm -f "$project-job2" >/dev/null 2>&1 || true
  compose --profile tools down -v --remove-orphans >/dev/null 2>&1 || true
  docker rmi -f "$image" >/dev/null 2>&1 || true
  rm -rf "$work" "$root/deploy/build"
  left=$(docker ps -a --filter "name=$project" -q; docker network ls --filter "name=$project" -q; docker volume ls --filter "name=$project" -q)
  if [ -n "$left" ]; then echo "e2e-docker: left behind: $left" >&2; exit 1; fi
  log "nothing left behind (containers, networks, volumes, image)"
}
trap teardown EXIT

log "building a static fedpca and the image (FROM scratch, nothing pulled)"
mkdir -p deploy/build/rootfs/state deploy/build/rootfs/certs deploy/build/rootfs/ca deploy/build/rootfs/out
CGO_ENABLED=0 go build -trimpath -o deploy/build/fedpca ./cmd/fedpca
fedpca="$root/deploy/build/fedpca"
docker build -q -t "$image" -f deploy/Dockerfile deploy/build >/dev/null

log "owners' data: three slices of wdbc"
"$fedpca" dataset export wdbc --owners hospital-a,hospital-b,hospital-c --out "$work/data" --seed 7
mkdir -p "$work/out" && chmod 777 "$work/out"
# k: 3 principal components; DCA on wdbc's 2 classes gives 1 (the CLI refuses more).
"$fedpca" reference --schema "$work/data/schema.json" --data "$work/data/all.csv" --analysis pca --k 3 --out "$work/ref-pca" >/dev/null
"$fedpca" reference --schema "$work/data/schema.json" --data "$work/data/all.csv" --analysis dca --k 1 --out "$work/ref-dca" >/dev/null

up_ns=$(date +%s%N)
log "docker compose up: certificates, committee of 3 (threshold 2), proxy, 3 owners"
compose up -d csp-1 csp-2 csp-3 proxy owner-a owner-b owner-c
compose run --rm user user keygen --keys /state/keys

user_run() { # name, then the job's flags
  local name=$1; shift
  compose run --rm user user run --certs /certs/user-alice --keys /state/keys --proxy proxy:7000 \
    --schema /data/schema.json --owners hospital-a,hospital-b,hospital-c --out "/out/$name" --quiet "$@"
}
wait_for_committee() {
  for _ in $(seq 1 60); do
    if compose logs --no-color proxy 2>/dev/null | grep -q 'committee key ready'; then return 0; fi
    sleep 1
  done
  echo "e2e-docker: the committee key did not become ready" >&2; return 1
}
wait_for_committee

log "job 1: PCA, noise off"
user_run pca-nonoise --analysis pca --k 3 --no-noise
first_ns=$(date +%s%N)
log "first result $(( (first_ns - up_ns) / 1000000 )) ms after docker compose up"
"$fedpca" compare --result "$work/out/pca-nonoise/result.json" --reference "$work/ref-pca/result.json" --tolerance 1e-9

log "job 2: DCA, noise off, with faults: owner-c held back, proxy killed and restarted, csp-2 stopped"
compose stop owner-c
before=$(compose logs --no-color proxy | grep -c '"upload included"' || true)
compose run -d --name "$project-job2" user user run --certs /certs/user-alice --keys /state/keys --proxy proxy:7000 \
  --schema /data/schema.json --owners hospital-a,hospital-b,hospital-c --k 1 --out /out/dca-nonoise --quiet \
  --analysis dca --no-noise >/dev/null
for _ in $(seq 1 120); do
  # A job that ended already (a refused flag, say) fails below, at once.
  [ "$(docker inspect -f '{{.State.Running}}' "$project-job2" 2>/dev/null)" = true ] || break
  n=$(compose logs --no-color proxy | grep -c '"upload included"' || true)
  [ "$((n - before))" -ge 2 ] && break
  sleep 0.5
done
log "two uploads acknowledged; killing the proxy (SIGKILL) and restarting it"
compose kill -s SIGKILL proxy
compose up -d proxy
log "stopping csp-2; starting owner-c"
compose stop csp-2
compose start owner-c
code=$(docker wait "$project-job2")
docker logs "$project-job2" 2>&1 | tail -20
docker rm "$project-job2" >/dev/null
[ "$code" = 0 ] || { echo "e2e-docker: job 2 failed (exit $code)" >&2; exit 1; }
compose logs --no-color proxy | grep -E '"(job sealed|job done)"' | tail -2
"$fedpca" compare --result "$work/out/dca-nonoise/result.json" --reference "$work/ref-dca/result.json" --tolerance 1e-9
grep -q '"num_owners": 3' "$work/out/dca-nonoise/result.json" || { echo "e2e-docker: job 2 lost an upload" >&2; exit 1; }
log "job 2 completed with all 3 acknowledged uploads, switched by csp-1 and csp-3"

log "job 3: PCA at epsilon 1 (csp-2 still stopped)"
user_run pca-eps1 --analysis pca --k 3 --epsilon 1
log "job 4: DCA at epsilon 1"
user_run dca-eps1 --analysis dca --k 1 --epsilon 1
log "all jobs passed"
