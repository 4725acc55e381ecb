# pushfan — `make` (or `make help`) lists the targets.

GO ?= go
# Go from the official tarball lives in /usr/local/go/bin, which is not always on PATH.
ifeq ($(shell command -v $(GO) 2>/dev/null),)
  ifneq ($(wildcard /usr/local/go/bin/go),)
    GO := /usr/local/go/bin/go
  endif
endif
GOFMT ?= $(shell $(GO) env GOROOT 2>/dev/null)/bin/gofmt

BIN := bin/pushfan

.DEFAULT_GOAL := help
.PHONY: help build run stop test lint bench-go tidy clean

help: ## list the targets
	@echo "usage: make <target>"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build the one binary into bin/pushfan
	$(GO) build -o $(BIN) ./cmd/pushfan

run: ## run the local demo: MariaDB, migrate, seed, FCM emulator, serve (PUSHFAN_DETACH=1: return once up)
	@bash scripts/run-local.sh

stop: ## stop what `make run` started (pids in .run/)
	@bash scripts/run-local.sh stop

test: ## ensure MariaDB is up, then run every test with the race detector
	bash scripts/ensure-mysql.sh
	$(GO) test -race -count=1 -timeout 20m ./...

lint: ## gofmt -l must list nothing; go vet
	@echo "$(GOFMT) -l ."
	@files="$$($(GOFMT) -l .)" || { echo "gofmt failed (syntax error?)"; exit 1; }; \
	if [ -n "$$files" ]; then \
		echo "these files are not gofmt-formatted (fix: gofmt -w <file>):"; \
		echo "$$files" | sed 's/^/  /'; \
		exit 1; \
	fi
	$(GO) vet ./...

bench-go: ## run the Go benchmarks (no tests)
	$(GO) test -run '^$$' -bench . -benchmem ./...

tidy: ## go mod tidy
	$(GO) mod tidy

clean: stop ## stop the demo, remove bin/ and the logs and pid files in .run/ (keeps the dev admin token)
	rm -rf bin
	rm -f .run/*.pid .run/*.log
