# amptcp. `make help` lists the targets; `make test` is what CI runs.
SHELL := /bin/bash
GO ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X github.com/amptcp/amptcp/internal/buildinfo.Version=$(VERSION)
FUZZTIME ?= 1m
FULL ?= 0

.PHONY: help build demo reproduce test test-long deps generate lint unit fuzz-smoke fuzz bench clean

help: ## list the targets
	@awk -F':.*## ' '/^[a-z-]+:.*## /{printf "  %-11s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build bin/amptcp and bin/lispd
	$(GO) build -ldflags '$(LDFLAGS)' -o bin/ ./cmd/...

demo: deps build ## the A-MPTCP paper's cloud-access experiment in the lab (a few minutes): a table of completion times, an HTML report
	@out=results/demo-$$(date +%Y%m%d-%H%M%S); \
	  bin/amptcp lab run -o $$out docs/scenarios/cloud-access.yaml; rc=$$?; \
	  if [[ -s $$out/runs.jsonl ]]; then bin/amptcp lab report $$out || rc=1; fi; exit $$rc

reproduce: deps build ## every paper's experiments in the lab, short versions (FULL=1: the papers' own, days), and their claims table
	@FULL=$(FULL) scripts/reproduce.sh

test: deps lint unit fuzz-smoke ## install what is missing, lint, run every test (privileged ones as root), fuzz briefly

deps: ## install the Debian packages and Go tools that are missing (idempotent)
	@scripts/deps.sh

generate: ## rebuild the eBPF objects (dataplane/lisp_bpfel.*, cc/cc_bpfel.*) from their C
	$(GO) generate ./dataplane ./cc

lint: ## gofmt, go vet, staticcheck, and eBPF objects that match their C
	@$(GO) generate ./dataplane ./cc && git diff --quiet -- dataplane/lisp_bpfel.go dataplane/lisp_bpfel.o cc/cc_bpfel.go cc/cc_bpfel.o || \
	  { echo "the committed eBPF objects do not match their C (dataplane/bpf/, cc/bpf/): run make generate and commit them"; exit 1; }
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	  if [[ -n $$out ]]; then echo "gofmt: these files need formatting:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	.tools/staticcheck ./...

# ./lab first: its tests take most of the run, one after the other, and go
# test starts packages in the order given, so the others fill the other CPUs
# alongside it instead of leaving it to run alone at the end.
unit: ## run every test once, with the race detector
	$(GO) test -race -count=1 ./lab ./...

test-long: deps ## the long proofs that make test leaves out (minutes of emulated traffic each), as root
	AMPTCP_LONG=1 AMPTCP_REQUIRE_PRIV=1 $(GO) test -count=1 -timeout 2h -run '$(or $(RUN),.)' ./cc/

fuzz-smoke: ## run every fuzz target for a few seconds
	@scripts/fuzz.sh 3s

fuzz: ## run every fuzz target for FUZZTIME (default 1m) each
	@scripts/fuzz.sh $(FUZZTIME)

bench: ## run the benchmarks, with allocations
	$(GO) test -run='^$$' -bench=. -benchmem ./...

clean: ## remove build outputs
	rm -rf bin out
