# A local deployment of fedpca as separate processes, for the status-page and
# metrics checks (sourced by scripts/status-browser.sh and
# scripts/metrics-check.sh). Every node is the real daemon over mutual TLS on
# loopback TCP: a committee of three CSP members (any two re-encrypt), the
# proxy with its status page (loopback: plain HTTP) and metrics (on every
# address: HTTPS for the operator certificate operator/ops, which the
# certificates include with the name localhost), and two data owners holding slices of
# wdbc. Jobs name a third owner, hospital-c, who never runs: a job waiting for
# it stays open until its deadline, then seals with the two uploads.
#
#   deploy_up                     build fedpca, certificates, data, start every node
#   deploy_job NAME OWNERS [ARGS] run `fedpca user run` in the background
#   deploy_wait_uploads N         wait until the newest job has N uploads
#   deploy_wait_job NAME          wait for a background job to finish
#   scrape ADDR / series_value    read a /metrics endpoint (https://... as the operator) / sum one series
#   operator_get URL [CERT]       GET an operator page over HTTPS with a certificate (default operator-ops); prints the HTTP code
# The EXIT trap stops every process this started (by PID) and removes the
# work directory.

set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/fedpca-deploy.XXXXXX")
fedpca="$work/fedpca"
pids=()
declare -A job_pid=()
start_ns=$(date +%s%N)

log() { printf '[%s %6.1fs] %s\n' "${script_name:-deploy}" "$(( $(date +%s%N) - start_ns ))e-9" "$*"; }
fail() { echo "${script_name:-deploy}: FAILED: $*" >&2; exit 1; }

