#!/usr/bin/env bash
# Cluster figures, coordis beside redis-server 7.0.15:
#
#   start to ok   3 primaries from nothing to cluster_state:ok on every node:
#                 `coordis-server --cluster-local 3` (one process; its ready
#                 line comes once every node is ok) vs three redis-server
#                 processes, `redis-cli --cluster create --cluster-yes`, then
#                 polling CLUSTER INFO on each;
#   memory        RSS per empty node: coordis (RSS of --cluster-local 3 minus
#                 that of --cluster-local 1, halved) and one redis-server
#                 cluster node.
#
#   scripts/cluster.sh
#   ROUNDS=5 COORDIS_BIN=target/debug/coordis-server scripts/cluster.sh
#
# Settings (environment): ROUNDS (default 3, medians reported), COORDIS_BIN
# (default target/release/coordis-server, built when missing). Every server
# runs in a temporary directory of its own on free ports below 55000 and
# stops when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
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

now_ms() { date +%s%3N; }
rss_kb() { awk '/^VmRSS/ {print $2}' "/proc/$1/status"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# Three consecutive client ports whose bus ports (+10000) are free too.
free_base() {
    while :; do
        local p=$((20000 + RANDOM % 20000)) ok=1
        for i in 0 1 2; do
            for q in $((p + i)) $((p + i + 10000)); do
                if (exec 3<>"/dev/tcp/127.0.0.1/$q") 2>/dev/null; then ok=0; fi
            done
        done
        if ((ok)); then echo "$p"; return; fi
    done
}

# Starts `coordis-server --cluster-local N --port 0`; waits for its ready line.
coordis_local() {
    local n=$1
    local out=$WORK/local-$n-$RANDOM
    mkfifo "$out.fifo"
    "$COORDIS_BIN" --cluster-local "$n" --port 0 --loglevel warning >"$out.fifo" 2>/dev/null &
    PIDS+=($!)
    LOCAL_PID=$!
    head -n1 <"$out.fifo" >"$out" &
    wait $!
    grep -q '"cluster_state":"ok"' "$out"
}

coordis_start_ms() {
    local t0 t1
    t0=$(now_ms)
    coordis_local 3
    t1=$(now_ms)
    kill "$LOCAL_PID"
    echo $((t1 - t0))
}

redis_start_ms() {
    local base t0 t1 pids=() hosts=()
    base=$(free_base)
    t0=$(now_ms)
    for i in 0 1 2; do
        local port=$((base + i)) dir=$WORK/redis-$base-$i
        mkdir -p "$dir"
        redis-server --port "$port" --cluster-enabled yes --dir "$dir" --save '' \
            --appendonly no --daemonize no --loglevel warning >/dev/null &
        pids+=($!)
        PIDS+=($!)
        hosts+=("127.0.0.1:$port")
    done
    for i in 0 1 2; do
        until redis-cli -p $((base + i)) ping >/dev/null 2>&1; do sleep 0.01; done
    done
    redis-cli --cluster create "${hosts[@]}" --cluster-yes >/dev/null
    for i in 0 1 2; do
        until redis-cli -p $((base + i)) cluster info | grep -q 'cluster_state:ok'; do sleep 0.01; done
    done
    t1=$(now_ms)
    if [[ ${1:-} == keep ]]; then
        REDIS_PID=${pids[0]}
    else
        kill "${pids[@]}"
    fi
    echo $((t1 - t0))
}

echo "start to cluster_state:ok, 3 primaries ($ROUNDS rounds, median ms)"
c=(); r=()
for _ in $(seq "$ROUNDS"); do
    c+=("$(coordis_start_ms)")
    r+=("$(redis_start_ms)")
done
printf '  coordis --cluster-local 3: %s ms  (rounds: %s)\n' "$(printf '%s\n' "${c[@]}" | median)" "${c[*]}"
printf '  redis-server x3 + redis-cli --cluster create: %s ms  (rounds: %s)\n' \
    "$(printf '%s\n' "${r[@]}" | median)" "${r[*]}"

echo "memory per empty node (RSS)"
coordis_local 1
one=$(rss_kb "$LOCAL_PID")
kill "$LOCAL_PID"
coordis_local 3
three=$(rss_kb "$LOCAL_PID")
kill "$LOCAL_PID"
printf '  coordis: %s KiB per node  (--cluster-local 1: %s KiB, 3: %s KiB)\n' $(((three - one) / 2)) "$one" "$three"
redis_start_ms keep >/dev/null
printf '  redis-server: %s KiB per node\n' "$(rss_kb "$REDIS_PID")"
