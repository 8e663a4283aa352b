#!/usr/bin/env bash
# make status-browser: the proxy's status page in headless Chromium.
#
# Starts a deployment as processes (scripts/lib/deployment.sh: committee of 3,
# proxy with --status-listen on loopback, owners hospital-a and hospital-b),
# runs one job with both owners to the end, then submits a second job that
# also names hospital-c, who never runs, so it stays open after the two
# uploads. Loads the page with `chromium --headless --dump-dom` and checks that
# the open job, its three owners with their states and "2 of 3 uploaded"
# appear, checks the job's own page, and saves a screenshot in
# docs/status-page.png (OUT=path to put it elsewhere; JOB_OUT=path to also
# save the job's page). Installs Debian's
# chromium when no Chromium is found. Exits non-zero on any failure.
script_name=status-browser
source "$(dirname "$0")/lib/deployment.sh"
out=${OUT:-$root/docs/status-page.png}

browser=""
for b in chromium chromium-browser google-chrome; do
  if command -v "$b" >/dev/null; then browser=$b; break; fi
done
if [ -z "$browser" ]; then
  log "no Chromium found: installing Debian's chromium"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }
  browser=chromium
fi
log "browser: $("$browser" --version 2>/dev/null)"
chrome() { # URL, then extra flags
  local url=$1; shift
  timeout 120 "$browser" --headless --no-sandbox --disable-gpu --disable-dev-shm-usage --hide-scrollbars \
    --no-first-run --user-data-dir="$work/chromium" "$@" "$url" 2>>"$work/logs/chromium.log"
}

deploy_up
log "job 1: PCA with hospital-a and hospital-b, run to the end"
deploy_job first hospital-a,hospital-b
deploy_wait_job first
log "job 2: PCA naming hospital-a, hospital-b and hospital-c (never runs), min 2 owners, deadline in 10 minutes"
deploy_job second hospital-a,hospital-b,hospital-c --min-owners 2 --deadline 10m
deploy_wait_uploads 2
id=$(open_job_id)
[ -n "$id" ] || fail "no open job in status.json"
log "job $id is open with 2 of 3 uploads"

page="http://$status_addr/"
chrome "$page" --dump-dom >"$work/page.html" || fail "chromium could not load $page"
checks=0
check() { # DESCRIPTION FILE FIXED-STRING
  if grep -qF -- "$3" "$2"; then
    checks=$((checks + 1)); printf '  ok  %-52s %s\n' "$1" "$3"
  else
    printf '  MISSING %-48s %s\n' "$1" "$3"; fail "the page lacks $1"
  fi
}
log "checking the overview as Chromium rendered it ($(wc -c <"$work/page.html") bytes of DOM)"
check "the open job, linked to its page" "$work/page.html" "href=\"/jobs/$id\""
check "its state" "$work/page.html" '<span class="state open">open</span>'
check "its upload count" "$work/page.html" "2 of 3 uploaded"
check "its minimum" "$work/page.html" "min 2"
check "owner hospital-a, uploaded" "$work/page.html" '<li class="owner uploaded" title="uploaded">hospital-a</li>'
check "owner hospital-b, uploaded" "$work/page.html" '<li class="owner uploaded" title="uploaded">hospital-b</li>'
check "owner hospital-c, awaited" "$work/page.html" '<li class="owner waiting" title="waiting">hospital-c</li>'
check "the finished job" "$work/page.html" '<span class="state done">done</span>'
check "the committee key" "$work/page.html" '<span class="badge ok">ready</span>'
check "a healthy committee member" "$work/page.html" '<td class="mono">csp/csp-3</td>'
check "hospital-a's budget report" "$work/page.html" '<td class="mono">hospital-a</td>'

chrome "${page}jobs/$id" --dump-dom >"$work/job.html" || fail "chromium could not load the job page"
log "checking the job's page"
check "the job's full ID" "$work/job.html" "$id"
check "its upload count" "$work/job.html" "2 of 3 uploaded"
check "hospital-c, waiting" "$work/job.html" '<span class="owner waiting">waiting</span>'

mkdir -p "$(dirname "$out")"
chrome "$page" --window-size=1440,1080 --force-device-scale-factor=1 --screenshot="$out" >/dev/null ||
  fail "chromium could not take the screenshot"
[ -s "$out" ] || fail "no screenshot written"
log "screenshot: $out ($(wc -c <"$out") bytes)"
if [ -n "${JOB_OUT:-}" ]; then # the job's page too
  chrome "${page}jobs/$id" --window-size=1440,900 --force-device-scale-factor=1 --screenshot="$JOB_OUT" >/dev/null ||
    fail "chromium could not take the job page's screenshot"
  log "job page screenshot: $JOB_OUT"
fi
log "status-browser: all $checks checks passed"
