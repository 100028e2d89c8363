#!/usr/bin/env bash
# The failover figure: the time from "the primary dies" to a client's first
# write on the new primary, one primary and one replica watched by one
# Sentinel (quorum 1) with Sentinel's default timers (down-after-milliseconds
# 30000, failover-timeout 180000):
#
#   coordis     coordis primary and replica and coordis's Sentinel, in one
#               process, the Sentinel on a test clock that is stepped a
#               second at a time as a test steps it (the failover-time bin,
#               client-tests/src/bin/failover-time.rs);
#   Redis       redis-server primary and replica and `redis-server
#               --sentinel`, on the wall clock; the primary is killed with
#               SIGKILL.
#
# Both: the client polls SENTINEL GET-MASTER-ADDR-BY-NAME every 10 ms and,
# once it names the replica, SETs there until it answers OK.
#
#   scripts/failover.sh
#   ROUNDS=5 REDIS_ROUNDS=1 scripts/failover.sh
#
# Settings (environment): ROUNDS (coordis rounds, default 5), REDIS_ROUNDS
# (default 2; each takes 30-45 s). Every Redis process starts on a free port
# in a temporary directory of its own and stops when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-5}
REDIS_ROUNDS=${REDIS_ROUNDS:-2}

echo "== coordis: Sentinel on a test clock, default timers, $ROUNDS rounds"
cargo run -q -p coordis-client-tests --bin failover-time -- "$ROUNDS"

WORK=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill -9 "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT

free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

now_ms() { echo $(( $(date +%s%N) / 1000000 )); }

wait_until() { # what, command...
    local what=$1; shift
    for _ in $(seq 1 3000); do
        if "$@" >/dev/null 2>&1; then return 0; fi
        sleep 0.01
    done
    echo "timed out: $what" >&2
    exit 1
}

redis_round() {
    local dir=$WORK/round$1 p r s
    mkdir -p "$dir/p" "$dir/r" "$dir/s"
    p=$(free_port); r=$(free_port); s=$(free_port)
    redis-server --port "$p" --bind 127.0.0.1 --save '' --dir "$dir/p" --daemonize no >/dev/null &
    local primary=$!; PIDS+=("$primary")
    disown "$primary" # its SIGKILL below is the point, not news
    redis-server --port "$r" --bind 127.0.0.1 --save '' --dir "$dir/r" --daemonize no \
        --replicaof 127.0.0.1 "$p" --repl-diskless-sync-delay 0 >/dev/null &
    PIDS+=($!); disown $!
    wait_until "the replica's link" sh -c "redis-cli -p $r info replication | grep -q master_link_status:up"
    printf 'sentinel monitor mymaster 127.0.0.1 %s 1\n' "$p" >"$dir/s/sentinel.conf"
    redis-server "$dir/s/sentinel.conf" --sentinel --port "$s" --bind 127.0.0.1 --dir "$dir/s" >/dev/null &
    PIDS+=($!); disown $!
    # The Sentinel asks for INFO every 10 s: wait until it knows the replica.
    wait_until "the Sentinel to find the replica" \
        sh -c "redis-cli -p $s sentinel replicas mymaster | grep -qx ok"
    local start end
    start=$(now_ms)
    kill -9 "$primary"
    while :; do
        if redis-cli -p "$s" sentinel get-master-addr-by-name mymaster | grep -qx "$r" \
            && [[ $(redis-cli -p "$r" set after failover 2>/dev/null) == OK ]]; then
            break
        fi
        sleep 0.01
        if (( $(now_ms) - start > 240000 )); then echo "no failover within 240 s" >&2; exit 1; fi
    done
    end=$(now_ms)
    echo "round $1: $((end - start)) ms wall"
}

echo "== Redis 7.0.15: redis-sentinel, default timers, $REDIS_ROUNDS rounds"
for i in $(seq 1 "$REDIS_ROUNDS"); do
    redis_round "$i"
done
