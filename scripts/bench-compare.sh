#!/usr/bin/env bash
# bench-compare.sh runs the table of issue 8 side by side in one run: the
# gateway against nginx (sendfile, ranges, 404), a direct GET from the same
# versitygw, and the claim's statements in a plain Go loop, each pair
# alternated round by round (bench/compare). Ranges and unknown tokens have
# a third side, the net/http floor (bench/cmd/floor: the least a Go
# net/http server does for the same requests), to tell the gateway's own
# cost from net/http's. It starts a private MariaDB, versitygw, nginx and
# the floor on 127.0.0.1 in temporary directories and stops them
# afterwards. The TLS rows (bench/compare/tls_test.go) add nginx and the
# gateway serving one test-made certificate, and a versitygw serving it
# to a gateway that trusts it through GATEWAY_S3_CA.
#
#   scripts/bench-compare.sh            # about 4 minutes on 2 cores
#   QUICK=1 scripts/bench-compare.sh    # about 1.5 minutes, 2 rounds
#   QUICK=1 BENCH_ONLY=tls-h1,tls-h2,tls-ranges64k,s3-https,memory-https \
#     scripts/bench-compare.sh          # the TLS rows alone, about 3.5 minutes
#
# Settings: QUICK=1; BENCH_ROUNDS=N; BENCH_ONLY=ROW,… (fs, s3, claims —
# which is claims-distinct, claims-3p, claims-hot, claims-hot-3p, claims-hot-3p-apart and
# claims-single —, refusals — refusals-distinct and refusals-spent —,
# ranges64k, ranges1m, unknown, memory, tls-h1, tls-h2, tls-h2-single, tls-ranges64k,
# s3-https, memory-https); BENCH_PROFILE=0|1 (CPU profiles of the
# gateway; on by default, off with QUICK=1); BENCH_OUT=DIR
# (default a new directory under /tmp) receives the table as Markdown, the
# log, the profile and its top functions.
#
# It installs what is missing through scripts/install-deps.sh, nginx
# included (WITH_NGINX=1): Debian packages as root, versitygw into ./bin.
set -euo pipefail

cd "$(dirname "$0")/.."

log() { printf 'bench-compare: %s\n' "$*" >&2; }

have() {
	case "$1" in
	/*) [ -x "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

# nginx (and anything else missing) the way the tests' servers come.
WITH_NGINX=1 scripts/install-deps.sh
have /usr/sbin/nginx || { log "nginx is missing; as root: apt-get install -y --no-install-recommends nginx"; exit 1; }

for f in /usr/sbin/mariadbd bin/versitygw; do
	have "$f" || { log "$f is missing (install-deps needs root for Debian packages)"; exit 1; }
done

GO="${GO:-go}"
export BENCH_OUT="${BENCH_OUT:-$(mktemp -d "${TMPDIR:-/tmp}/dlgate-bench-XXXXXX")}"
mkdir -p "$BENCH_OUT"
log "results go to $BENCH_OUT"
# bin/ first, so that the tests' server finder sees the versitygw of make deps;
# GATEWAY_TEST_STRICT: a missing server is a failure, not a skipped bench.
PATH="$PWD/bin:$PATH" BENCH_COMPARE=1 GATEWAY_TEST_STRICT=1 \
	"$GO" test -count=1 -run '^$' -bench '^BenchmarkCompare$' -benchtime 1x -timeout 30m ./bench/compare/ |
	tee "$BENCH_OUT/bench-compare.log"
