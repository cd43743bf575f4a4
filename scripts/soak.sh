#!/usr/bin/env bash
# soak.sh is `make soak`: a long run of mixed load on three gateway
# processes, MariaDB and versitygw, with a fault injected every minute in
# turn (kill -9 of a gateway and its restart, versitygw frozen with SIGSTOP
# for 5 s, MariaDB frozen for 5 s). It ends with the ledger's consistency
# check over every link (grants = allowance − remaining) and a memory (RSS)
# and descriptor report per process, printed at the start, after each
# fault and at the end.
#
# It is the Go test TestSoak in e2e/soak_test.go, behind the build tag
# `soak`, so that `make test` and CI never run it. Settings:
#   SOAK_DURATION     how long the load runs (default 10m)
#   SOAK_FAULT_EVERY  time between faults (default 1m)
#   SOAK_TIMEOUT      go test -timeout (default 2h)
set -euo pipefail

cd "$(dirname "$0")/.."

export SOAK_DURATION="${SOAK_DURATION:-10m}"
export SOAK_FAULT_EVERY="${SOAK_FAULT_EVERY:-1m}"
# A missing MariaDB or versitygw is a failure here, not a skip.
export GATEWAY_TEST_STRICT=1
export PATH="$PWD/bin:$PATH"

echo "soak: ${SOAK_DURATION} of load, a fault every ${SOAK_FAULT_EVERY}" >&2
exec "${GO:-go}" test -tags soak -count=1 -run '^TestSoak$' -v \
	-timeout "${SOAK_TIMEOUT:-2h}" ./e2e/
