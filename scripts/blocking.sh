#!/usr/bin/env bash
# Blocking commands on coordis-server and redis-server 7.0.15, side by side:
#
#   scripts/blocking.sh                 # 10,000 idle waiters, 3 latency runs each
#   CLIENTS=2000 RUNS=1 scripts/blocking.sh
#
# 1. Wake-up latency: a producer LPUSHes, a consumer waiting in BLPOP gets it
#    (client-tests' wake-bench); p50 / p99 in µs for 1 consumer and for 100
#    consumers each blocked on its own key, the median of RUNS runs per server,
#    the servers' runs interleaved.
# 2. Idle waiters: CLIENTS connections blocked in BLPOP, each on its own key.
#    The server's CPU time over 10 s of idleness (nothing should poll), and
#    its RSS growth per blocked client (connection state, the blocked
#    command and the key's wait queue; each side's own socket buffers
#    included, the kernel's not).
set -euo pipefail
cd "$(dirname "$0")/.."

CLIENTS=${CLIENTS:-10000}
RUNS=${RUNS:-3}
CPORT=${CPORT:-7411}
RPORT=${RPORT:-7412}
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)"; exit 1; }
command -v redis-cli >/dev/null || { echo "redis-cli not found (apt-get install redis-tools)"; exit 1; }
cargo build --release --quiet --bin coordis-server --bin wake-bench
ulimit -n $((CLIENTS + 1024)) 2>/dev/null || { echo "cannot raise the open-file limit for $CLIENTS clients"; exit 1; }
BENCH=target/release/wake-bench
OUT=$(mktemp -d)
cleanup() { kill "${CPID:-}" "${RPID:-}" "${HOLD:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "$OUT"; }
trap cleanup EXIT

target/release/coordis-server --port "$CPORT" --save '' --maxclients $((CLIENTS + 100)) --loglevel warning >/dev/null 2>&1 &
CPID=$!
redis-server --port "$RPORT" --maxclients $((CLIENTS + 100)) --save '' --appendonly no --loglevel warning >/dev/null &
RPID=$!
for p in "$CPORT" "$RPORT"; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done

median() { sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

echo "wake-up latency (µs), median of $RUNS runs"
printf '%-10s %-22s %-22s\n' consumers "coordis p50 / p99" "redis p50 / p99"
for consumers in 1 100; do
    rounds=$((2000 / consumers)); [ "$rounds" -lt 20 ] && rounds=20
    : >"$OUT/c"; : >"$OUT/r"
    for _ in $(seq "$RUNS"); do
        "$BENCH" latency "$CPORT" "$consumers" "$rounds" >>"$OUT/c"
        "$BENCH" latency "$RPORT" "$consumers" "$rounds" >>"$OUT/r"
    done
    cp50=$(cut -d' ' -f1 "$OUT/c" | median); cp99=$(cut -d' ' -f2 "$OUT/c" | median)
    rp50=$(cut -d' ' -f1 "$OUT/r" | median); rp99=$(cut -d' ' -f2 "$OUT/r" | median)
    printf '%-10s %-22s %-22s\n' "$consumers" "$cp50 / $cp99" "$rp50 / $rp99"
done

echo
echo "$CLIENTS idle clients blocked in BLPOP, one key each"
printf '%-8s %-22s %-20s\n' server "CPU over 10 s idle" "RSS per waiter"
hz=$(getconf CLK_TCK)
for server in coordis redis; do
    if [ "$server" = coordis ]; then port=$CPORT pid=$CPID; else port=$RPORT pid=$RPID; fi
    before=$(rss_kb "$pid")
    mkfifo "$OUT/hold"
    "$BENCH" hold "$port" "$CLIENTS" <"$OUT/hold" >"$OUT/ready" &
    HOLD=$!
    exec 3>"$OUT/hold"
    for _ in $(seq 600); do grep -q ready "$OUT/ready" 2>/dev/null && break; sleep 0.1; done
    grep -q ready "$OUT/ready" || { echo "the waiters never blocked on $server"; exit 1; }
    sleep 1
    after=$(rss_kb "$pid")
    t0=$(ticks "$pid")
    sleep 10
    t1=$(ticks "$pid")
    exec 3>&-
    wait "$HOLD" || true
    rm -f "$OUT/hold" "$OUT/ready"
    cpu_ms=$(( (t1 - t0) * 1000 / hz ))
    per=$(( (after - before) * 1024 / CLIENTS ))
    printf '%-8s %-22s %-20s\n' "$server" "${cpu_ms} ms" "${per} bytes"
done
