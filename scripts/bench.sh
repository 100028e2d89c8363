#!/usr/bin/env bash
# Side-by-side redis-benchmark of coordis-server and redis-server.
#
#   scripts/bench.sh            # default: -n 200000 per run (x5 at -P 16), 3 alternating pairs
#   N=50000 PAIRS=1 scripts/bench.sh
#
# Both servers run on this machine with the same flags; runs alternate
# coordis, redis, coordis, redis... and each row reports the median ops/s of
# each server, the median coordis/redis ratio of the pairs, and the median
# p50 / p99 latency (ms) of each server as redis-benchmark measured it.
# The MULTI/EXEC row counts transactions (4 commands each) and comes from
# client-tests' tx-bench, redis-benchmark having no way to send one; so does
# the XREADGROUP+XACK row, which counts a consumer's round trips (read one
# entry, ack the ID it got: two commands, the second built from the first's
# reply). ROWS=core runs the string, lock and script rows only; ROWS=streams
# the stream rows only.
#
# Two more columns tell which side limits a row: the CPU each server used
# per request (µs, user + system, from /proc/PID/stat around the run), and
# how busy the load generator was (its CPU time over the run's wall time,
# coordis runs / redis runs). A generator near 100% is the limit: both
# servers then get the requests it can send, and the ratio is 1.0 give or
# take the machine's noise, whatever the servers' costs.
set -euo pipefail
# Arguments such as XADD's `*` pass through unquoted expansions: no globbing.
set -o noglob
cd "$(dirname "$0")/.."

N=${N:-200000}
# Pipelined runs get more requests so that each lasts about as long as an
# unpipelined one: a run of a fraction of a second is mostly start-up.
PIPELINED_N=$((N * ${PIPELINED_FACTOR:-5}))
PAIRS=${PAIRS:-3}
CLIENTS=${CLIENTS:-50}
CPORT=${CPORT:-7391}
RPORT=${RPORT:-7392}

command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)"; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)"; exit 1; }
cargo build --release --quiet --bin coordis-server --bin tx-bench
COORDIS=target/release/coordis-server

