# memgate — the commands the README names.

GO      ?= go
PKGS    := ./...
FUZZTIME ?= 10s

.PHONY: test vet unit go-tests e2e conformance fuzz bench-smoke bench build deploy-check

## test: everything CI runs — vet, unit tests under the race detector
## (fuzz seed corpora included), a short benchmark smoke run, and the
## end-to-end suite, and the MCP conformance suite, the release build with
## its launchers, and the deployment artefacts (the chart, the image); all
## of it with one PostgreSQL server (WITH_POSTGRES).
test: apt-early
	$(WITH_POSTGRES) $(MAKE) --no-print-directory vet unit fuzz-brief bench-smoke e2e conformance launchers deploy-check

## WITH_POSTGRES runs its command with MEMGATE_TEST_POSTGRES_DSN set, for
## the tests of a PostgreSQL backend (internal/pgtest): the caller's own, or
## a throwaway server that scripts/postgres.sh starts on a loopback port
## before the command and stops after it, however it ends. Under make -n it
## is left out, so that a dry run starts nothing.
WITH_POSTGRES = $(if $(findstring n,$(firstword -$(MAKEFLAGS))),,APTLOCK=$(APTLOCK) scripts/postgres.sh run)

## apt-early: the Debian packages that the Go tests (postgresql), e2e
## (chromium) and deploy-check (buildah, busybox-static, systemd) need,
## installed in the background while the Go targets run; those targets take
## the same lock, so they wait for it and then find their packages there.
## PostgreSQL comes first, the Go tests need it soonest (postgres.sh takes
## the lock itself). A machine that has them does nothing.
APTLOCK ?= /tmp/memgate-apt.lock
.PHONY: apt-early
apt-early:
	@( (APTLOCK=$(APTLOCK) scripts/postgres.sh install; flock $(APTLOCK) sh -c 'e2e/install-chromium.sh; deploy/check/install.sh') >/dev/null 2>&1 &)

vet:
	$(GO) mod tidy -diff
	$(GO) vet $(PKGS)
	$(GO) vet -tags memgatebench ./cmd/memgate
	cd bench && $(GO) mod tidy -diff && $(GO) vet ./...
	cd deploy/check && $(GO) mod tidy -diff && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

## unit: the Go tests of both modules under the race detector, with a
## PostgreSQL server (WITH_POSTGRES); go-tests: the same tests, with the
## MEMGATE_TEST_POSTGRES_DSN of the caller if any.
unit:
	$(WITH_POSTGRES) $(MAKE) --no-print-directory go-tests
go-tests:
	$(GO) test -race -count=1 -timeout 15m $(PKGS)
	bench/datasets.sh >/dev/null
	cd bench && $(GO) test -race -count=1 ./...

## e2e: the built binary driven by the official TypeScript MCP SDK client
## (Node 20 or newer; npm ci reaches only the npm registry), and the web
## console in Debian's chromium, headless (install-chromium.sh brings it).
e2e:
	$(GO) build -o bin/memgate ./cmd/memgate
	npm ci --prefix e2e --no-audit --no-fund
	flock $(APTLOCK) e2e/install-chromium.sh
	scripts/vectors.sh >/dev/null
	MEMGATE_EMBEDDINGS="$$(scripts/vectors.sh)" node --test e2e/

## conformance: the public MCP conformance suite against the HTTP gateway,
## stateful (2025-11-25) and stateless (2026-07-28) legs, each with a baseline
## of the scenarios that need the SDKs' test fixture (docs/CONFORMANCE.md).
## npm ci brings the Node 22 the suite needs.
conformance:
	$(GO) build -o bin/memgate ./cmd/memgate
	npm ci --prefix e2e/conformance --no-audit --no-fund
	e2e/conformance/run.sh