deploy_down() {
  local status=$?
  set +e
  if [ "$status" -ne 0 ]; then
    for f in "$work"/logs/*.log; do
      [ -f "$f" ] && { echo "--- $(basename "$f") (last lines)"; tail -n 15 "$f"; }
    done
  fi
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null; done
  for pid in "${pids[@]}"; do
    for _ in $(seq 1 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null
    wait "$pid" 2>/dev/null
  done
  rm -rf "$work"
  log "stopped ${#pids[@]} processes, removed $work (exit status $status)"
  exit "$status"
}
trap deploy_down EXIT

# free_port prints a TCP port nothing listens on.
free_port() {
  local p
  while :; do
    p=$(( 20000 + RANDOM % 30000 ))
    if ! (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && [[ " ${used_ports:-} " != *" $p "* ]]; then
      used_ports="${used_ports:-} $p"; echo "$p"; return
    fi
  done
}

# start NAME ARGS...: run fedpca in the background, logging to logs/NAME.log.
start() {
  local name=$1; shift
  "$fedpca" "$@" >"$work/logs/$name.log" 2>&1 &
  pids+=($!)
}

# shellcheck source=scripts/lib/wait.sh
source "$root/scripts/lib/wait.sh"   # wait_for DESCRIPTION SECONDS COMMAND...

deploy_up() {
  mkdir -p "$work/logs" "$work/state" "$work/out"
  log "building fedpca"
  (cd "$root" && go build -o "$fedpca" ./cmd/fedpca)
  "$fedpca" certs --out "$work/certs" --dns localhost proxy/proxy csp/csp-1 csp/csp-2 csp/csp-3 \
    owner/hospital-a owner/hospital-b owner/hospital-c user/alice operator/ops >/dev/null
  "$fedpca" dataset export wdbc --owners hospital-a,hospital-b,hospital-c --out "$work/data" --seed 7 >/dev/null
  "$fedpca" user keygen --keys "$work/keys" >/dev/null

  # The proxy's metrics listen on every address: HTTPS, operators only.
  proxy_port=$(free_port); local pm; pm=$(free_port); proxy_metrics=https://localhost:$pm; status_addr=127.0.0.1:$(free_port)
  local csps=()
  for i in 1 2 3; do
    local port; port=$(free_port)
    eval "csp${i}_metrics=127.0.0.1:$(free_port)"
    local m="csp${i}_metrics"
    start "csp-$i" csp serve --certs "$work/certs/csp-csp-$i" --state "$work/state/csp-$i" \
      --listen "127.0.0.1:$port" --metrics-listen "${!m}"
    csps+=(--csp "csp-$i=127.0.0.1:$port")
  done
  start proxy proxy serve --certs "$work/certs/proxy-proxy" --state "$work/state/proxy" \
    --listen "127.0.0.1:$proxy_port" "${csps[@]}" --threshold 2 \
    --metrics-listen "0.0.0.0:$pm" --status-listen "$status_addr"
  log "committee of 3 (threshold 2) and the proxy started; status page http://$status_addr/"
  wait_for "the committee key" 60 grep -q "committee key ready" "$work/logs/proxy.log"

  for o in a b; do
    eval "owner_${o}_metrics=127.0.0.1:$(free_port)"
    local m="owner_${o}_metrics"
    start "owner-$o" owner serve --certs "$work/certs/owner-hospital-$o" --state "$work/state/hospital-$o" \
      --proxy "127.0.0.1:$proxy_port" --dataset "$work/data/schema.json=$work/data/hospital-$o.csv" \
      --budget-epsilon 10 --poll 500ms --metrics-listen "${!m}" --committee csp-1,csp-2,csp-3
  done
  log "owners hospital-a and hospital-b started (hospital-c is named by jobs but never runs)"
}

# deploy_job NAME OWNERS [FLAGS...]: a PCA job at epsilon 1 run by user alice
# in the background; its output goes to logs/job-NAME.log and out/NAME.
deploy_job() {
  local name=$1 owners=$2; shift 2
  "$fedpca" user run --certs "$work/certs/user-alice" --keys "$work/keys" --proxy "127.0.0.1:$proxy_port" \
    --schema "$work/data/schema.json" --owners "$owners" --committee csp-1,csp-2,csp-3 --analysis pca --k 3 --epsilon 1 \
    --out "$work/out/$name" --quiet "$@" >"$work/logs/job-$name.log" 2>&1 &
  pids+=($!)
  job_pid[$name]=$!
}

deploy_wait_job() { # NAME
  local pid=${job_pid[$1]}
  wait "$pid" || fail "job $1 failed: $(tail -n 5 "$work/logs/job-$1.log")"
  [ -f "$work/out/$1/result.json" ] || fail "job $1 wrote no result"
}

status_json() { curl -fsS "http://$status_addr/status.json"; }

# first_job prints the first job of status.json (open jobs come first, the
# newest first) on one line, up to its owner list.
first_job() { status_json | tr -d ' \n' | grep -o '"jobs":\[{[^[]*'; }

# open_job_id prints the ID of the newest open job.
open_job_id() { first_job | grep '"state":"open"' | grep -o '[0-9a-f]\{64\}'; }

open_job_has_uploads() { first_job | grep '"state":"open"' | grep -q "\"owners_uploaded\":$1,"; }

deploy_wait_uploads() { # N: the newest open job has N uploads
  wait_for "an open job with $1 uploads" 120 open_job_has_uploads "$1"
}

scrape() {
  case $1 in
    https://*) curl -fsS --cacert "$work/certs/operator-ops/ca.pem" --cert "$work/certs/operator-ops/cert.pem" \
                 --key "$work/certs/operator-ops/key.pem" "$1/metrics" ;;
    *) curl -fsS "http://$1/metrics" ;;
  esac
}

operator_get() { # URL [NODE-CERT-DIR]: the HTTP code of an HTTPS GET (000: no answer)
  local d="$work/certs/${2:-operator-ops}"
  curl -sS -o /dev/null -w '%{http_code}' --cacert "$d/ca.pem" --cert "$d/cert.pem" --key "$d/key.pem" "$1" 2>/dev/null || true
}

# series_value TEXT NAME [LABEL=VALUE...] prints the sum of the samples of
# metric NAME whose labels include every LABEL=VALUE given, echoing the lines
# it used to stderr; it fails when there is none.
series_value() {
  local text=$1 name=$2; shift 2
  awk -v name="$name" -v filters="$*" '
    BEGIN { nf = split(filters, f, " ") }
    /^#/ { next }
    {
      series = $0; sub(/ [^ ]+$/, "", series)
      base = series; sub(/[{].*/, "", base)
      if (base != name) next
      labels = series; if (!sub(/^[^{]*[{]/, ",", labels)) labels = ","
      for (i = 1; i <= nf; i++) {
        eq = index(f[i], "=")
        if (index(labels, "," substr(f[i], 1, eq - 1) "=\"" substr(f[i], eq + 1) "\"") == 0) next
      }
      v += $NF; n++; print "      " $0 > "/dev/stderr"
    }
    END { if (n == 0) exit 1; printf "%.17g\n", v }' <<<"$text"
}
