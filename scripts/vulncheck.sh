#!/usr/bin/env bash
# scripts/vulncheck.sh runs govulncheck on the source (./... unless other
# arguments are given) against the release toolchain, with a vulnerability
# database built offline from the golang.org/x/vulndb module: the Go module
# proxy is the only thing it downloads from (the toolchain, govulncheck, the
# vulndb module), and vuln.go.dev is never asked.
#
# It exits as govulncheck does: 0 when no vulnerable code is reachable,
# 3 when some is (a vulnerable module or package that is imported but not
# called is listed and does not fail), anything else on an error.
#
#   scripts/vulncheck.sh                    # what `make vulncheck` runs
#   scripts/vulncheck.sh -show verbose ./...
#   RELEASE_GO_TOOLCHAIN=local scripts/vulncheck.sh   # the machine's own Go
#
# Environment (all optional):
#   RELEASE_GO_TOOLCHAIN  GOTOOLCHAIN for the scan; default: the Makefile's
#   GOVULNCHECK_VERSION   default v1.9.0, installed into bin/ with the release
#                         toolchain (a govulncheck built by an older Go cannot
#                         type-check a newer standard library)
#   VULNDB_VERSION        version of the golang.org/x/vulndb module
#   VULNDB_DIR            where the database is kept; default bin/vulndb,
#                         rebuilt only when VULNDB_VERSION changes
set -euo pipefail

cd "$(dirname "$0")/.."
root=$PWD

GO=${GO:-go}
GOVULNCHECK_VERSION=${GOVULNCHECK_VERSION:-v1.9.0}
VULNDB_VERSION=${VULNDB_VERSION:-v0.0.0-20261105234957-e22db6528018}
VULNDB_DIR=${VULNDB_DIR:-$root/bin/vulndb}
case $VULNDB_DIR in /*) ;; *) VULNDB_DIR=$root/$VULNDB_DIR ;; esac
if [ -z "${RELEASE_GO_TOOLCHAIN:-}" ]; then
	RELEASE_GO_TOOLCHAIN=$(sed -n 's/^RELEASE_GO_TOOLCHAIN[[:space:]]*?=[[:space:]]*//p' Makefile)
fi
if [ -z "$RELEASE_GO_TOOLCHAIN" ]; then
	echo "vulncheck: RELEASE_GO_TOOLCHAIN is not set and not found in the Makefile" >&2
	exit 1
fi
export GOTOOLCHAIN=$RELEASE_GO_TOOLCHAIN

start=$SECONDS
say() { echo "vulncheck: [$((SECONDS - start)) s] $*" >&2; }

# 1. The toolchain (fetched from the module proxy on first use).
goversion=$("$GO" env GOVERSION)
say "toolchain $goversion (GOTOOLCHAIN=$GOTOOLCHAIN)"

# 2. The database, from the vulndb module's data/osv.
if [ "$(cat "$VULNDB_DIR/.version" 2>/dev/null)" = "$VULNDB_VERSION" ] &&
	[ -f "$VULNDB_DIR/index/modules.json" ]; then
	say "database $VULNDB_DIR (golang.org/x/vulndb@$VULNDB_VERSION, cached)"
else
	say "building the database from golang.org/x/vulndb@$VULNDB_VERSION"
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' EXIT
	# Outside the main module, so that go.mod and go.sum stay as they are.
	info=$(cd "$tmp" && "$GO" mod download -json "golang.org/x/vulndb@$VULNDB_VERSION") || {
		echo "$info" >&2
		exit 1
	}
	moddir=$(printf '%s\n' "$info" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",\{0,1\}$/\1/p')
	if [ -z "$moddir" ] || [ ! -d "$moddir/data/osv" ]; then
		echo "$info" >&2
		say "no data/osv in golang.org/x/vulndb@$VULNDB_VERSION"
		exit 1
	fi
	mkdir -p "$(dirname "$VULNDB_DIR")"
	new=$VULNDB_DIR.new.$$
	rm -rf "$new"
	"$GO" run scripts/vulndb/indexdb.go -vulns "$moddir/data/osv" -out "$new" >&2
	echo "$VULNDB_VERSION" >"$new/.version"
	rm -rf "$VULNDB_DIR"
	mv "$new" "$VULNDB_DIR"
fi

# 3. govulncheck, built by the release toolchain into bin/.
govulncheck=$root/bin/govulncheck
have=$("$GO" version -m "$govulncheck" 2>/dev/null || true)
if ! printf '%s\n' "$have" | head -n 1 | grep -q ": $goversion\$" ||
	! printf '%s\n' "$have" | grep -Eq "^[[:space:]]+mod[[:space:]]+golang.org/x/vuln[[:space:]]+$GOVULNCHECK_VERSION([[:space:]]|\$)"; then
	say "installing govulncheck $GOVULNCHECK_VERSION into bin/"
	GOBIN=$root/bin "$GO" install "golang.org/x/vuln/cmd/govulncheck@$GOVULNCHECK_VERSION"
fi

# 4. The scan. govulncheck runs `go` from PATH, which GOTOOLCHAIN switches to
# the release toolchain, so the standard library it checks is that one's.
if [ "$#" -eq 0 ]; then
	set -- ./...
fi
say "govulncheck $GOVULNCHECK_VERSION -db file://$VULNDB_DIR $*"
rc=0
"$govulncheck" -db "file://$VULNDB_DIR" "$@" || rc=$?
case $rc in
0) say "no reachable vulnerability with $goversion" ;;
3) say "FAILED: reachable vulnerabilities with $goversion, listed above" ;;
*) say "govulncheck failed (exit $rc)" ;;
esac
exit "$rc"
