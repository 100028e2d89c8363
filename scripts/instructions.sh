#!/usr/bin/env bash
# Instructions each server executes per request, coordis-server against
# redis-server, counted by callgrind.
#
#   scripts/instructions.sh          # default: N=50000
#   N=20000 scripts/instructions.sh
#   COORDIS_BIN=/tmp/old/coordis-server scripts/instructions.sh   # another build
#   ROWS='EVALSHA unlock' scripts/instructions.sh   # only the rows with these labels (|-separated)
#
# Each server runs under `valgrind --tool=callgrind` twice per row, for N and
# for 2N requests of the same redis-benchmark test; the difference of the two
# totals divided by N is what one request costs, start-up and shutdown
# cancelling out. Unlike times, these counts repeat from run to run whatever
# else the machine is doing, so they compare the servers' own work where
# scripts/bench.sh cannot (rows where the load generator is the limit).
#
# They count user space only. The kernel's part (system calls, the TCP
# stack) is the larger one for an unpipelined request; it is the same for
# both servers, which make the same system calls and send the same TCP
# segments per request. valgrind runs a server's threads one at a time and
# about 50 times slower, so a read finds more requests waiting than it would
# natively; both servers see that alike.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-50000}
PORT=${PORT:-7393}
ROWS=${ROWS:-all}

for tool in valgrind redis-benchmark redis-server redis-cli; do
    command -v "$tool" >/dev/null || { echo "$tool not found (apt-get install valgrind redis-server redis-tools)"; exit 1; }
done
if [ -z "${COORDIS_BIN:-}" ]; then
    cargo build --release --quiet --bin coordis-server
fi
COORDIS=("${COORDIS_BIN:-target/release/coordis-server}" --port "$PORT" --save '' --loglevel warning)
REDIS=(redis-server --port "$PORT" --save '' --appendonly no --loglevel warning)
UNLOCK=$(cat scripts/lua/unlock.lua)
SHA=$(printf '%s' "$UNLOCK" | sha1sum | cut -d' ' -f1)

OUT=$(mktemp -d)
cleanup() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$OUT"; }
trap cleanup EXIT

# Total instructions of one server run that answers `n` requests.
total() { # n pipeline "server command" test...
    local n=$1 pipe=$2 server=$3; shift 3
    local -n cmd=$server
    valgrind --tool=callgrind --callgrind-out-file="$OUT/cg" "${cmd[@]}" >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$PORT" script load "$UNLOCK" >/dev/null
    redis-benchmark -p "$PORT" -n "$n" -c 50 -P "$pipe" -q "$@" >/dev/null 2>&1
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" || true
    awk '/^(summary|totals):/ {print $2; exit}' "$OUT/cg"
}

per_request() { # pipeline "server command" test...
    local a b
    a=$(total "$N" "$@")
    b=$(total $((2 * N)) "$@")
    echo $(((b - a) / N))
}

row() { # label pipeline test...
    local label=$1 pipe=$2; shift 2
    local c r
    if [ "$ROWS" != all ] && [[ "|$ROWS|" != *"|$label|"* ]]; then
        return
    fi
    c=$(per_request "$pipe" COORDIS "$@")
    r=$(per_request "$pipe" REDIS "$@")
    printf "%-22s %3s %9s %9s %6s\n" "$label" "$pipe" "$c" "$r" "$(awk -v c="$c" -v r="$r" 'BEGIN {printf "%.2f", c / r}')"
}

printf "%-22s %3s %9s %9s %6s\n" "test" "-P" "coordis" "redis" "ratio"
row "set" 1 -t set
row "get" 16 -t get
row "SET lock NX EX" 1 -r 100000 SET "lock:__rand_int__" pod NX EX 30
row "EVALSHA unlock" 1 -r 100000 EVALSHA "$SHA" 1 "lock:__rand_int__" pod
row "EVALSHA unlock" 16 -r 100000 EVALSHA "$SHA" 1 "lock:__rand_int__" pod
row "ZADD sem" 1 -r 100000 ZADD sem __rand_int__ "m:__rand_int__"
