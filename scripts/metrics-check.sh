#!/usr/bin/env bash
# make metrics-check: every daemon's /metrics during and after a real job.
#
# Starts a deployment as processes (scripts/lib/deployment.sh: committee of 3,
# the proxy, owners hospital-a and hospital-b, all with --metrics-listen; the
# proxy's on every address, so HTTPS for operator certificates only) and
# runs a PCA job that also names hospital-c, who never runs: the job stays
# open until its deadline (30 s), then seals with the two uploads and is
# key-switched by two members. While it is open, and again after it is done,
# the script curls each daemon's /metrics and checks that the series for
# uploads, bytes, phase durations, key switches, errors by status code and
# budget remaining are there with plausible values, printing every line it
# used. It also checks that the proxy's /metrics and /debug/pprof refuse the
# user's and an owner's certificates (403) and a client without one. Exits
# non-zero on any failure.
script_name=metrics-check
source "$(dirname "$0")/lib/deployment.sh"

checks=0
# check NODE TEXT NAME [LABEL=VALUE...] OP VALUE
check() {
  local node=$1 text=$2 name=$3 op=${*: -2:1} want=${*: -1} v
  local filters=("${@:4:$(($# - 5))}")
  echo "  $node: $name${filters[*]:+{${filters[*]}\}} $op $want"
  v=$(series_value "$text" "$name" "${filters[@]}") || fail "$node has no $name ${filters[*]}"
  awk -v v="$v" -v w="$want" -v op="$op" 'BEGIN {
    ok = (op == ">") ? v > w : (op == ">=") ? v >= w : (op == "==") ? v == w : (op == "<") ? v < w : 0
    exit !ok }' || fail "$node: $name ${filters[*]} is $v, want $op $want"
  checks=$((checks + 1))
}

deploy_up
log "job: PCA naming hospital-a, hospital-b and hospital-c (never runs), min 2 owners, deadline in 30 s"
deploy_job metrics hospital-a,hospital-b,hospital-c --min-owners 2 --deadline 30s
deploy_wait_uploads 2
id=$(open_job_id)
log "job $id is open with 2 of 3 uploads"
# An error for the books: the result of a job that has none is asked for.
if "$fedpca" owner published --certs "$work/certs/owner-hospital-a" --proxy "127.0.0.1:$proxy_port" --out "$work/none.json" "$id" 2>/dev/null; then
  fail "a result was published for an open job"
fi

log "the operator pages refuse everyone but operators"
for who in user-alice owner-hospital-a; do
  for path in /metrics /debug/pprof/ /debug/pprof/goroutine?debug=1; do
    code=$(operator_get "$proxy_metrics$path" "$who")
    echo "  ${who%%-*} certificate: GET $path -> $code"
    [ "$code" = 403 ] || fail "$who read $path ($code), want 403"
    checks=$((checks + 1))
  done
done
code=$(curl -sS -o /dev/null -w '%{http_code}' --cacert "$work/certs/operator-ops/ca.pem" "$proxy_metrics/metrics" 2>/dev/null || true)
echo "  no certificate: GET /metrics -> $code"
[ "$code" = 000 ] || fail "a client without a certificate got $code"
code=$(operator_get "$proxy_metrics/debug/pprof/")
echo "  operator certificate: GET /debug/pprof/ -> $code"
[ "$code" = 200 ] || fail "the operator got $code for /debug/pprof/"
checks=$((checks + 2))

log "during the job"
p=$(scrape "$proxy_metrics")
check proxy "$p" fedpca_proxy_jobs state=open == 1
check proxy "$p" fedpca_proxy_uploads_total result=included == 2
check proxy "$p" fedpca_proxy_upload_bytes_total '>' 100000
check proxy "$p" fedpca_grpc_payload_bytes_total direction=received peer_role=owner '>' 100000
check proxy "$p" fedpca_proxy_phase_seconds_count phase=fold == 2
check proxy "$p" fedpca_proxy_phase_seconds_sum phase=fold '>' 0
check proxy "$p" fedpca_rpc_requests_total method=ProxyService/Upload code=OK == 2
check proxy "$p" fedpca_rpc_requests_total method=ProxyService/GetPublished code=FailedPrecondition == 1
check proxy "$p" fedpca_rpc_client_requests_total method=CspService/GetStatus code=OK '>' 0
check proxy "$p" fedpca_proxy_committee_ready == 1
check proxy "$p" fedpca_proxy_committee_member_up == 3
for o in a b; do
  check proxy "$p" fedpca_proxy_owner_budget_rho owner=hospital-$o kind=remaining '>' 0
