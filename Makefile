# fedpca — federated, differentially private PCA / DCA / LDA.
# `make help` lists the targets.

GO       ?= go
PKGS     ?= ./...
BENCHTIME ?= 5x

.DEFAULT_GOAL := help

.PHONY: help
help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

# The tests whose cost is computation in one goroutine or a statistic over
# many runs (the members' MPC programs, the golden eigensolvers, 10,000
# ciphertexts, a 100-job memory run, the deviations' episodes, the relaxed
# proof's soundness, the power jobs' rounds): the race detector finds nothing in
# them that the race run's daemon tests do not exercise, and makes them 5
# to 8 times slower, so they run once, without it, after the race run.
HEAVY := TestNoiseMargin10k|TestGoldenDatasets|TestDCAGolden|TestRunWineParties
HEAVY := $(HEAVY)|TestPowerJobDP|TestPowerJobNoiseless|TestPowerGenotypesDaemons|TestPowerDaemons|TestLongRunFlat
HEAVY := $(HEAVY)|TestComponentsWine|TestComponentsDCAWine|TestComponentsLeakNothing|TestComponentsAsProcesses
HEAVY := $(HEAVY)|TestComponentsDPMatchesStatistics|TestDPDCASelection|TestComponentsDPDiscriminant|TestComponentsDPWine
HEAVY := $(HEAVY)|TestPipelineMatchesExactOnDatasets|TestSymEig|TestFromModTChunks|TestReplicatedView
HEAVY := $(HEAVY)|TestDeviatingProxy|TestProfileWideBoundsManyRows|TestCohortProfile|TestRelaxedRelation|TestPlanSummedVariance
HEAVY := $(HEAVY)|TestSteps|TestRunWine|TestEndToEndNoNoise|TestScalarFunctions|TestMSBShiftAndRecip|TestReplicatedCheatingOpening
# go test starts the packages' tests in the order it is given them, two at a
# time on two cores: the longest first (measured: the race run's sim 239 s,
# cmd/fedpca 208 s, sim/chaos 97 s; the heavy run's sim 152 s,
# protocol/eigen 101 s, protocol/mpc 61 s), so that no long package starts
# last while the other core idles (the default order started sim after
# every other package: 100 s of the race run and 50 s of the heavy run).
HEAVY_PKGS := ./sim ./protocol/eigen ./protocol/mpc ./cmd/fedpca ./protocol/he ./protocol/job ./sim/chaos ./protocol/dp ./protocol/zk
RACE_PKGS := $(if $(filter ./...,$(PKGS)),./sim ./cmd/fedpca ./sim/chaos ./...,$(PKGS))

.PHONY: test
test: ## run every test with the race detector, then the heavy computations without it (what CI runs)
	$(GO) test -race -timeout 60m -skip '^($(HEAVY))$$' $(RACE_PKGS)
	$(GO) test -count 1 -timeout 30m -run '^($(HEAVY))$$' $(HEAVY_PKGS)

.PHONY: test-short
test-short: ## the fast tier: every package's unit tests with -short (no race detector; about 2.5 minutes on 2 cores)
	$(GO) test -short -timeout 10m $(PKGS)

.PHONY: check
check: ## gofmt, go vet, staticcheck, import boundaries, regenerated protos, docs/CLI.md fresh, go mod tidy clean
	./scripts/check.sh

BENCHSTAT ?= golang.org/x/perf/cmd/benchstat@v0.0.0-20250813145418-2f7363a06fe1
COUNT ?= 6

.PHONY: bench
bench: ## benchmarks of the hot paths, COUNT runs each, medians by benchstat (out/bench.txt)
	@mkdir -p out
	$(GO) test -run '^$$' -bench . -benchtime $(BENCHTIME) -count $(COUNT) ./protocol/... | tee out/bench.txt
	$(GO) run $(BENCHSTAT) out/bench.txt

.PHONY: load
load: ## 1,000 owners upload at once to a proxy process over loopback mutual TLS: throughput, latency, proxy CPU and memory
	BENCH_PROXY_GOMEMLIMIT=256MiB $(GO) run ./bench -suite load -owners $${OWNERS:-1000}

.PHONY: fuzz
fuzz: ## run every fuzz target for FUZZTIME each (default 30s; nightly: FUZZTIME=10m), FUZZPARALLEL workers each, FUZZJOBS targets at once
	./scripts/fuzz.sh $${FUZZTIME:-30s}

.PHONY: docs
docs: ## regenerate docs/CLI.md, the CLI reference, from the code (make check fails when it is stale)
	$(GO) run ./cmd/fedpca cli-reference > docs/CLI.md

.PHONY: walkthrough
walkthrough: ## run the README's "Your first deployment" exactly as written, in a scratch directory
	./scripts/walkthrough.sh

.PHONY: proto
proto: ## lint and regenerate proto/fedpca/v1/*.pb.go with buf
	cd proto && go tool -modfile=../tools/go.mod buf lint && go tool -modfile=../tools/go.mod buf generate

.PHONY: e2e-docker
e2e-docker: ## build the image, run the docker-compose deployment end to end, tear it down
	./deploy/e2e.sh

.PHONY: e2e-k8s
e2e-k8s: ## root: build a single-node Kubernetes (Go modules, cached), install each node as a release of its own organisation (own namespace, own CA), isolation checks, jobs and faults, uninstall, leave the machine as found
	./deploy/k8s/e2e.sh

.PHONY: status-browser
status-browser: ## the proxy's status page in headless Chromium (installs Debian's chromium if missing), screenshot in docs/
	./scripts/status-browser.sh

.PHONY: metrics-check
metrics-check: ## curl every daemon's /metrics during and after a real job and check the series
	./scripts/metrics-check.sh

SEED ?= 1
CHAOS_JOBS ?= 200
CHAOS_LOAD ?= 0

.PHONY: chaos
chaos: ## CHAOS_JOBS simulated jobs (default 200) under random faults from SEED, CHAOS_LOAD cores kept busy; prints the invariants, fails on any violation
	@mkdir -p out
	$(GO) run ./cmd/fedpca simulate chaos --seed $(SEED) --jobs $(CHAOS_JOBS) --load-cores $(CHAOS_LOAD) --load-for 30m --json out/chaos-report.json
