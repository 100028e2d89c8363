#!/usr/bin/env bash
# Cluster figures, coordis beside redis-server 7.0.15:
#
#   start to ok   3 primaries from nothing to cluster_state:ok on every node:
#                 `coordis-server --cluster-local 3` (one process; its ready
#                 line comes once every node is ok) vs three redis-server
#                 processes, `redis-cli --cluster create --cluster-yes`, then
#                 polling CLUSTER INFO on each;
#   start to ok   3 primaries x 1 replica the same way: `--cluster-local 3
#   (3 x 1)       --cluster-replicas 1` (its ready line comes once every
#                 replica's link is up too) vs six redis-server processes and
#                 `redis-cli --cluster create --cluster-replicas 1`, then
#                 polling until every node is ok and every replica reports
#                 master_link_status:up;
#   memory        RSS per empty node: coordis (RSS of --cluster-local 3 minus
#                 that of --cluster-local 1, halved; and one coordis-server
#                 --cluster-enabled yes process of a three-process cluster)
#                 and one redis-server cluster node;
#   throughput    a `-P 16` SET load through a cluster-aware client,
#                 `redis-benchmark --cluster -t set -P 16 -c 50 -r 1000000`,
#                 on three coordis-server processes and on three redis-server
#                 processes (each joined by `redis-cli --cluster create`), and
#                 on `--cluster-local 3`; requests per second, and the
#                 servers' CPU time (user + system from /proc/PID/stat over
#                 the run, every node's process summed) per request. Runs
#                 alternate between the servers; medians are reported.
#
#   scripts/cluster.sh
#   ROUNDS=5 COORDIS_BIN=target/debug/coordis-server scripts/cluster.sh
#
# Settings (environment): ROUNDS (default 3, medians reported), REQUESTS
# (default 1000000, per throughput run), COORDIS_BIN
# (default target/release/coordis-server, built when missing). Every server
# runs in a temporary directory of its own on free ports below 55000 and
# stops when the script exits.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
REQUESTS=${REQUESTS:-1000000}
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

# N (default 3) consecutive client ports whose bus ports (+10000) are free
# too: each one bound and released (a port an outgoing connection holds is
# not listening, yet a server cannot bind it).
free_base() {
    local n=${1:-3}
    while :; do
        local p=$((20000 + RANDOM % 20000))
        if python3 - "$p" "$n" <<'PY' 2>/dev/null; then echo "$p"; return; fi
import socket, sys
p, n = int(sys.argv[1]), int(sys.argv[2])
for q in [p + i for i in range(n)] + [p + i + 10000 for i in range(n)]:
    socket.socket().bind(("127.0.0.1", q))
PY
    done
}

# Starts `coordis-server --cluster-local N --cluster-replicas R --port 0`
# (R default 0); waits for its ready line (LOCAL_PID, LOCAL_PORT: the first
# node's port).
coordis_local() {
    local n=$1 replicas=${2:-0}
    local out=$WORK/local-$n-$RANDOM
    mkfifo "$out.fifo"
    "$COORDIS_BIN" --cluster-local "$n" --cluster-replicas "$replicas" --port 0 --loglevel warning \
        >"$out.fifo" 2>/dev/null &
    PIDS+=($!)
    LOCAL_PID=$!
    head -n1 <"$out.fifo" >"$out" &
    wait $!
    grep -q '"cluster_state":"ok"' "$out"
    LOCAL_PORT=$(grep -o '"port":[0-9]*' "$out" | head -1 | cut -d: -f2)
}

# [replicas per primary] -> ms from start to the ready line.
coordis_start_ms() {
    local t0 t1
    t0=$(now_ms)
    coordis_local 3 "${1:-0}"
    t1=$(now_ms)
    kill "$LOCAL_PID"
    echo $((t1 - t0))
}

