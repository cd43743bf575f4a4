# Tests run against real servers (MariaDB, versitygw) that `make deps`
# installs; set GATEWAY_TEST_STRICT=1 to turn a missing one into a failure
# instead of a skip (CI does, see .ci/run).

GO      ?= go
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# PKGS narrows test, bench and vet: make test PKGS=./ledger/...
PKGS    ?= ./...
# bin/ first, so that tests find the versitygw that `make deps` built.
TESTPATH = PATH="$(CURDIR)/bin:$$PATH"

.PHONY: all build test deps lint bench clean distclean

all: build

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-X main.version=$(VERSION)" -o bin/gateway ./cmd/gateway

deps:
	scripts/install-deps.sh

test: deps
	$(TESTPATH) $(GO) test -count=1 -timeout 20m $(PKGS)

lint:
	@unformatted="$$(gofmt -l .)"; \
	if [ -n "$$unformatted" ]; then \
		echo "gofmt: these files need formatting (run gofmt -w):"; \
		echo "$$unformatted"; \
		exit 1; \
	fi
	$(GO) vet $(PKGS)

bench:
	$(TESTPATH) $(GO) test -count=1 -run '^$$' -bench . -benchmem -benchtime 200ms -timeout 20m $(PKGS)

# clean keeps bin/versitygw and the MariaDB template cache, which take
# minutes to rebuild; distclean removes them too.
clean:
	rm -f bin/gateway
	rm -f *.test coverage.out coverage.html *.coverprofile

distclean: clean
	rm -rf bin
