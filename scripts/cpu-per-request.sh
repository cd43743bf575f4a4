#!/usr/bin/env bash
# cpu-per-request.sh compares the gateway's own CPU per request of two
# trees, alternated: each round starts a fresh embedded default (SQLite,
# fs store) of one build, sends 60,000 GETs of an unknown well-formed
# token (64 clients) and 30,000 64 KiB ranges of one session (16
# clients), and reads the process's utime + stime around each; it prints
# every round and the medians. CPU time per request moves less with a
# noisy machine than a rate does (make bench-compare's ratios), though it
# still moves: compare medians of several rounds.
#
#   scripts/cpu-per-request.sh REV [ROUNDS]   # REV against the working tree, 5 rounds by default
#
# It builds REV in a temporary worktree, uses 127.0.0.1:18080 and :18081,
# and removes what it made.
set -euo pipefail

rev=${1:?usage: scripts/cpu-per-request.sh REV [ROUNDS]}
rounds=${2:-5}
here=$(cd "$(dirname "$0")/.." && pwd)
tmp=$(mktemp -d)
gw=""
cleanup() {
	if [ -n "$gw" ]; then kill "$gw" 2>/dev/null || true; wait "$gw" 2>/dev/null || true; fi
	git -C "$here" worktree remove --force "$tmp/before" >/dev/null 2>&1 || true
	rm -rf "$tmp"
}
trap cleanup EXIT

git -C "$here" worktree add -q --detach "$tmp/before" "$rev"
(cd "$tmp/before" && go build -o "$tmp/gw-before" ./cmd/gateway)
(cd "$here" && go build -o "$tmp/gw-after" ./cmd/gateway && go build -o "$tmp/loadgen" ./bench/cmd/loadgen)
head -c $((16 << 20)) /dev/urandom >"$tmp/object.bin"
hz=$(getconf CLK_TCK)

cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
json() { python3 -c "import sys, json; print(json.load(sys.stdin)['$1'])"; }

# round BIN: one round of one build; prints "unknown-µs ranges-µs".
round() {
	local dir="$tmp/round"
	rm -rf "$dir" && mkdir -p "$dir"
	GATEWAY_LISTEN=127.0.0.1:18080 GATEWAY_ADMIN_LISTEN=127.0.0.1:18081 GATEWAY_DATA_DIR="$dir/data" \
		"$1" serve >"$dir/log" 2>&1 &
	gw=$!
	for _ in $(seq 50); do
		curl -fs -o /dev/null http://127.0.0.1:18080/healthz && break
		sleep 0.1
	done
	local tok url session
	tok=$(cat "$dir/data/admin-token")
	curl -fs -H "Authorization: Bearer $tok" -X PUT --data-binary @"$tmp/object.bin" http://127.0.0.1:18081/v1/objects/object.bin >/dev/null
	url=$(curl -fs -H "Authorization: Bearer $tok" \
		-d '{"object":{"key":"object.bin"},"expires_in":86400,"downloads":1,"delivery":"session","session":{"byte_budget":1125899906842624,"max_concurrency":64}}' \
		http://127.0.0.1:18081/v1/links | json url)
	session=$(curl -fs -X POST "$url/sessions" | json session_url)
	"$tmp/loadgen" -c 16 -n 2000 -H "Range: bytes=65536-131071" "$session" >/dev/null # warm-up
	local c0 c1 c2
	c0=$(cpu "$gw")
	"$tmp/loadgen" -c 64 -n 60000 "http://127.0.0.1:18080/d/$(printf 'A%.0s' $(seq 43))" >"$dir/unknown.txt"
	c1=$(cpu "$gw")
	"$tmp/loadgen" -c 16 -n 30000 -H "Range: bytes=65536-131071" "$session" >"$dir/ranges.txt"
	c2=$(cpu "$gw")
	grep -q 'map\[404:60000\]' "$dir/unknown.txt" || { echo "unknown tokens: $(tail -1 "$dir/unknown.txt")" >&2; exit 1; }
	grep -q 'map\[206:30000\]' "$dir/ranges.txt" || { echo "ranges: $(tail -1 "$dir/ranges.txt")" >&2; exit 1; }
	kill "$gw" && wait "$gw" 2>/dev/null || true
	gw=""
	awk -v a="$c0" -v b="$c1" -v c="$c2" -v hz="$hz" 'BEGIN { printf "%.1f %.1f\n", (b - a) * 1e6 / hz / 60000, (c - b) * 1e6 / hz / 30000 }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'; }

: >"$tmp/before.txt"
: >"$tmp/after.txt"
echo "gateway CPU µs per request: unknown token (64 clients), 64 KiB session range (16 clients); $rev against the working tree"
for i in $(seq "$rounds"); do
	b=$(round "$tmp/gw-before")
	a=$(round "$tmp/gw-after")
	echo "$b" >>"$tmp/before.txt"
	echo "$a" >>"$tmp/after.txt"
	echo "round $i: $rev $b | working tree $a"
done
echo "median, unknown token: $rev $(cut -d' ' -f1 "$tmp/before.txt" | median) µs, working tree $(cut -d' ' -f1 "$tmp/after.txt" | median) µs"
echo "median, 64 KiB range:  $rev $(cut -d' ' -f2 "$tmp/before.txt" | median) µs, working tree $(cut -d' ' -f2 "$tmp/after.txt" | median) µs"