# [keep|replicas [program]] -> ms from the first server start to every node
# ok (and, with `replicas`, 3 x 1 with every replica's link up); `keep`
# leaves the 3 primaries running (REDIS_PID is the first, NODE_PIDS all of
# them, NODE_PORT the first's port). The program is redis-server unless
# named (coordis-server takes the same flags).
redis_start_ms() {
    local base t0 t1 pids=() hosts=() n=3 create=() program=${2:-redis-server}
    if [[ ${1:-} == replicas ]]; then
        n=6
        create=(--cluster-replicas 1)
    fi
    base=$(free_base "$n")
    t0=$(now_ms)
    for ((i = 0; i < n; i++)); do
        local port=$((base + i)) dir=$WORK/redis-$base-$i
        mkdir -p "$dir"
        "$program" --port "$port" --cluster-enabled yes --dir "$dir" --save '' \
            --appendonly no --daemonize no --loglevel warning >/dev/null 2>&1 &
        pids+=($!)
        PIDS+=($!)
        hosts+=("127.0.0.1:$port")
    done
    for ((i = 0; i < n; i++)); do
        until redis-cli -p $((base + i)) ping >/dev/null 2>&1; do sleep 0.01; done
    done
    redis-cli --cluster create "${hosts[@]}" "${create[@]}" --cluster-yes >/dev/null
    for ((i = 0; i < n; i++)); do
        until redis-cli -p $((base + i)) cluster info | grep -q 'cluster_state:ok'; do sleep 0.01; done
        if redis-cli -p $((base + i)) info replication | grep -q '^role:slave'; then
            until redis-cli -p $((base + i)) info replication | grep -q 'master_link_status:up'; do
                sleep 0.01
            done
        fi
    done
    t1=$(now_ms)
    if [[ ${1:-} == keep ]]; then
        REDIS_PID=${pids[0]}
        NODE_PIDS=("${pids[@]}")
        NODE_PORT=$base
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

echo "start to cluster_state:ok, 3 primaries x 1 replica, every link up ($ROUNDS rounds, median ms)"
c=(); r=()
for _ in $(seq "$ROUNDS"); do
    c+=("$(coordis_start_ms 1)")
    r+=("$(redis_start_ms replicas)")
done
printf '  coordis --cluster-local 3 --cluster-replicas 1: %s ms  (rounds: %s)\n' \
    "$(printf '%s\n' "${c[@]}" | median)" "${c[*]}"
printf '  redis-server x6 + redis-cli --cluster create --cluster-replicas 1: %s ms  (rounds: %s)\n' \
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
redis_start_ms keep "$COORDIS_BIN" >/dev/null
printf '  coordis-server --cluster-enabled yes (one of three processes): %s KiB per node\n' \
    "$(rss_kb "$REDIS_PID")"
kill "${NODE_PIDS[@]}"

# CPU ticks (user + system) of the given processes, summed.
cpu_ticks() {
    local pid total=0
    for pid in "$@"; do
        total=$((total + $(awk '{print $14 + $15}' "/proc/$pid/stat")))
    done
    echo "$total"
}

# port pid... -> "requests/s µs-of-CPU-per-request" for one SET run.
bench_set() {
    local port=$1 before after out rps
    shift
    before=$(cpu_ticks "$@")
    out=$(redis-benchmark --cluster -h 127.0.0.1 -p "$port" -t set -n "$REQUESTS" -P 16 -c 50 \
        -r 1000000 --csv 2>/dev/null)
    after=$(cpu_ticks "$@")
    rps=$(printf '%s\n' "$out" | awk -F'","' '/^"SET"/ {print int($2)}')
    echo "$rps $(((after - before) * 1000000 / $(getconf CLK_TCK) * 1000 / REQUESTS))"
}

echo "SET -P 16 through redis-benchmark --cluster, 3 primaries ($ROUNDS rounds, $REQUESTS requests each, medians)"
declare -A RPS CPU
for _ in $(seq "$ROUNDS"); do
    for kind in coordis redis local; do
        case $kind in
            coordis) redis_start_ms keep "$COORDIS_BIN" >/dev/null ;;
            redis) redis_start_ms keep >/dev/null ;;
            local)
                coordis_local 3
                NODE_PIDS=("$LOCAL_PID")
                NODE_PORT=$LOCAL_PORT
                ;;
        esac
        read -r rps ns <<<"$(bench_set "$NODE_PORT" "${NODE_PIDS[@]}")"
        RPS[$kind]+="$rps "
        CPU[$kind]+="$ns "
        kill "${NODE_PIDS[@]}"
    done
done
for kind in coordis redis local; do
    case $kind in
        coordis) name='coordis-server x3 + redis-cli --cluster create' ;;
        redis) name='redis-server x3 + redis-cli --cluster create' ;;
        local) name='coordis --cluster-local 3 (one process)' ;;
    esac
    printf '  %s: %s requests/s, %s ns CPU per request  (rounds: %s/ %s)\n' "$name" \
        "$(printf '%s\n' ${RPS[$kind]} | median)" "$(printf '%s\n' ${CPU[$kind]} | median)" \
        "${RPS[$kind]}" "${CPU[$kind]}"
done
