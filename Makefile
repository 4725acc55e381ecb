# pushfan — `make` (or `make help`) lists the targets.

GO ?= go
# Go from the official tarball lives in /usr/local/go/bin, which is not always on PATH.
ifeq ($(shell command -v $(GO) 2>/dev/null),)
  ifneq ($(wildcard /usr/local/go/bin/go),)
    GO := /usr/local/go/bin/go
  endif
endif
GOFMT ?= $(shell $(GO) env GOROOT 2>/dev/null)/bin/gofmt

BIN ?= bin/pushfan

# The one binary is static (no cgo: no libc to match, it runs FROM scratch)
# and carries its own CA roots and zones (cmd/pushfan/embedded.go).
# -trimpath: no build machine's paths in it. -buildvcs=auto: the revision
# and commit time that `pushfan version` prints are stamped even where a go
# env file turns stamping off (GOFLAGS=-buildvcs=false).
GOBUILD := CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=auto

.DEFAULT_GOAL := help
.PHONY: help build dist image run demo-reset stop console-shots test test-race-server test-race-rest test-short test-short-server test-short-rest lint helm-template docs chaos chaos-short bench-go bench bench-sweep bench-quota bench-latency bench-scale bench-outcomes bench-outcomes-10m bench-webhooks bench-caps bench-apps tidy clean

help: ## list the targets
	@echo "usage: make <target>"
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z0-9_.-]+:.*## / {printf "  %-10s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

build: ## build the one static binary into bin/pushfan
	$(GOBUILD) -o $(BIN) ./cmd/pushfan

# Release archives: pushfan-<version>-<os>-<arch>.tar.gz, each with the
# binary, the README and deploy/, and SHA256SUMS over them (sha256sum -c).
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
DIST ?= dist
DIST_PLATFORMS ?= linux/amd64 linux/arm64
# Named one by one: deploy/config/ and deploy/.env (compose's local
# config and secrets) must never reach an archive.
DIST_DEPLOY := deploy/compose.yaml deploy/pushfan.service deploy/pushfan.example.yaml

dist: ## build release archives for linux/amd64 and linux/arm64 into dist/, with SHA256SUMS
	rm -rf $(DIST)/pushfan-*-linux-* $(DIST)/SHA256SUMS
	mkdir -p $(DIST)
	set -e; for p in $(DIST_PLATFORMS); do \
		os=$${p%/*}; arch=$${p#*/}; name=pushfan-$(VERSION)-$$os-$$arch; \
		mkdir -p $(DIST)/$$name; \
		GOOS=$$os GOARCH=$$arch $(GOBUILD) -o $(DIST)/$$name/pushfan ./cmd/pushfan; \
		mkdir -p $(DIST)/$$name/deploy $(DIST)/$$name/docs; \
		cp README.md $(DIST)/$$name/; \
		cp $(DIST_DEPLOY) $(DIST)/$$name/deploy/; \
		cp docs/deployment.md $(DIST)/$$name/docs/; \
		tar -C $(DIST) --sort=name --owner=0 --group=0 --numeric-owner -czf $(DIST)/$$name.tar.gz $$name; \
		rm -rf $(DIST)/$$name; \
	done
	cd $(DIST) && sha256sum pushfan-*.tar.gz > SHA256SUMS
	@cat $(DIST)/SHA256SUMS

# The image: Containerfile, FROM scratch, built by buildah without a daemon
# (vfs storage and chroot isolation work on these machines, as root and in
# CI), exported twice: an OCI archive, and a docker archive. Both load
# with `docker load` and `podman load`; the OCI image format has no
# HEALTHCHECK, so only the docker archive carries the built-in one (the
# compose file states it either way).
BUILDAH ?= buildah --storage-driver vfs
IMAGE ?= localhost/pushfan:latest
IMAGE_CONTEXT ?= .
IMAGE_ARCHIVE ?= $(DIST)/pushfan-image.tar
IMAGE_DOCKER_ARCHIVE ?= $(DIST)/pushfan-image.docker.tar

