# wait_for DESCRIPTION SECONDS COMMAND...: runs COMMAND (its output dropped)
# every 0.2 s until it succeeds; after SECONDS says what it waited for and
# returns 1. Sourced by scripts/lib/deployment.sh and deploy/k8s/cluster.sh.
wait_for() {
  local what=$1 secs=$2; shift 2
  for _ in $(seq 1 $(( secs * 5 ))); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "${script_name:-wait_for}: timed out after ${secs}s waiting for $what" >&2
  return 1
}
