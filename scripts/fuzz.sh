#!/usr/bin/env bash
# Run every fuzz target of the module for the given time each (default 30s).
# `make fuzz FUZZTIME=10m` is the nightly run. New crashers are written to the
# package's testdata/fuzz/ and, once committed, run as regression tests in
# every `make test`.
set -euo pipefail
cd "$(dirname "$0")/.."
fuzztime=${1:-30s}
fail=0
for pkg in $(go list ./...); do
  for target in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "== $pkg $target ($fuzztime)"
    if ! go test -run '^$' -fuzz "^${target}\$" -fuzztime "$fuzztime" "$pkg"; then
      echo "FAILED: $pkg $target"; fail=1
    fi
  done
done
exit $fail