image: build ## build the FROM scratch image with buildah (scripts/ensure-buildah.sh) into dist/pushfan-image.tar (OCI) and dist/pushfan-image.docker.tar
	$(BUILDAH) bud --isolation chroot --format docker -f Containerfile -t $(IMAGE) $(IMAGE_CONTEXT)
	mkdir -p $(dir $(IMAGE_ARCHIVE)) $(dir $(IMAGE_DOCKER_ARCHIVE))
	rm -f $(IMAGE_ARCHIVE) $(IMAGE_DOCKER_ARCHIVE)
	$(BUILDAH) push $(IMAGE) oci-archive:$(IMAGE_ARCHIVE):$(IMAGE)
	$(BUILDAH) push $(IMAGE) docker-archive:$(IMAGE_DOCKER_ARCHIVE):$(IMAGE)
	@echo "$(IMAGE): docker load -i $(IMAGE_ARCHIVE) (or podman load; $(IMAGE_DOCKER_ARCHIVE) keeps the HEALTHCHECK)"

run: ## run the local demo: MariaDB, migrate, seed, FCM emulator, serve (PUSHFAN_DETACH=1: return once up)
	@bash scripts/run-local.sh

demo-reset: ## stop the demo, drop its database (on this machine, holding the demo's users only) and run it again with fresh demo data
	@bash scripts/run-local.sh stop
	@PUSHFAN_DEMO_FRESH=1 bash scripts/run-local.sh

stop: ## stop what `make run` started (pids in .run/)
	@bash scripts/run-local.sh stop

# The real-process drills (kill -9, SIGTERM, replicas) measure duplicates
# against a bound in milliseconds of sending: they run on their own, after
# the rest, so that no other package's tests share the two cores with them.
DRILLS := TestKill9MidBroadcastResumesAfterRestart|TestSIGTERMReleasesLeasesAndAnotherInstanceFinishes|TestTwoProcesses|TestThreeProcessesShareOneQuota|TestKillOneOfThreeRebalancesTheBudget|TestUrgentSendsGoFirstOnOneProcess|TestKill9WhileEventsStreamIn|TestKill9SwitchesNoUsersVariant|TestKill9BeforeAWebhookIsDelivered|TestThreeInstancesDeliverEachEventOnce|TestKill9WithAFrequencyCapSendsEachUserOneBroadcast|TestBulkOfOneAppDoesNotHoldAnother|TestAppBesideASaturatedAppReachesItsQuota|TestThreeAppsAndATransactionalSendShareAnInstance|TestPausedHolderCountsItsSendsAfterACancel|TestFencedHoldersSendsCountAfterItsSuccessorCancels|TestRollingUpgradeFromThePreviousRelease|TestKill9KeepsOutcomesEqualToWhatWasSent

# The process drills measure timing at the default configuration against an
# in-process emulator that the race detector would slow several times over:
# they are left out of race builds (//go:build !race) and run alone, last.
test: ## ensure MariaDB, Chromium, buildah, Node.js and Prometheus are there, then run every test with the race detector, then the process drills alone
	bash scripts/ensure-mysql.sh
	bash scripts/ensure-chromium.sh
	bash scripts/ensure-buildah.sh
	bash scripts/ensure-node.sh
	bash scripts/ensure-prometheus.sh
	$(MAKE) --no-print-directory -j2 --output-sync=target test-race-server test-race-rest
	$(GO) test -count=1 -timeout 30m -run '$(DRILLS)' ./cmd/pushfan/

# Server's end-to-end suite is the longest (4-5 minutes under the race
# detector) and waits on timers and the emulator more than on the CPU: in
# package order it ran last and alone. It runs beside the other packages
# instead (which go test runs two at a time).
RACE_TEST = $(GO) test -race -count=1 -timeout 30m -skip '$(DRILLS)'

# One test at a time: under the race detector on CI's two cores the suite
# is CPU-bound, not waiting, and tests side by side only slowed each other
# and the other packages (four at a time: 1,162 s, and every other package
# two to three times slower; one at a time: 671 s). Its stack tests that
# keep no wall-clock window are t.Parallel for machines with cores to spare
# (go test ./server/ runs GOMAXPROCS of them at once).
test-race-server:
	$(RACE_TEST) -parallel 1 ./server/

