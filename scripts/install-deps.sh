#!/usr/bin/env bash
# install-deps.sh installs what the test suite runs against, and only what is
# missing, so running it again is cheap:
#   - Debian packages: mariadb-server (mariadbd, mariadb-install-db),
#     mariadb-client, aria2, curl, wget, lftp, axel, wget2, pebble, chromium — as root only; otherwise it lists
#     what is missing and goes on (tests then skip, or fail under
#     GATEWAY_TEST_STRICT=1);
#   - versitygw (S3 server with versioning) into ./bin with `go install`;
#   - with WITH_SEAWEEDFS=1 only, SeaweedFS's weed (a distributed S3 server
#     for the storage suite, `make test-seaweedfs`) into ./bin, built in its
#     module's copy (see below): about 1,000 CPU-seconds from a cold module
#     cache, too long for every `make deps`.
# Tests start private servers; the Debian MariaDB service is never used.
set -euo pipefail

cd "$(dirname "$0")/.."

VERSITYGW_VERSION="${VERSITYGW_VERSION:-v1.8.0}"
# SeaweedFS 4.53. Its releases are tagged "4.53", which is not a Go module
# version, so the module proxy serves them as pseudo-versions of their
# commits: this one's weed/util/version says 4.53.
SEAWEEDFS_VERSION="${SEAWEEDFS_VERSION:-v0.0.0-20261109003541-7506e5f91cd6}"

log() { printf 'install-deps: %s\n' "$*" >&2; }

# have FILE_OR_COMMAND: an absolute path must exist (a program executable);
# a bare name must be on PATH. mariadbd is checked by path because /usr/sbin is not on every
# user's PATH.
have() {
	case "$1" in
	*.ttf) [ -f "$1" ] ;;
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
need mariadb-server /usr/sbin/mariadbd /usr/bin/mariadb-install-db
need mariadb-client /usr/bin/mariadb
need aria2 aria2c
need curl curl
need wget wget
# The other download managers the e2e tool reports drive (lftp pget, axel,
# wget2).
need lftp lftp
need axel axel
need wget2 wget2
# Let's Encrypt's ACME test server (pebble, pebble-challtestsrv) for the
# ACME e2e tests (e2e/pebble_test.go).
need pebble /usr/bin/pebble /usr/bin/pebble-challtestsrv
# Headless Chromium for the browser e2e tests (driven by chromedp); a font so
# that screenshots show text.
need chromium /usr/bin/chromium
need fonts-dejavu-core /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf
# nginx only for the side-by-side bench (scripts/bench-compare.sh sets
# WITH_NGINX=1); the tests never use it.
if [ "${WITH_NGINX:-0}" = 1 ]; then
	need nginx /usr/sbin/nginx
fi

if [ "${#missing_pkgs[@]}" -gt 0 ]; then
	if [ "$(id -u)" -ne 0 ]; then
		log "missing Debian packages: ${missing_pkgs[*]}"
		log "not root, so not installing them; as root run: apt-get install -y --no-install-recommends ${missing_pkgs[*]}"
		log "tests needing them will skip (or fail with GATEWAY_TEST_STRICT=1)"
	elif ! have apt-get; then
		log "missing packages ${missing_pkgs[*]} and no apt-get to install them with"
	else
		log "installing Debian packages: ${missing_pkgs[*]}"
		# Keep the packages' own MariaDB (and nginx) services from starting: the tests
		# never use it, and it would hold port 3306 and memory for nothing.
		# A policy-rc.d that already exists (as in Docker images) is left
		# alone.
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
fi

# versitygw: reinstall when missing or of another version.
vgw=bin/versitygw
if [ -x "$vgw" ] && go version -m "$vgw" 2>/dev/null |
	grep -Eq "^[[:space:]]+mod[[:space:]]+github.com/versity/versitygw[[:space:]]+${VERSITYGW_VERSION}[[:space:]]"; then
	:
else
	if ! have go; then
		log "go is not on PATH; cannot install versitygw ${VERSITYGW_VERSION}"
		exit 1
	fi
	log "installing versitygw ${VERSITYGW_VERSION} into ./bin (takes a few minutes)"
	mkdir -p bin
	GOBIN="$PWD/bin" go install "github.com/versity/versitygw/cmd/versitygw@${VERSITYGW_VERSION}"
fi

# weed: rebuilt when missing or of another version. `go install` refuses a
# module whose go.mod has replace directives, as SeaweedFS's has, so weed is
# built inside the module's (read-only) copy in the module cache, which
# honours them. The build stamps the module version into weed's commit
# string, which `weed version` prints and the check above reads.
weed=bin/weed
if [ "${WITH_SEAWEEDFS:-0}" != 1 ]; then
	:
elif [ -x "$weed" ] && "$weed" version 2>/dev/null | grep -Fq " ${SEAWEEDFS_VERSION} "; then
	:
else
	if ! have go; then
		log "go is not on PATH; cannot build SeaweedFS ${SEAWEEDFS_VERSION}"
		exit 1
	fi
	log "building SeaweedFS ${SEAWEEDFS_VERSION} (weed) into ./bin (about 1,000 CPU-seconds: 9 minutes or more on 2 cores)"
	mod="$(GOFLAGS= go mod download -json "github.com/seaweedfs/seaweedfs@${SEAWEEDFS_VERSION}")" || true
	dir="$(printf '%s\n' "$mod" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')"
	if [ -z "$dir" ] || [ ! -d "$dir/weed" ]; then
		log "go mod download github.com/seaweedfs/seaweedfs@${SEAWEEDFS_VERSION} failed:"
		printf '%s\n' "$mod" >&2
		exit 1
	fi
	mkdir -p bin
	(cd "$dir" && GOWORK=off GOFLAGS=-mod=readonly CGO_ENABLED=0 go build -trimpath \
		-ldflags "-s -w -X github.com/seaweedfs/seaweedfs/weed/util/version.COMMIT=${SEAWEEDFS_VERSION}" \
		-o "$OLDPWD/bin/weed.new" ./weed)
	mv bin/weed.new "$weed"
fi

log "ok"