done
for o in a b; do
  m="owner_${o}_metrics"; t=$(scrape "${!m}")
  check "owner hospital-$o" "$t" fedpca_owner_uploads_total result=acknowledged == 1
  check "owner hospital-$o" "$t" fedpca_owner_upload_bytes_total '>' 100000
  check "owner hospital-$o" "$t" fedpca_grpc_payload_bytes_total direction=sent peer_role=proxy '>' 100000
  check "owner hospital-$o" "$t" fedpca_owner_share_seconds_count == 1
  check "owner hospital-$o" "$t" fedpca_owner_upload_seconds_count == 1
  check "owner hospital-$o" "$t" fedpca_owner_encryptions_prepared == 0
  check "owner hospital-$o" "$t" fedpca_rpc_client_requests_total method=ProxyService/Upload code=OK == 1
  check "owner hospital-$o" "$t" fedpca_owner_budget_rho dataset=wdbc kind=spent '>' 0
  check "owner hospital-$o" "$t" fedpca_owner_budget_rho dataset=wdbc kind=remaining '>' 0
done
for i in 1 2 3; do
  m="csp${i}_metrics"; t=$(scrape "${!m}")
  check "csp-$i" "$t" fedpca_csp_ready == 1
  check "csp-$i" "$t" fedpca_rpc_requests_total method=CspService/GetStatus code=OK '>' 0
  check "csp-$i" "$t" fedpca_grpc_payload_bytes_total direction=sent peer_role=proxy '>' 0
done

log "waiting for the deadline: the job seals with 2 uploads and is key-switched"
deploy_wait_job metrics
log "after the job"
p=$(scrape "$proxy_metrics")
check proxy "$p" fedpca_proxy_jobs state=done == 1
check proxy "$p" fedpca_proxy_uploads_total result=included == 2
check proxy "$p" fedpca_proxy_phase_seconds_count phase=seal == 1
check proxy "$p" fedpca_proxy_phase_seconds_count phase=key_switch == 1
check proxy "$p" fedpca_proxy_key_switch_requests_total result=ok == 2
check proxy "$p" fedpca_rpc_client_requests_total method=CspService/KeySwitch code=OK == 2
check proxy "$p" fedpca_grpc_payload_bytes_total direction=sent peer_role=csp '>' 100000
check proxy "$p" fedpca_grpc_payload_bytes_total direction=sent peer_role=user '>' 100000
all=""
for i in 1 2 3; do m="csp${i}_metrics"; all+=$(scrape "${!m}")$'\n'; done
check "csp (all 3)" "$all" fedpca_csp_key_switches_total result=switched == 2
check "csp (all 3)" "$all" fedpca_csp_key_switch_seconds_count == 2
check "csp (all 3)" "$all" fedpca_rpc_requests_total method=CspService/KeySwitch code=OK == 2
check "csp (all 3)" "$all" fedpca_grpc_payload_bytes_total direction=received peer_role=proxy '>' 100000
for o in a b; do
  m="owner_${o}_metrics"
  # Once it learns that the job ended, an owner prepares its next share's
  # encryption of zero (one ciphertext for wdbc): give it up to 5 s.
  for _ in $(seq 50); do
    t=$(scrape "${!m}")
    [ "$(series_value "$t" fedpca_owner_encryptions_prepared)" = 1 ] && break
    sleep 0.1
  done
  check "owner hospital-$o" "$t" fedpca_owner_encryptions_prepared == 1
  check "owner hospital-$o" "$t" fedpca_owner_budget_rho dataset=wdbc kind=reserved == 0
  check "owner hospital-$o" "$t" fedpca_owner_budget_rho dataset=wdbc kind=remaining '>' 0
done
log "metrics-check: all $checks checks passed"