test-race-rest:
	$(RACE_TEST) $$($(GO) list ./... | grep -v '^pushfan/server$$')

# The fast loop: lint, and every package's tests in short mode, without
# the race detector and without what make test installs (Chromium,
# buildah, Node.js, Prometheus) or builds (the release binary, helm): the
# tests that need those skip themselves (testing.Short), and so do the
# scale tests, the tests that wait out real retry schedules and the
# end-to-end tests whose rule a package's own tests keep; the process
# drills are left out. It needs MariaDB only: the domain's tests run on a
# real database. Three jobs run side by side: the lint, server's tests
# (its end-to-end suite is the longest, so it starts first rather than
# last in package order) and every other package's, six at a time (they
# wait on the database and on timers far more than on the CPU). CI runs
# make test.
SHORT_TEST = $(GO) test -short -count=1 -timeout 10m -skip '$(DRILLS)'

test-short: ## lint and the unit and package tests side by side (go test -short, MariaDB only: no browser, image, Prometheus or drills), in about 3 minutes
	bash scripts/ensure-mysql.sh
	$(MAKE) --no-print-directory -j3 --output-sync=target lint test-short-server test-short-rest

test-short-server:
	$(SHORT_TEST) ./server/

test-short-rest:
	$(SHORT_TEST) -p 6 $$($(GO) list ./... | grep -v '^pushfan/server$$')

# The chaos soak (issue 29; internal/testsupport/chaos): three replicas
# through a fault proxy to a MariaDB of its own (restarted for real; the
# machine's, the restart simulated, where mariadbd is absent), the
# emulator at a quota equal to the rate limit, a mix of load, random
# faults, and an invariant checker. The
# seed is printed; CHAOS_SEED=<n> replays a run's choices. CHAOS_REPORT
# names the file its table is written to.
CHAOS_DURATION ?= 30m
CHAOS_SEED ?=
CHAOS_REPORT ?= $(CURDIR)/bin/chaos-report.md
# The short variant's seeds: each run of it takes one, by the day of the
# year, so CI walks the list while a failure stays replayable by its seed.
CHAOS_SHORT_SEEDS := 11 29 47 83 101 131 173

chaos: ## the chaos soak: CHAOS_DURATION (30m) of load under random kill -9, pauses, DB cuts and emulator storms, checked throughout; CHAOS_SEED replays
	bash scripts/ensure-mysql.sh
	@mkdir -p bin
	CHAOS_DURATION=$(CHAOS_DURATION) CHAOS_SEED=$(CHAOS_SEED) CHAOS_REPORT=$(CHAOS_REPORT) \
		$(GO) test -count=1 -timeout 0 -v -run '^TestChaosSoak$$' ./internal/testsupport/chaos/

chaos-short: ## the CI variant: 3 minutes, a seed from CHAOS_SHORT_SEEDS (at least one kill -9, pause, DB cut, DB restart and 429 storm)
	$(MAKE) chaos CHAOS_DURATION=3m CHAOS_SEED=$${CHAOS_SEED:-$$(echo $(CHAOS_SHORT_SEEDS) | awk -v d=$$(date +%j) '{print $$((d % NF) + 1)}')}

# Linters, pinned: `go run pkg@version` fetches them from the module proxy
# on a fresh machine, so nothing needs installing by hand.
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
DEADCODE    ?= golang.org/x/tools/cmd/deadcode@v0.52.0
# Helm, pinned the same way: the chart's test (cmd/pushfan/helm_test.go)
# reads this line and renders deploy/helm/pushfan with `go run $(HELM)`.
HELM        ?= helm.sh/helm/v4/cmd/helm@v4.3.2

