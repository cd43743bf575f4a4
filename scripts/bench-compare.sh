#!/usr/bin/env bash
# bench-compare.sh runs the table of issue 8 side by side in one run: the
# gateway against nginx (sendfile, ranges, 404), a direct GET from the same
# versitygw, and the claim's statements in a plain Go loop, each pair
# alternated round by round (bench/compare). It starts a private MariaDB,
# versitygw and nginx on 127.0.0.1 in temporary directories and stops them
# afterwards.
#
#   scripts/bench-compare.sh            # about 4 minutes on 2 cores
#   QUICK=1 scripts/bench-compare.sh    # about 1.5 minutes, 2 rounds
#
# Settings: QUICK=1; BENCH_ROUNDS=N; BENCH_PROFILE=0|1 (CPU profile of the
# gateway on the S3 path; on by default, off with QUICK=1); BENCH_OUT=DIR
# (default a new directory under /tmp) receives the table as Markdown, the
# log, the profile and its top functions.
#
# It installs nothing but nginx: the Debian package, as root, when missing
# (as scripts/install-deps.sh does for the rest). MariaDB and versitygw
# come from `make deps`.
set -euo pipefail

cd "$(dirname "$0")/.."

log() { printf 'bench-compare: %s\n' "$*" >&2; }

have() {
	case "$1" in
	/*) [ -x "$1" ] ;;
	*) command -v "$1" >/dev/null 2>&1 ;;
	esac
}

missing_pkgs=()
need() { # need PACKAGE CHECK...
	local pkg="$1"
	shift
	for c in "$@"; do
		if ! have "$c"; then
			missing_pkgs+=("$pkg")
			return
		fi
	done
}
need nginx /usr/sbin/nginx

if [ "${#missing_pkgs[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		log "missing Debian packages: ${missing_pkgs[*]}; as root run: apt-get install -y --no-install-recommends ${missing_pkgs[*]}"
		exit 1
	elif ! have apt-get; then
		log "missing packages ${missing_pkgs[*]} and no apt-get to install them with"
		exit 1
	fi
	log "installing Debian packages: ${missing_pkgs[*]}"
	# Keep the package's own nginx service from starting: the bench starts
	# its own, and the service would hold port 80 for nothing. A
	# policy-rc.d that already exists (as in Docker images) is left alone.
	policy=/usr/sbin/policy-rc.d
	if [ ! -e "$policy" ]; then
		printf '#!/bin/sh\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		trap 'rm -f "$policy"' EXIT
	fi
	export DEBIAN_FRONTEND=noninteractive
	apt-get update
	apt-get install -y --no-install-recommends "${missing_pkgs[@]}"
fi

for f in /usr/sbin/mariadbd bin/versitygw; do
	if ! have "$f"; then
		log "$f is missing: run make deps first"
		exit 1
	fi
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