cleanup() { kill "${CPID:-}" "${RPID:-}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "${OUT:-}"; }
trap cleanup EXIT
"$COORDIS" --port "$CPORT" --save '' --appendonly no --loglevel warning >/dev/null 2>&1 &
CPID=$!
redis-server --port "$RPORT" --save '' --appendonly no --loglevel warning >/dev/null &
RPID=$!
for p in "$CPORT" "$RPORT"; do
    for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done

# CPU time a process has used so far, in clock ticks (user + system).
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
OUT=$(mktemp -d)

# One run; prints "ops/s p50 p99 server-µs/request generator-%".
# redis-benchmark sends one command per request, so the MULTI/EXEC row (test
# "--tx") uses tx-bench, which prints the same figures for whole transactions.
run() { # port server-pid clients pipeline test...
    local port=$1 pid=$2 clients=$3 pipe=$4; shift 4
    local n=$N
    [ "$pipe" -gt 1 ] && n=$PIPELINED_N
    local before after
    # Untimed set-up a row may need (pops need something to pop).
    if [ -n "${PREFILL:-}" ]; then
        # shellcheck disable=SC2086
        redis-benchmark -p "$port" -n "$n" -c 50 -P 16 -q $PREFILL >/dev/null 2>&1
    fi
    before=$(cpu_ticks "$pid")
    TIMEFORMAT='%R %U %S'
    if [ "$1" = "--tx" ] || [ "$1" = "--stream" ]; then
        { time target/release/tx-bench "$port" "$clients" "$pipe" "$n" "${1#--}" >"$OUT/run"; } 2>"$OUT/time"
    else
        { time redis-benchmark -p "$port" -n "$n" -c "$clients" -P "$pipe" --csv "$@" >"$OUT/run" 2>/dev/null; } 2>"$OUT/time"
        tail -n 1 "$OUT/run" | tr -d '"' | awk -F, '{print $2, $5, $7}' >"$OUT/row"
        mv "$OUT/row" "$OUT/run"
    fi
    after=$(cpu_ticks "$pid")
    read -r real user sys <"$OUT/time"
    echo "$(cat "$OUT/run") $(awk -v t=$((after - before)) -v us="$TICK_US" -v n="$n" -v r="$real" -v u="$user" -v s="$sys" \
        'BEGIN {printf "%.2f %.0f", t * us / n, 100 * (u + s) / r}')"
}

median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

UNLOCK=$(cat scripts/lua/unlock.lua)
SHA=$(redis-cli -p "$CPORT" script load "$UNLOCK")
[ "$(redis-cli -p "$RPORT" script load "$UNLOCK")" = "$SHA" ] || { echo "script SHA mismatch"; exit 1; }

# One table row: a label, clients, a pipeline depth, then redis-benchmark arguments.
row() {
    local label=$1 clients=$2 pipe=$3; shift 3
    local cs=() rs=() ratios=() c50=() c99=() r50=() r99=() ccpu=() rcpu=() cgen=() rgen=()
    for _ in $(seq "$PAIRS"); do
        local c r
        c=($(run "$CPORT" "$CPID" "$clients" "$pipe" "$@")); r=($(run "$RPORT" "$RPID" "$clients" "$pipe" "$@"))
        cs+=("${c[0]}"); rs+=("${r[0]}"); c50+=("${c[1]}"); c99+=("${c[2]}"); r50+=("${r[1]}"); r99+=("${r[2]}")
        ccpu+=("${c[3]}"); rcpu+=("${r[3]}"); cgen+=("${c[4]}"); rgen+=("${r[4]}")
        ratios+=("$(awk -v c="${c[0]}" -v r="${r[0]}" 'BEGIN {printf "%.3f", c / r}')")
    done
    med() { printf '%s\n' "$@" | median; }
    printf "%-22s %4s %3s %12s %12s %6s %7s %7s %7s %7s %6s %6s %7s\n" "$label" "$clients" "$pipe" \
        "$(med "${cs[@]}")" "$(med "${rs[@]}")" "$(med "${ratios[@]}")" \
        "$(med "${c50[@]}")" "$(med "${r50[@]}")" "$(med "${c99[@]}")" "$(med "${r99[@]}")" \
        "$(med "${ccpu[@]}")" "$(med "${rcpu[@]}")" "$(med "${cgen[@]}")/$(med "${rgen[@]}")"
}

printf "%-22s %4s %3s %12s %12s %6s %7s %7s %7s %7s %6s %6s %7s\n" "test" "-c" "-P" "coordis/s" "redis/s" "ratio" \
    "c p50" "r p50" "c p99" "r p99" "c µs" "r µs" "gen %"
if [ "${ROWS:-all}" != streams ]; then
    for pipe in 1 16; do
        for t in set get incr; do
            row "$t" "$CLIENTS" "$pipe" -t "$t"
        done
        row "SET lock NX EX" "$CLIENTS" "$pipe" -r 100000 SET "lock:__rand_int__" pod NX EX 30
        row "EVALSHA unlock" "$CLIENTS" "$pipe" -r 100000 EVALSHA "$SHA" 1 "lock:__rand_int__" pod
        row "EVAL unlock (cached)" "$CLIENTS" "$pipe" -r 100000 EVAL "$UNLOCK" 1 "lock:__rand_int__" pod
        row "ZADD sem" "$CLIENTS" "$pipe" -r 100000 ZADD sem __rand_int__ "m:__rand_int__"
        row "MULTI INCR SET NX EXEC" "$CLIENTS" "$pipe" --tx
    done
    row "set" 500 1 -t set
    row "SET lock NX EX" 500 1 -r 100000 SET "lock:__rand_int__" pod NX EX 30
fi

# Hashes, lists and sets: redis-benchmark's own tests (ROWS=core skips them).
if [ "${ROWS:-all}" = all ]; then
    redis-cli -p "$CPORT" del mylist >/dev/null; redis-cli -p "$RPORT" del mylist >/dev/null
    for p in "$CPORT" "$RPORT"; do
        for _ in $(seq 6); do
            redis-cli -p "$p" rpush lr100 $(seq 100) >/dev/null
            redis-cli -p "$p" rpush lr600 $(seq 100) >/dev/null
        done
        redis-cli -p "$p" ltrim lr100 0 99 >/dev/null
    done
    for pipe in 1 16; do
        for t in lpush rpush sadd hset mset; do
            row "$t" "$CLIENTS" "$pipe" -t "$t"
        done
        PREFILL="-t lpush" row "lpop" "$CLIENTS" "$pipe" -t lpop
        PREFILL="-t rpush" row "rpop" "$CLIENTS" "$pipe" -t rpop
        PREFILL="-r 100000 -t sadd" row "spop" "$CLIENTS" "$pipe" -t spop
        row "lrange_100" "$CLIENTS" "$pipe" LRANGE lr100 0 99
        row "lrange_600" "$CLIENTS" "$pipe" LRANGE lr600 0 599
    done
fi

# Streams: appends to an events stream, and a consumer group's read-and-ack
# round trip (each run first appends as many entries as it will read).
if [ "${ROWS:-all}" = all ] || [ "${ROWS:-all}" = streams ]; then
    XADD_ARGS="XADD s * job __rand_int__ event completed worker w-1"
    for p in "$CPORT" "$RPORT"; do
        redis-cli -p "$p" del s >/dev/null
        redis-cli -p "$p" xgroup create s g 0 mkstream >/dev/null
    done
    for pipe in 1 16; do
        # shellcheck disable=SC2086
        row "XADD" "$CLIENTS" "$pipe" -r 100000 $XADD_ARGS
    done
    PREFILL="-r 100000 $XADD_ARGS" row "XREADGROUP+XACK" "$CLIENTS" 1 --stream
fi