lint: ## gofmt -l must list nothing; go vet; staticcheck; no dead code (deadcode, tests as roots)
	@echo "$(GOFMT) -l ."
	@files="$$($(GOFMT) -l .)" || { echo "gofmt failed (syntax error?)"; exit 1; }; \
	if [ -n "$$files" ]; then \
		echo "these files are not gofmt-formatted (fix: gofmt -w <file>):"; \
		echo "$$files" | sed 's/^/  /'; \
		exit 1; \
	fi
	$(GO) vet ./...
	$(GO) run $(STATICCHECK) ./...
	@echo "$(GO) run $(DEADCODE) -test ./..."
	@dead="$$($(GO) run $(DEADCODE) -test ./...)" || exit 1; \
	if [ -n "$$dead" ]; then \
		echo "unreachable code (delete it, or move a test-only helper into a _test.go file):"; \
		echo "$$dead" | sed 's/^/  /'; \
		exit 1; \
	fi

helm-template: ## render the Helm chart (deploy/helm/pushfan) with the pinned helm, as its test does
	$(GO) run $(HELM) template pushfan deploy/helm/pushfan

bench-go: ## run the Go benchmarks (no tests; engine, throttle, SDK vs raw send, paging, checkpoint)
	bash scripts/ensure-mysql.sh
	$(GO) test -run '^$$' -bench . -benchmem ./...

BENCH := bin/pushfan-bench

# The drivers read N, C, LATENCY, JITTER, MODE (tls|http1|h2c; tls, the production wire, by default), OUT, REPEAT, SERVE_ENV, ...
# from the environment (make passes command-line variables on): e.g. make bench MODE=h2c N=1000000.
bench: ## pushfan end to end vs raw net/http, SendEachForMulticast, sequential Send (N=100000 C=512 MODE=tls REPEAT=3), then the latency sweep, the scale run, the events run, the webhooks run, the caps run, the outcomes runs (1M end to end, 10M export and look-up) and the apps run
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) bench
	GO=$(GO) $(BENCH) latency --build=false
	GO=$(GO) $(BENCH) scale --build=false
	GO=$(GO) $(BENCH) events --build=false
	GO=$(GO) $(BENCH) webhooks --build=false
	GO=$(GO) $(BENCH) caps --build=false
	GO=$(GO) $(BENCH) outcomes --build=false
	$(MAKE) --no-print-directory bench-outcomes-10m
	GO=$(GO) $(BENCH) apps --build=false

bench-apps: ## three apps on one instance at the defaults, each emulator's quota its app's rate_limit (APPS_QUOTAS=4000,3000,2000), a bulk each at once: per-app sustained vs quota, CPU/send, RSS; one app alone, then staggered; then quotas × APPS_LEVELS=1,1.5,2,3 to find where it stops keeping up
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) apps

bench-caps: ## what the frequency cap costs: N=100000 tokens at the defaults, PUSHFAN_FREQUENCY_CAP=1/day vs none, alternating
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) caps

bench-outcomes: ## what keeping every target's outcome costs: N=1000000 tokens at the defaults, outcomes kept vs PUSHFAN_OUTCOME_RETENTION=0, alternating (REPEAT=3): sends/s, CPU/send, and the table's bytes a target
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) outcomes

bench-outcomes-10m: ## kept outcomes at 10M targets: a broadcast's export (time to the first line, total, peak heap) and a user's look-up with 100 such broadcasts retained (first, median, slowest)
	bash scripts/ensure-mysql.sh
	PUSHFAN_BENCH_10M=1 PUSHFAN_BENCH_LOOKUP_TARGETS=10000000 $(GO) test -run '^$$' -bench '^(BenchmarkExport10M|BenchmarkLookup100Broadcasts)$$' -benchtime 1x -timeout 30m ./outcomes/

bench-webhooks: ## does the outbox slow the checkpoints? N=100000 dead tokens (all tokens.invalidated), with and without a webhook endpoint, alternating
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) webhooks

bench-events: ## what tracking costs the sending path (tracked vs track:false, alternating, unthrottled), then POST /v1/events ingestion: events/s, CPU/event
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) events

