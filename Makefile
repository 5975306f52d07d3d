# Parley — developer API suite. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Every module of go.work; `go test ./...` at the root does not cross modules.
MODULES  := $(shell go list -m -f '{{.Dir}}' 2>/dev/null)
SERVICES := gateway messaging webhook-dispatcher flow-runner console
BIN      := $(CURDIR)/bin
TOOLS    := $(BIN)/tools

BUF_VERSION           := v1.75.0
PROTOC_GEN_GO_VERSION := v1.36.12

GO_TEST_FLAGS ?= -count=1 -race -timeout 15m

.PHONY: help run test build bench bench-e2e lint proto proto-check tidy deps compose-check k8s-check clean

help: ## list the targets
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_-]+:.*## / {printf "  make %-14s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

run: build ## bring the whole suite up on this machine with a demo workspace and console login, on 127.0.0.1 (Ctrl-C stops it)
	@# exec: run.sh is make's own child, so the SIGTERM make hands on reaches it.
	@exec scripts/run.sh

test: deps ## every module's unit, integration and end-to-end tests, against real PostgreSQL, Redis and NATS
	@# Every module runs even when one fails; the failures are named at the end.
	@failed=""; for m in $(MODULES); do \
		echo "== $${m#$(CURDIR)/}"; \
		(cd $$m && go test $(GO_TEST_FLAGS) ./...) || failed="$$failed $${m#$(CURDIR)/}"; \
	done; \
	if [ -n "$$failed" ]; then echo "make test: FAILED in:$$failed"; exit 1; fi; \
	echo "make test: every module passed"

build: ## build the services, parleyctl, the local Telegram and LLM sandboxes and the example webhook receiver into bin/
	@mkdir -p $(BIN)
	@for s in $(SERVICES) parleyctl; do \
		go build -o $(BIN)/$$s ./services/$$s || exit 1; \
	done
	@go build -o $(BIN)/telegram-sandbox ./e2e/cmd/telegram-sandbox
	@go build -o $(BIN)/llm-sandbox ./e2e/cmd/llm-sandbox
	@go build -o $(BIN)/webhook-receiver ./e2e/cmd/webhook-receiver
	@echo "built: $(SERVICES) parleyctl telegram-sandbox llm-sandbox webhook-receiver -> bin/"

bench: deps ## run the benchmarks and write bench/report.txt
	@mkdir -p bench
	@# pipefail: a failing benchmark fails the target, not just its line in the report.
	@set -eo pipefail; for m in $(MODULES); do \
		(cd $$m && go test -run '^$$' -bench . -benchmem -count 1 -timeout 30m ./...); \
	done | tee bench/report.txt

# Flags for BenchmarkPipeline after the issue's sizes, e.g.
# make bench-e2e BENCH_E2E_FLAGS='-pipeline.messages 2000 -pipeline.paced 2000 -pipeline.kill-messages 2000' for a quick run.
# The paced lines run at half of pipeline-max's measured rate unless -pipeline.rate N forces one.
BENCH_E2E_FLAGS ?=

bench-e2e: deps ## the whole pipeline through the built binaries (Telegram ingress to signed webhook) beside same-run baselines; writes bench/e2e.txt
	@mkdir -p bench
	@# The e2e TestMain builds the binaries; every run sends its own sizes, so once (-benchtime 1x).
	@set -o pipefail; cd e2e && go test -run '^$$' -bench '^BenchmarkPipeline$$' -benchtime 1x -timeout 30m . \
		-pipeline.messages 20000 -pipeline.paced 20000 $(BENCH_E2E_FLAGS) | tee ../bench/e2e.txt

lint: proto-check ## gofmt, go vet per module, buf lint, stale generated code, GOWORK=off builds, tidy go.mod files
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do (cd $$m && go vet ./...); done
	@cd proto && $(TOOLS)/buf lint
	@# The Dockerfiles build each service on its own module; so must we.
	@for s in $(SERVICES) parleyctl; do (cd services/$$s && GOWORK=off go build -o /dev/null .) || exit 1; done
	@# go.work hides a requirement missing from a module's go.mod; alone, each must be tidy.
	@for m in $(MODULES); do (cd $$m && GOWORK=off go mod tidy -diff >/dev/null) || { echo "$$m: go.mod is not tidy (make tidy)"; exit 1; }; done
	@# The Go client is installed alone: it must build with the standard library only.
	@cd sdk/go && GOWORK=off go build ./...
	@echo "lint: clean"

proto: $(TOOLS)/buf $(TOOLS)/protoc-gen-go ## regenerate pkg/gen from proto/
	@cd proto && PATH=$(TOOLS):$$PATH $(TOOLS)/buf generate
	@echo "proto: regenerated pkg/gen"

proto-check: $(TOOLS)/buf $(TOOLS)/protoc-gen-go
	@tmp=$$(mktemp -d); trap 'rm -rf $$tmp' EXIT; \
	cd proto && PATH=$(TOOLS):$$PATH $(TOOLS)/buf generate -o $$tmp/proto >/dev/null && \
	if ! diff -r $$tmp/pkg/gen ../pkg/gen >/dev/null; then \
		echo "pkg/gen is stale: run make proto and commit the result"; diff -r $$tmp/pkg/gen ../pkg/gen | head -20; exit 1; \
	fi

$(TOOLS)/buf:
	GOBIN=$(TOOLS) go install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)

$(TOOLS)/protoc-gen-go:
	GOBIN=$(TOOLS) go install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)

tidy: ## go mod tidy in every module, then go work sync
	@for m in $(MODULES); do (cd $$m && go mod tidy) || exit 1; done
	@go work sync

deps: ## make sure PostgreSQL, Redis and NATS are up (starting or installing them)
	@scripts/deps.sh

k8s-check: ## render deploy/k8s (base and local overlay) with the kustomize API and check every object (also part of make test)
	@cd e2e && go test -count=1 -run '^TestK8s' .

compose-check: ## validate docker-compose.yml: `docker compose config`, or compose-go (its loader) without the plugin
	@if docker compose version >/dev/null 2>&1; then \
		docker compose config --quiet; \
	else \
		cd e2e && go test -count=1 -run '^TestComposeFileIsValid$$' . >/dev/null; \
	fi && echo "docker-compose.yml: valid"

clean: ## remove build output
	rm -rf $(BIN) bench
