#!/usr/bin/env bash
# Run every fuzz target of the module for the given time each (default
# 30s). `make fuzz FUZZTIME=10m` is the nightly run. FUZZPARALLEL sets the
# fuzzing workers of each target (default: GOMAXPROCS); FUZZJOBS runs that
# many targets at once (default 1: one after the other, output streamed).
# Targets are found with `go test -list`, so a new Fuzz function is picked
# up with no change here. New crashers are written to the package's
# testdata/fuzz/ and, once committed, run as regression tests in every
# `make test`. The last lines are a summary: each target's final execution
# count and result.
set -euo pipefail
cd "$(dirname "$0")/.."
export FUZZTIME=${1:-30s}
jobs=${FUZZJOBS:-1}
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
export LOGS=$logs

# run_one PKG TARGET: fuzz one target; its output goes to $LOGS/N.log (and to
# stdout when targets run one at a time), its summary line to $LOGS/N.sum.
run_one() {
  local n=$1 pkg=$2 target=$3 out="$LOGS/$1.log" result=ok parallel=()
  if [ -n "${FUZZPARALLEL:-}" ]; then parallel=(-parallel "$FUZZPARALLEL"); fi
  echo "== $pkg $target ($FUZZTIME)" > "$out"
  if [ "${STREAM:-}" = 1 ]; then cat "$out"; fi
  if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$FUZZTIME" "${parallel[@]}" "$pkg" >> "$out" 2>&1; then
    result=FAILED
  fi
  if [ "${STREAM:-}" = 1 ]; then tail -n +2 "$out"; else cat "$out"; fi
  local last
  last=$(grep -E '^fuzz: elapsed' "$out" | tail -n1 || true)
  printf '%-8s %-45s %s\n' "$result" "${pkg#github.com/fedpca/fedpca/} $target" "${last#fuzz: }" > "$LOGS/$n.sum"
}
export -f run_one
if [ "$jobs" = 1 ]; then export STREAM=1; fi

n=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    n=$((n + 1))
    printf '%d %s %s\n' "$n" "$pkg" "$target"
  done
done > "$logs/targets"
xargs -P "$jobs" -L 1 bash -c 'run_one "$@"' _ < "$logs/targets"

echo "== summary: $n fuzz targets, $FUZZTIME each, $jobs at a time"
fail=0
for i in $(seq 1 "$n"); do
  cat "$logs/$i.sum"
  if grep -q '^FAILED' "$logs/$i.sum"; then fail=1; fi
done
exit $fail
