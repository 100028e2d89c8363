#!/usr/bin/env bash
# Replication figures, coordis-server and redis-server 7.0.15 side by side as
# the primary of a redis-server replica:
#
#   full sync   KEYS keys (default 1,000,000) loaded, then a replica attached:
#               the time until the replica's link is up with the sync done,
#               and the p99 of a GET load on the primary meanwhile;
#   stream      a `-P 16` SET load on the primary (N requests, default
#               1,000,000), and the replica's lag in bytes when it ends.
#
#   scripts/replication.sh
#   KEYS=200000 N=300000 scripts/replication.sh
#
# Settings (environment): KEYS, N, CLIENTS (redis-benchmark -c, default 50),
# COORDIS_BIN (default target/release/coordis-server, built when missing).
# Every server starts here on a free port in a temporary directory of its own
# (`--save ''`), and stops when the script exits. Full syncs are diskless,
# without delay (`repl-diskless-sync-delay 0`), on both primaries.
set -euo pipefail
cd "$(dirname "$0")/.."

KEYS=${KEYS:-1000000}
N=${N:-1000000}
CLIENTS=${CLIENTS:-50}
COORDIS_BIN=${COORDIS_BIN:-target/release/coordis-server}
if [[ ! -x $COORDIS_BIN ]]; then
    cargo build --release --bin coordis-server
fi

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do
        kill "$pid" 2>/dev/null || true
    done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

wait_ready() {
    for _ in $(seq 1 200); do
        redis-cli -p "$1" PING >/dev/null 2>&1 && return 0
        sleep 0.05
    done
    echo "server on port $1 did not start" >&2
    exit 1
}

field() { # port section name
    redis-cli -p "$1" INFO "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f { print $2 }'
}

now_ms() { date +%s%3N; }

# Loads KEYS string keys through redis-cli --pipe.
load() {
    awk -v n="$KEYS" 'BEGIN { for (i = 0; i < n; i++) { k = "key:" i; v = "value:" i;
        printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v } }' |
        redis-cli -p "$1" --pipe >/dev/null
}

# One primary kind: writes "name sync_ms p99_ms set_rps lag_bytes" to
# $WORK/<name>.row (it runs in this shell, so its servers are in PIDS).
measure() {
    local name=$1 bin=$2 dir="$WORK/$1" port replica_port
    mkdir -p "$dir/primary" "$dir/replica"
    port=$(free_port)
    "$bin" --port "$port" --save '' --dir "$dir/primary" --repl-diskless-sync-delay 0 \
        --logfile "$dir/primary.log" >/dev/null &
    PIDS+=($!)
    wait_ready "$port"
    load "$port"
    replica_port=$(free_port)
    # A GET load over the full sync (its p99 is the primary's during it).
    redis-benchmark -p "$port" -t get -r "$KEYS" -n $((KEYS / 2)) -c "$CLIENTS" --csv \
        >"$dir/get.csv" 2>/dev/null &
    local bench=$!
    local started
    started=$(now_ms)
    redis-server --port "$replica_port" --replicaof 127.0.0.1 "$port" --save '' \
        --dir "$dir/replica" --logfile "$dir/replica.log" >/dev/null &
    PIDS+=($!)
    wait_ready "$replica_port"
    until [[ $(field "$replica_port" replication master_link_status) == up &&
        $(field "$replica_port" replication master_sync_in_progress) == 0 ]]; do
        sleep 0.01
    done
    local sync_ms=$(($(now_ms) - started))
    wait "$bench"
    local p99
    p99=$(tail -1 "$dir/get.csv" | tr -d '"' | cut -d, -f7)
    local set_rps
    set_rps=$(redis-benchmark -p "$port" -t set -r 100000 -n "$N" -P 16 -c "$CLIENTS" --csv 2>/dev/null |
        tail -1 | tr -d '"' | cut -d, -f2)
    local lag=$(($(field "$port" replication master_repl_offset) - $(field "$replica_port" replication master_repl_offset)))
    echo "$name $sync_ms $p99 $set_rps $lag" >"$WORK/$name.row"
}

printf '%-8s %12s %16s %14s %16s\n' primary "sync ms" "GET p99 ms" "SET -P16 rps" "replica lag B"
for row in "coordis $COORDIS_BIN" "redis $(command -v redis-server)"; do
    read -r name bin <<<"$row"
    measure "$name" "$bin"
    read -r n s p r l <"$WORK/$name.row"
    printf '%-8s %12s %16s %14s %16s\n' "$n" "$s" "$p" "$r" "$l"
done
echo "($KEYS keys for the full sync, $N SET requests at -P 16, $CLIENTS clients)"
