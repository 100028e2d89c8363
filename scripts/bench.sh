#!/usr/bin/env bash
# Side-by-side redis-benchmark of coordis-server and redis-server.
#
#   scripts/bench.sh            # default: -n 200000 per run, 3 alternating pairs
#   N=50000 PAIRS=1 scripts/bench.sh
#
# Both servers run on this machine with the same flags; runs alternate
# coordis, redis, coordis, redis... and each row reports the median ops/s of
# each server and the median coordis/redis ratio of the pairs.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-200000}
PAIRS=${PAIRS:-3}
CLIENTS=${CLIENTS:-50}
CPORT=${CPORT:-7391}
RPORT=${RPORT:-7392}

command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)"; exit 1; }
cargo build --release --quiet --bin coordis-server
COORDIS=target/release/coordis-server

cleanup() { kill "${CPID:-}" "${RPID:-}" 2>/dev/null || true; wait 2>/dev/null || true; }
trap cleanup EXIT
"$COORDIS" --port "$CPORT" --save '' --appendonly no --loglevel warning 2>/dev/null &
CPID=$!
redis-server --port "$RPORT" --save '' --appendonly no --loglevel warning >/dev/null &
RPID=$!
for p in "$CPORT" "$RPORT"; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done

# One redis-benchmark run; prints ops/s.
run() { # port pipeline test...
    local port=$1 pipe=$2; shift 2
    redis-benchmark -p "$port" -n "$N" -c "$CLIENTS" -P "$pipe" --csv "$@" 2>/dev/null | tail -n 1 | cut -d, -f2 | tr -d '"'
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

UNLOCK=$(cat scripts/lua/unlock.lua)
SHA=$(redis-cli -p "$CPORT" script load "$UNLOCK")
[ "$(redis-cli -p "$RPORT" script load "$UNLOCK")" = "$SHA" ] || { echo "script SHA mismatch"; exit 1; }

# One table row: a label, a pipeline depth, then redis-benchmark arguments.
row() {
    local label=$1 pipe=$2; shift 2
    local cs=() rs=() ratios=()
    for _ in $(seq "$PAIRS"); do
        local c r
        c=$(run "$CPORT" "$pipe" "$@"); r=$(run "$RPORT" "$pipe" "$@")
        cs+=("$c"); rs+=("$r"); ratios+=("$(awk -v c="$c" -v r="$r" 'BEGIN {printf "%.3f", c / r}')")
    done
    printf "%-28s %4s %14s %14s %8s\n" "$label" "$pipe" \
        "$(printf '%s\n' "${cs[@]}" | median)" "$(printf '%s\n' "${rs[@]}" | median)" "$(printf '%s\n' "${ratios[@]}" | median)"
}

printf "%-28s %4s %14s %14s %8s\n" "test" "-P" "coordis ops/s" "redis ops/s" "ratio"
for pipe in 1 16; do
    for t in set get incr; do
        row "$t" "$pipe" -t "$t"
    done
    row "SET lock NX EX" "$pipe" -r 100000 SET "lock:__rand_int__" pod NX EX 30
    row "EVALSHA unlock" "$pipe" -r 100000 EVALSHA "$SHA" 1 "lock:__rand_int__" pod
    row "EVAL unlock (cached)" "$pipe" -r 100000 EVAL "$UNLOCK" 1 "lock:__rand_int__" pod
done