bench-scale: ## SCALE_N=10000000 tokens in 16 zones at the defaults: submit per audience kind, targeted and first send, first minute, cancel per state, what a category's consent costs a plan, a three-condition segment's preview and plan, what PUSHFAN_STALE_AFTER costs, 3-user send beside 20 waiting, RSS; checkpoint latency beside a retention pass over RETENTION_EVENTS=10000000 (SCALE_PHASES=retention,kinds,minute,cancels,consent,segment,stale,waiting picks)
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) scale

bench-latency: ## pushfan at its defaults vs emulator LATENCIES=10ms,30ms,100ms,300ms over LATENCY_MODES=tls,http1
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) latency

bench-sweep: ## pushfan at concurrencies SWEEP=16,64,256,512,1024: throughput, CPU/send, RSS
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) sweep

bench-quota: ## 1M tokens vs an emulator quota of 600k/min at the default rate limit (takes minutes)
	$(GO) build -o $(BENCH) ./cmd/pushfan-bench
	GO=$(GO) $(BENCH) quota

# Written through a temporary file so that a failed build leaves the page as it was.
docs: ## regenerate docs/configuration.md from the config's own table (pushfan config doc)
	$(GO) run ./cmd/pushfan config doc > docs/configuration.md.tmp
	mv docs/configuration.md.tmp docs/configuration.md

# The console's pictures in docs/console/: the language walk
# (TestConsoleSpeaksEnglishAndKorean) shoots every page in English and
# Korean; they are copied as <page>.<lang>.png. Korean needs a CJK font
# (Debian's fonts-noto-cjk), installed here when missing.
console-shots: ## regenerate docs/console/<page>.<en|ko>.png from a browser walk of every page in both languages
	bash scripts/ensure-chromium.sh
	@fc-list :lang=ko 2>/dev/null | grep -q . || { [ "$$(id -u)" -eq 0 ] && apt-get install -y -q --no-install-recommends fonts-noto-cjk </dev/null; } || { echo "console-shots: install fonts-noto-cjk for the Korean pictures" >&2; exit 1; }
	rm -rf .shots && mkdir -p .shots docs/console
	PUSHFAN_ARTIFACTS=$(CURDIR)/.shots $(GO) test -count=1 -run '^TestConsoleSpeaksEnglishAndKorean$$' ./console/
	for f in .shots/console/TestConsoleSpeaksEnglishAndKorean-*.png; do \
		n=$${f##*/TestConsoleSpeaksEnglishAndKorean-}; lang=$${n%%-*}; page=$${n#*-}; \
		cp "$$f" "docs/console/$${page%.png}.$$lang.png"; \
	done
	rm -rf .shots
	@ls docs/console/*.en.png | wc -l | xargs echo "console-shots: pages shot in each language:"

tidy: ## go mod tidy
	$(GO) mod tidy

clean: stop ## stop the demo, remove bin/ and the logs and pid files in .run/ (keeps the dev admin token)
	rm -rf bin dist
	rm -f .run/*.pid .run/*.log

# Fuzzing: go test fuzzes one target per run, so each runs for FUZZTIME.
# Seed corpora live in <pkg>/testdata/fuzz/<FuzzName>/ and also run as plain
# tests in `make test`; a crash is written there as a new failing input.
FUZZTIME ?= 10s
.PHONY: fuzz

# The fuzz targets, as package.Target: two run at a time (building each
# instrumented test binary is most of a short run's time).
FUZZ_TARGETS := server.FuzzBroadcastRequest fcmemu.FuzzParseSend fcmemu.FuzzSendHandler audience.FuzzBindJSON fcm.FuzzClassifyResponse

fuzz: ## run every fuzz target for FUZZTIME each: a duration (default 10s; e.g. FUZZTIME=1m) or a count of runs (FUZZTIME=3000x, as CI does)
	$(MAKE) --no-print-directory -j2 --output-sync=target $(addprefix fuzz/,$(FUZZ_TARGETS))

fuzz/%:
	$(GO) test -run '^$$' -fuzz '^$(word 2,$(subst ., ,$*))$$' -fuzztime $(FUZZTIME) ./$(word 1,$(subst ., ,$*))/
