#!/usr/bin/env bash
# Run every fuzz target of the module, one after the other, for the given
# time each (default 30s). `make fuzz FUZZTIME=10m` is the nightly run.
# FUZZPARALLEL sets the fuzzing workers (default: GOMAXPROCS). Targets are
# found with `go test -list`, so a new Fuzz function is picked up with no
# change here. New crashers are written to the package's testdata/fuzz/ and,
# once committed, run as regression tests in every `make test`. The last
# lines are a summary: each target's final execution count and result.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-30s}
parallel=()
if [ -n "${FUZZPARALLEL:-}" ]; then parallel=(-parallel "$FUZZPARALLEL"); fi
summary=$(mktemp)
trap 'rm -f "$summary"' EXIT
fail=0
n=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    n=$((n + 1))
    echo "== $pkg $target ($fuzztime)"
    out=$(mktemp)
    if go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "${parallel[@]}" "$pkg" 2>&1 | tee "$out"; then
      result=ok
    else
      result=FAILED; fail=1
    fi
    last=$(grep -E '^fuzz: elapsed' "$out" | tail -n1 || true)
    printf '%-8s %-45s %s\n' "$result" "${pkg#github.com/fedpca/fedpca/} $target" "${last#fuzz: }" >> "$summary"
    rm -f "$out"
  done
done
echo "== summary: $n fuzz targets, $fuzztime each"
cat "$summary"
exit $fail
