#!/usr/bin/env bash
# The clinical trial of issue 43 (docs/trial/pima/README.md), as a newcomer
# would walk it: a committee of three, the proxy, three hospitals and a
# data user, each a process of its own over mutual TLS on loopback, from
# the README alone. Run from the root of a clone:
#
#   ./docs/trial/pima/walk.sh [SCRATCH]     # default: a new temporary directory
#
# It writes every command's output to SCRATCH/transcript/NN-name.txt and
# leaves the processes' logs in SCRATCH/logs. Ports 7100-7103. REPS (default
# 5) is how many times both PCA pipelines run in all, to measure their
# spread: the owners' budgets are 50 for that.
set -euo pipefail
scratch=${1:-$(mktemp -d)}
mkdir -p "$scratch"/{transcript,logs}
go build -o "$scratch/fedpca" ./cmd/fedpca
go build -o "$scratch/pima" ./docs/trial/pima
cd "$scratch"
./pima gen -out data > transcript/00-gen.txt

pids=()
stop() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap stop EXIT
step() { # step NN-name command...: run, keep the output, show it
  local name=$1; shift
  echo "== $name: $*" | tee "transcript/$name.txt"
  "$@" 2>&1 | tee -a "transcript/$name.txt"
}

./fedpca certs --out certs proxy/proxy csp/csp-1 csp/csp-2 csp/csp-3 \
  owner/hospital-a owner/hospital-b owner/hospital-c user/alice > transcript/01-certs.txt
for i in 1 2 3; do
  ./fedpca csp serve --certs certs/csp-csp-$i --state state/csp-$i --listen localhost:710$i 2>logs/csp-$i.log &
  pids+=($!)
done
./fedpca proxy serve --certs certs/proxy-proxy --state state/proxy --listen localhost:7100 \
  --csp csp-1=localhost:7101 --csp csp-2=localhost:7102 --csp csp-3=localhost:7103 --threshold 2 2>logs/proxy.log &
pids+=($!)

# Each hospital checks its export first; hospital-c's is written with ';'
# and decimal commas, its own format.
src() { case $1 in hospital-c) echo "data/$1.csv#delimiter=;&decimal_comma=true";; *) echo "data/$1.csv";; esac; }
for h in hospital-a hospital-b hospital-c; do
  step "02-check-$h" ./fedpca owner check --dataset "data/bounds.schema.json=$(src $h)"
done
committee=(--committee csp-1,csp-2,csp-3)
for h in hospital-a hospital-b hospital-c; do
  extra=()
  if [ "$h" = hospital-b ]; then extra=(--max-epsilon 1.5); fi   # its governance caps a job's epsilon
  # The declared schema of bounds: the owners take part under any schema
  # that reads their rows alike (the profile's, the reference's).
  ./fedpca owner serve --certs "certs/owner-$h" --state "state/$h" --proxy localhost:7100 "${committee[@]}" \
    --dataset "data/bounds.schema.json=$(src $h)" --budget-epsilon 50 "${extra[@]}" 2>"logs/$h.log" &
  pids+=($!)
done
./fedpca user keygen --keys keys > /dev/null
conn=(--certs certs/user-alice --keys keys --proxy localhost:7100 "${committee[@]}")
owners=(--owners hospital-a,hospital-b,hospital-c)

# The fully private pipeline: the profile job chooses centers, scales and C,
# then the main PCA at the epsilon it leaves.
step 03-profile ./fedpca user profile "${conn[@]}" --schema data/bounds.schema.json "${owners[@]}" --epsilon 1 --out profile
main=$(sed -n 's/^the main job (pca) may spend epsilon \([0-9.e-]*\) .*/\1/p' transcript/03-profile.txt)
step 04-pca-private ./fedpca user run "${conn[@]}" --schema profile/schema.json "${owners[@]}" \
  --epsilon "$main" --standardize -k 3 --out pca-private --plots plots
# With public reference centers and scales (the published table): the norms
# round alone chooses C, then the main PCA, unstandardised.
step 05-profile-public ./fedpca user profile "${conn[@]}" --schema data/reference.schema.json "${owners[@]}" \
  --epsilon 1 --keep-scales --out profile-public
main=$(sed -n 's/^the main job (pca) may spend epsilon \([0-9.e-]*\) .*/\1/p' transcript/05-profile-public.txt)
step 06-pca-public ./fedpca user run "${conn[@]}" --schema profile-public/schema.json "${owners[@]}" \
  --epsilon "$main" -k 3 --out pca-public
# LDA of the outcome at epsilon 1, and a DCA at epsilon 2, above
# hospital-b's cap: it declines saying so, the job goes on without it.
step 07-lda ./fedpca user run "${conn[@]}" --schema data/reference.schema.json "${owners[@]}" \
  --analysis lda --epsilon 1 --out lda --plots plots
step 08-dca-over-cap ./fedpca user run "${conn[@]}" --schema data/reference.schema.json "${owners[@]}" --min-owners 2 \
  --analysis dca --epsilon 2 --out dca
# What the governance officer and the committee's operator see, the nodes
# running.
step 09-ledger ./fedpca owner ledger --state state/hospital-a
step 10-audit ./fedpca csp audit --state state/csp-1
# The utility against the central analysis of the same rows.
step 11-measure-pca-private ./pima measure -data data -result pca-private/result.json -schema profile/schema.json
step 12-measure-pca-public ./pima measure -data data -result pca-public/result.json -schema profile-public/schema.json
step 13-measure-lda ./pima measure -data data -result lda/result.json
# Both PCA pipelines again, REPS times in all: the spread of one run.
pipelines() { # pipelines N: the fully private one and the public scales', measured
  local r=$1
  ./fedpca user profile "${conn[@]}" --schema data/bounds.schema.json "${owners[@]}" --epsilon 1 --out "rep$r/profile" > "rep$r.profile.txt" 2>&1
  local e
  e=$(sed -n 's/^the main job (pca) may spend epsilon \([0-9.e-]*\) .*/\1/p' "rep$r.profile.txt")
  ./fedpca user run "${conn[@]}" --schema "rep$r/profile/schema.json" "${owners[@]}" --epsilon "$e" --standardize -k 3 --out "rep$r/private" --quiet > /dev/null
  ./fedpca user profile "${conn[@]}" --schema data/reference.schema.json "${owners[@]}" --epsilon 1 --keep-scales --out "rep$r/profile-public" > "rep$r.public.txt" 2>&1
  e=$(sed -n 's/^the main job (pca) may spend epsilon \([0-9.e-]*\) .*/\1/p' "rep$r.public.txt")
  ./fedpca user run "${conn[@]}" --schema "rep$r/profile-public/schema.json" "${owners[@]}" --epsilon "$e" -k 3 --out "rep$r/public" --quiet > /dev/null
  echo "run $r, fully private: $(./pima measure -data data -result "rep$r/private/result.json" -schema "rep$r/profile/schema.json" | tr '\n' ' ')"
  echo "run $r, public scales: $(./pima measure -data data -result "rep$r/public/result.json" -schema "rep$r/profile-public/schema.json" | tr '\n' ' ')"
}
{
  for r in $(seq 2 "${REPS:-5}"); do pipelines "$r"; done
} | tee transcript/14-repeats.txt
echo "transcript in $scratch/transcript"