## fuzz-brief: the fuzz targets over damaged store files and every decoder
## of outside input, a bounded number of inputs each beyond their seed
## corpora (which unit already runs): never a crash or a hang, only errors.
## Counts, not durations: a -fuzztime duration can end in a spurious
## "context deadline exceeded" (golang/go#75804).
BRIEF := ./storage:FuzzDamagedStore:1000x ./storage:FuzzImportLine:20000x \
	./server:FuzzStdioLine:20000x ./server:FuzzDecodeArgs:20000x ./auth:FuzzTokensFile:20000x \
	.:FuzzStrictObject:20000x .:FuzzValidJSONText:20000x
.PHONY: fuzz-brief
fuzz-brief:
	@for t in $(BRIEF); do \
	  pkg=$${t%%:*}; rest=$${t#*:}; name=$${rest%%:*}; time=$${rest#*:}; \
	  echo "== $$pkg $$name $$time"; \
	  $(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$$time $$pkg || exit 1; \
	done

## fuzz: run every fuzz target for FUZZTIME each (not part of test).
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run='^$$' -fuzz="^$$f$$" -fuzztime=$(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done

## bench-smoke: the harnesses on small synthetic data, to prove they run
## (and that nothing fails under churn); their figures mean nothing. The
## harnesses are one program in the bench module (bench/go.mod), a
## subcommand per family; the suite drives cmd/memgate built with -tags
## memgatebench. Its smoke run is memgate alone, every scenario at toy size,
## in under a minute; it fails on any lost write, error or failed recovery.
BENCH := cd bench && $(GO) run .
bench-smoke:
	$(GO) test -count=1 -tags memgatebench -run '^TestBenchBuild' ./cmd/memgate
	$(BENCH) engine -smoke
	$(BENCH) pool -smoke
	$(BENCH) suite -smoke
	$(BENCH) hostile -smoke
	$(BENCH) view -smoke

## bench-suite: the scenarios of docs/PERFORMANCE.md against the peers, with
## the plots (~25 min; never in CI). bench-http: the HTTP gateway figures only.
.PHONY: bench-suite bench-http
bench-suite:
	bench/datasets.sh >/dev/null
	PEERS_ALL=1 bench/peers.sh >/dev/null
	$(BENCH) suite -plots ../docs/plots
bench-http:
	bench/datasets.sh >/dev/null
	$(BENCH) suite -memgate-only -scenarios S4,S5,S8,slowloris

## bench: the engine figures of docs/PERFORMANCE.md (needs bench/datasets.sh first).
bench:
	$(BENCH) engine -n 100000

build:
	$(GO) build -o bin/ ./...

## deploy-check: the deployment artefacts, checked without a cluster or a
## container engine (deploy/check, a Go module of its own with helm and the
## Kubernetes types): the chart linted with helm lint --strict and rendered
## for every values file under charts/memgate/ci/, each rendering decoded
## strictly into the Kubernetes types, held to the policy and to its golden
## file (cd deploy/check && go test -update rewrites them, and
## deploy/kubernetes/memgate.yaml); the Dockerfile built with buildah from a
## local stand-in of the Go image, and the image run: /health, an MCP call
## with a token, uid 65532, a write across a restart on one volume, SIGTERM
## exit 0, and the one line of a start without an auth mode. install.sh
## brings buildah and busybox-static from apt; the image check needs root,
## and fails under CI=true where it cannot run. The compose file and the
## systemd unit are checked too (docs/DEPLOY.md).
deploy-check:
	flock $(APTLOCK) deploy/check/install.sh
	cd deploy/check && $(GO) test -count=1 -timeout 15m ./...

## release: the release assets in dist/ (or DIST=folder): memgate-<os>-<arch>[.exe]
## for linux, darwin and windows on amd64 and arm64 (PLATFORMS="linux/amd64 …"
## for fewer), reproducible, with SHA256SUMS and the launchers' checksum tables.
## launchers: the npm and Python launchers against a release of the host
## platform served on 127.0.0.1 (docs/INSTALL.md).
.PHONY: release launchers
release:
	scripts/release.sh
launchers:
	node --test launchers/test/
