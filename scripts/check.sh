#!/usr/bin/env bash
# make check: formatting, vet, staticcheck, import boundaries, tidy go.mod.
set -euo pipefail
cd "$(dirname "$0")/.."
fail=0

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null; git ls-files --others --exclude-standard '*.go' 2>/dev/null) 2>/dev/null || true)
if [ -n "$unformatted" ]; then echo "gofmt would change:"; echo "$unformatted"; fail=1; fi

echo "== go vet"
go vet ./... || fail=1

echo "== staticcheck"
go tool staticcheck ./... || fail=1

echo "== import boundaries"
./scripts/check-imports.sh || fail=1

echo "== protos (buf lint; regenerating changes nothing)"
(cd proto && go tool -modfile=../tools/go.mod buf lint) || fail=1
(cd proto && go tool -modfile=../tools/go.mod buf generate) || fail=1
if [ -n "$(git status --porcelain -- proto/)" ]; then
  echo "regenerated protos differ from the committed ones:"; git status --porcelain -- proto/; fail=1
fi

echo "== go mod tidy"
cp go.mod /tmp/fedpca-go.mod.$$; cp go.sum /tmp/fedpca-go.sum.$$
go mod tidy
if ! diff -q go.mod /tmp/fedpca-go.mod.$$ >/dev/null || ! diff -q go.sum /tmp/fedpca-go.sum.$$ >/dev/null; then
  echo "go mod tidy changed go.mod/go.sum: commit the tidy result"; fail=1
  cp /tmp/fedpca-go.mod.$$ go.mod; cp /tmp/fedpca-go.sum.$$ go.sum
fi
rm -f /tmp/fedpca-go.mod.$$ /tmp/fedpca-go.sum.$$

if [ "$fail" -ne 0 ]; then echo "check: FAILED"; exit 1; fi
echo "check: ok"
