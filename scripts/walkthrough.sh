#!/usr/bin/env bash
# make walkthrough: runs the README's deployment blocks exactly as written
# (extracted from README.md, not a copy), each in a scratch copy of the
# working tree, then checks what it left and stops the daemons it started.
#   scripts/walkthrough.sh            both: "Your first deployment", then "A federation of organisations"
#   scripts/walkthrough.sh first      "Your first deployment" only
#   scripts/walkthrough.sh federation "A federation of organisations" only
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
which=${1:-all}
if [ "$which" = all ]; then
  "$0" first
  exec "$0" federation
fi
case "$which" in
  first) marker='<!-- walkthrough: scripts/walkthrough.sh runs this block as written -->' ;;
  federation) marker='<!-- walkthrough federation: scripts/walkthrough.sh runs this block as written -->' ;;
  *) echo "walkthrough: unknown block $which (want first or federation)" >&2; exit 2 ;;
esac
work="$(mktemp -d "${TMPDIR:-/tmp}/fedpca-walkthrough.XXXXXX")"
keep=${KEEP:-}
cleanup() { [ -n "$keep" ] || rm -rf "$work"; }
trap cleanup EXIT

# The block: the first fenced block after the marker line.
awk -v m="$marker" '
  $0 == m { found = 1; next }
  found && !inblock && /^```/ { inblock = 1; next }
  inblock && /^```/ { exit }
  inblock { print }
' "$root/README.md" >"$work/walkthrough.sh"
if [ ! -s "$work/walkthrough.sh" ]; then
  echo "walkthrough: README.md has no block after: $marker" >&2; exit 1
fi
echo "== walkthrough: the README's block, run in $work"
cat "$work/walkthrough.sh"

# A scratch copy of the clone (tracked and untracked files, not ignored
# ones), so that the block's files land there as they would in a clone.
mkdir -p "$work/clone"
(cd "$root" && git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$work/clone" 2>/dev/null || true)
cp "$work/walkthrough.sh" "$work/clone/.walkthrough.sh"

echo "== running"
start=$(date +%s)
status=0
(
  cd "$work/clone"
  # The block's daemons are this shell's jobs: stop them however it ends.
  bash -c 'set -euo pipefail; trap "kill \$(jobs -p) 2>/dev/null; wait 2>/dev/null" EXIT; source ./.walkthrough.sh'
) 2>&1 | tee "$work/output.txt" || status=$?
if [ "$status" -ne 0 ]; then
  echo "walkthrough: the README's block failed (exit $status); the daemons' logs:" >&2
  tail -n 20 "$work"/clone/logs/*.log >&2 || true
  keep=1; echo "kept $work" >&2
  exit 1
fi

echo "== checking what it printed and left"
if [ "$which" = federation ]; then
  cd "$work/clone"
  [ -s out/result.json ] || { echo "walkthrough: out/result.json missing" >&2; exit 1; }
  grep -q '^noise in the result: ' "$work/output.txt" || { echo "walkthrough: user run printed no noise figures" >&2; exit 1; }
  # Each organisation's CA key is in its own directory only; no node's
  # credentials and no bundle hold a CA key, and bundles hold no key at all.
  for org in orgs/*/; do
    [ -s "$org/ca/ca-key.pem" ] || { echo "walkthrough: $org has no CA key of its own" >&2; exit 1; }
  done
  if find orgs -name ca-key.pem | grep -v '^orgs/[^/]*/ca/ca-key.pem$'; then
    echo "walkthrough: a CA key outside its organisation's ca/" >&2; exit 1
  fi
  if grep -l 'PRIVATE KEY' bundles/*.json; then echo "walkthrough: a bundle holds a private key" >&2; exit 1; fi
  # Every node was issued by its own organisation's CA only.
  for d in orgs/*/*-*/; do
    org=$(basename "$(dirname "$d")")
    grep -q "spiffe://$org/" <(./fedpca certs show --certs "$d" | head -1) || { echo "walkthrough: $d is not of trust domain $org" >&2; exit 1; }
  done
  echo "walkthrough federation: ok in $(( $(date +%s) - start )) s"
  exit 0
fi
# A command that writes a result says what it is worth: the job's noise,
# and a warning for each component the noise may account for.
grep -q '^noise in the result: ' "$work/output.txt" || { echo "walkthrough: user run printed no noise figures" >&2; exit 1; }
if grep -q '"warnings"' "$work/clone/out/result.json" && ! grep -q '^warning: component' "$work/output.txt"; then
  echo "walkthrough: result.json has quality warnings that user run did not print" >&2; exit 1
fi
cd "$work/clone"
for f in out/result.json out/components.csv out/components.npy out/release.json out/covariance/covariance.json \
         out/covariance/covariance.csv out/wdbc-pca-scree.png data/schema.json keys/he-secret.key; do
  [ -s "$f" ] || { echo "walkthrough: $f missing" >&2; exit 1; }
done
# A hand deployment leaves nothing git would show: .gitignore covers it.
for f in fedpca certs/ca/ca-key.pem keys/he-secret.key state/proxy/proxy.db out/result.json data/schema.json logs/proxy.log; do
  [ -e "$f" ] || { echo "walkthrough: expected $f" >&2; exit 1; }
  git -C "$root" check-ignore -q "$f" || { echo "walkthrough: .gitignore does not cover $f, which a hand deployment makes" >&2; exit 1; }
done
echo "walkthrough: ok in $(( $(date +%s) - start )) s"
