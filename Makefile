# Tests run against real servers (MariaDB, versitygw) that `make deps`
# installs; set GATEWAY_TEST_STRICT=1 to turn a missing one into a failure
# instead of a skip (CI does, see .ci/run).

GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# PKGS narrows test, bench and vet: make test PKGS=./ledger/...
PKGS    ?= ./...
# bin/ first, so that tests find the versitygw that `make deps` built.
TESTPATH = PATH="$(CURDIR)/bin:$$PATH"
# Release builds and vulncheck use a Go release with the standard library's
# security fixes; the go command fetches it from the module proxy on first
# use. go.mod's go line stays at what the machine's Go runs, so `go run` and
# `make test` keep using that Go. RELEASE_GO_TOOLCHAIN=local builds with it.
RELEASE_GO_TOOLCHAIN ?= go1.27.3

.PHONY: all build test test-race deps lint bench vulncheck clean distclean

all: build

build:
	GOTOOLCHAIN=$(RELEASE_GO_TOOLCHAIN) CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/gateway ./cmd/gateway

deps:
	scripts/install-deps.sh

test: deps
	$(TESTPATH) $(GO) test -count=1 -timeout 20m $(PKGS)

# RACE_PKGS are the packages whose tests run goroutines against shared
# state (claims, slots, budgets, caches, key refresh, delivery workers,
# the batched writes beneath TLS).
RACE_PKGS ?= ./gateway/ ./ledger/... ./auth/ ./token/ ./sessions/ ./preview/ ./internal/refusal/ ./internal/tlsserve/ $(wildcard ./webhook/)

test-race: deps
	$(TESTPATH) $(GO) test -race -count=1 -timeout 20m $(RACE_PKGS)

# test-seaweedfs: the S3 store's suite and testenv's S3 tests on versitygw
# and on a SeaweedFS cluster (master, two volume servers, a filer, two S3
# gateways behind a balancer), strict, so that a missing weed fails. Builds
# bin/weed first when missing (WITH_SEAWEEDFS=1 make deps), which `make
# deps` does not: about 1,000 CPU-seconds from a cold module cache.
.PHONY: test-seaweedfs
test-seaweedfs:
	WITH_SEAWEEDFS=1 scripts/install-deps.sh
	$(TESTPATH) DLGATE_TEST_SEAWEEDFS=1 GATEWAY_TEST_STRICT=1 $(GO) test -count=1 -p 1 -timeout 20m ./storage/s3/
	$(TESTPATH) DLGATE_TEST_SEAWEEDFS=1 GATEWAY_TEST_STRICT=1 $(GO) test -count=1 -timeout 20m -run 'S3|Balancer' ./internal/testenv/

lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting (run gofmt -w):"; \
		echo "$$unformatted"; \
		exit 1; \
	fi
	$(GO) vet $(PKGS)

# govulncheck against the release toolchain, with a database built offline
# from the golang.org/x/vulndb module (bin/vulndb); fails (exit 3) on a
# reachable vulnerability. See scripts/vulncheck.sh.
vulncheck:
	RELEASE_GO_TOOLCHAIN=$(RELEASE_GO_TOOLCHAIN) GO=$(GO) scripts/vulncheck.sh

bench:
	$(TESTPATH) $(GO) test -count=1 -run '^$$' -bench . -benchmem -benchtime 200ms -timeout 20m $(PKGS)

# bench-compare: the table of issue 8, side by side in one run (the gateway
# against nginx, a direct GET from versitygw and a plain Go loop of the
# claim's statements), on private MariaDB, versitygw and nginx; installs
# nginx as root when missing (MariaDB and versitygw come from `make deps`).
# QUICK=1 for a short run. See scripts/bench-compare.sh.
.PHONY: bench-compare
bench-compare:
	GO=$(GO) scripts/bench-compare.sh

# soak: SOAK_DURATION (default 10m) of mixed load on three gateways,
# MariaDB and versitygw with a fault every SOAK_FAULT_EVERY (default 1m),
# then the consistency check and a memory/fd report. Not part of test or
# CI. See scripts/soak.sh.
.PHONY: soak
soak: deps
	GO=$(GO) scripts/soak.sh

# clean keeps bin/versitygw, bin/weed, bin/govulncheck, the vulnerability database
# bin/vulndb and the MariaDB template cache, which take minutes to rebuild;
# distclean removes them too.
clean:
	rm -f bin/gateway
	rm -f *.test coverage.out coverage.html *.coverprofile

distclean: clean
	rm -rf bin
