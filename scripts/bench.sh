#!/usr/bin/env bash
# Side-by-side redis-benchmark of coordis-server and redis-server 7.0.15:
# requests per second, and the CPU time each server spent per request.
#
#   scripts/bench.sh                       # every row, 3 rounds
#   ROWS=cpu scripts/bench.sh              # the headline rows only (a few minutes when the machine is quiet)
#   ROUNDS=5 N=50000 FORMAT=markdown scripts/bench.sh
#   ROWS=eviction scripts/bench.sh         # SET under allkeys-lru at the limit (every write evicts)
#
# Settings (environment):
#   ROUNDS    rounds per row (default 3; PAIRS is the older name). A round is
#             one coordis run then one Redis run, so the two alternate.
#   N         requests per unpipelined run (default 120000, about 1.5 s at the
#             80k requests/s of a 2-core machine); pipelined runs send
#             N x PIPELINED_FACTOR (default 8) so that they last about as long:
#             a run of a fraction of a second is mostly start-up.
#   CLIENTS   redis-benchmark -c (default 50).
#   ROWS      all (default); core: strings, locks, scripts, ZADD, MULTI/EXEC
#             and the 500-client rows; cpu: SET, GET, INCR, SET NX EX,
#             EVALSHA unlock, ZADD, LPUSH and RPOP at -P 1 and -P 16;
#             streams: the stream rows; hll: the HyperLogLog rows; geo: GEOADD and GEOSEARCH;
#             eviction: SET of random new keys without a limit, then under
#             allkeys-lru at the limit (EVICT_MB, default 64), where every write
#             evicts (see the section below).
#   COORDIS_BIN  the coordis-server to measure (default
#             target/release/coordis-server, built with `cargo build --release
#             --bin coordis-server` when missing; an existing binary is run as
#             it is, so rebuild it after changing the code).
#   FORMAT    table (default) or markdown.
#
# Both servers start here on free ports, each in its own temporary directory,
# with `--save '' --appendonly no`, and stop when the script exits. Runs
# alternate coordis, Redis, coordis, Redis... and each row reports the median
# of each server's runs:
#   req/s      as redis-benchmark measured it; ratio = coordis / Redis.
#   µs CPU/req the server process's user + system time over the run (utime +
#              stime from /proc/PID/stat, all threads, clock ticks converted
#              with `getconf CLK_TCK`) divided by the requests the run sent;
#              CPU ratio = coordis / Redis, below 1 means coordis is cheaper.
#   kernel %   the share of that CPU time the kernel spent for the server
#              (stime over utime + stime; the ticks are sampled, so read it
#              to a few percent): the system calls and the TCP stack, which
#              both servers drive with the same calls, and which no work in
#              the server's own code can make cheaper.
#   p50, p99   latency in ms as redis-benchmark measured it.
#   gen %      the load generator's CPU time over the run's wall time
#              (coordis runs / Redis runs).
# Ratios are medians of the rounds' coordis/Redis quotients. A generator near
# 100% is the limit: both servers then get the requests it can send, and the
# req/s ratio is 1.0 give or take the machine's noise whatever the servers
# cost (on 2 cores redis-benchmark tops out near 1.6M pipelined requests/s);
# the CPU column still tells which server does the work for less.
#
# The MULTI/EXEC row counts transactions (4 commands each) and comes from
# client-tests' tx-bench, redis-benchmark having no way to send one; so does
# the XREADGROUP+XACK row, which counts a consumer's round trips (read one
# entry, ack the ID it got: two commands, the second built from the first's
# reply).
set -euo pipefail
# Arguments such as XADD's `*` pass through unquoted expansions: no globbing.
set -o noglob
cd "$(dirname "$0")/.."

N=${N:-120000}
PIPELINED_N=$((N * ${PIPELINED_FACTOR:-8}))
ROUNDS=${ROUNDS:-${PAIRS:-3}}
CLIENTS=${CLIENTS:-50}
ROWS=${ROWS:-all}
FORMAT=${FORMAT:-table}
case "$ROWS" in all | core | cpu | streams | hll | geo | eviction) ;; *) echo "ROWS must be all, core, cpu, streams, hll, geo or eviction" >&2; exit 2 ;; esac
case "$FORMAT" in table | markdown) ;; *) echo "FORMAT must be table or markdown" >&2; exit 2 ;; esac
# The rows ROWS=cpu keeps (at CLIENTS clients), by label.
CPU_ROWS="|set|get|incr|SET lock NX EX|EVALSHA unlock|ZADD sem|lpush|rpop|"

command -v redis-benchmark >/dev/null || { echo "redis-benchmark not found (apt-get install redis-tools)" >&2; exit 1; }
command -v redis-server >/dev/null || { echo "redis-server not found (apt-get install redis-server)" >&2; exit 1; }
COORDIS=${COORDIS_BIN:-target/release/coordis-server}
if [ -z "${COORDIS_BIN:-}" ] && [ ! -x "$COORDIS" ]; then
    cargo build --release --quiet --bin coordis-server
fi
[ -x "$COORDIS" ] || { echo "$COORDIS is not an executable" >&2; exit 1; }
COORDIS=$(realpath "$COORDIS")
TX_BENCH=$PWD/target/release/tx-bench
if [ "$ROWS" != cpu ] && [ "$ROWS" != hll ] && [ "$ROWS" != geo ] && [ "$ROWS" != eviction ] && [ ! -x "$TX_BENCH" ]; then
    cargo build --release --quiet -p coordis-client-tests --bin tx-bench
fi

TMP=$(mktemp -d)
OUT=$TMP/out
mkdir "$OUT"
cleanup() {
    local pid
    for pid in ${CPID:-} ${RPID:-}; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A port nothing listens on, below the ephemeral range (where the
# benchmark's own connections could take it).
free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 10000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# Starts a server in its own directory on a free port and sets PORT and PID.
# The port is free when picked, not necessarily when the server binds it, so
# a server that does not answer as itself (its INFO process_id) is retried.
start() { # name binary
    local dir=$TMP/$1 bin=$2
    mkdir -p "$dir"
    for _ in 1 2 3 4 5; do
        PORT=$(free_port)
        (cd "$dir" && exec "$bin" --port "$PORT" --save '' --appendonly no --loglevel warning >>"$dir/log" 2>&1) &
        PID=$!
        for _ in $(seq 100); do
            if redis-cli -p "$PORT" info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$PID"; then
                return 0
            fi
            kill -0 "$PID" 2>/dev/null || break
            sleep 0.05
        done
        kill "$PID" 2>/dev/null || true
        wait "$PID" 2>/dev/null || true
    done
    echo "$1 did not start; its log:" >&2
    cat "$dir/log" >&2
    exit 1
}
start coordis "$COORDIS"
CPORT=$PORT CPID=$PID
start redis "$(command -v redis-server)"
RPORT=$PORT RPID=$PID

# CPU time a process has used so far, in clock ticks: user + system, then
# system alone (fields 14 and 15 of /proc/PID/stat, counted after the
# parenthesised name).
cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13, $13}'; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# One run; prints "req/s p50 p99 server-µs/request generator-% server-system-%".
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
    local before_sys after_sys
    read -r before before_sys < <(cpu_ticks "$pid")
    TIMEFORMAT='%R %U %S'
    if [ "$1" = "--tx" ] || [ "$1" = "--stream" ]; then
        { time "$TX_BENCH" "$port" "$clients" "$pipe" "$n" "${1#--}" >"$OUT/run"; } 2>"$OUT/time"
    else
        { time redis-benchmark -p "$port" -n "$n" -c "$clients" -P "$pipe" --csv "$@" >"$OUT/run" 2>/dev/null; } 2>"$OUT/time"
        tail -n 1 "$OUT/run" | tr -d '"' | awk -F, '{print $2, $5, $7}' >"$OUT/row"
        mv "$OUT/row" "$OUT/run"
    fi
    read -r after after_sys < <(cpu_ticks "$pid")
    read -r real user sys <"$OUT/time"
    echo "$(cat "$OUT/run") $(awk -v t=$((after - before)) -v k=$((after_sys - before_sys)) -v us="$TICK_US" -v n="$n" \
        -v r="$real" -v u="$user" -v s="$sys" \
        'BEGIN {printf "%.2f %.0f %.0f", t * us / n, 100 * (u + s) / r, t ? 100 * k / t : 0}')"
}

median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
# a / b to 2 places, or "-" when b is 0 (a run too short to cost a tick).
quotient() { awk -v a="$1" -v b="$2" 'BEGIN {if (b == 0) print "-"; else printf "%.2f\n", a / b}'; }
# Thousands separators for the markdown table.
commas() { sed ':a;s/\B[0-9]\{3\}\>/,&/;ta'; }

UNLOCK=$(cat scripts/lua/unlock.lua)
SHA=$(redis-cli -p "$CPORT" script load "$UNLOCK")
[ "$(redis-cli -p "$RPORT" script load "$UNLOCK")" = "$SHA" ] || { echo "script SHA mismatch" >&2; exit 1; }

TABLE_FMT="%-22s %4s %3s %10s %10s %6s %8s %8s %6s %7s %7s %7s %7s %7s %7s\n"
header() {
    local commit
    commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
    git diff --quiet HEAD 2>/dev/null || commit="$commit (uncommitted changes)"
    echo "coordis $commit ($COORDIS) vs Redis $(redis-server --version | cut -d' ' -f3 | tr -d 'v=') ($(command -v redis-server));"
    echo "$(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the start; ROUNDS=$ROUNDS N=$N (pipelined $PIPELINED_N) ROWS=$ROWS"
    echo
    if [ "$FORMAT" = markdown ]; then
        echo "| test | -c | -P | coordis req/s | Redis req/s | ratio | coordis µs CPU/req | Redis µs CPU/req | CPU ratio | kernel % coordis / Redis | p50 ms coordis / Redis | p99 ms coordis / Redis | generator busy |"
        echo "|---|---|---|---|---|---|---|---|---|---|---|---|---|"
    else
        # µ is two bytes: its columns are one wider in bytes to line up.
        printf "%-22s %4s %3s %10s %10s %6s %9s %9s %6s %7s %7s %7s %7s %7s %7s\n" "test" "-c" "-P" "coordis/s" "redis/s" "ratio" \
            "c µs/req" "r µs/req" "CPU" "kern %" "c p50" "r p50" "c p99" "r p99" "gen %"
    fi
}

# One table row: a label, clients, a pipeline depth, then redis-benchmark arguments.
row() {
    local label=$1 clients=$2 pipe=$3; shift 3
    if [ "$ROWS" = cpu ] && { [ "$clients" != "$CLIENTS" ] || [[ $CPU_ROWS != *"|$label|"* ]]; }; then
        return
    fi
    local cs=() rs=() ratios=() c50=() c99=() r50=() r99=() ccpu=() rcpu=() cpu_ratios=() cgen=() rgen=() csys=() rsys=()
    for _ in $(seq "$ROUNDS"); do
        local c r
        c=($(run "$CPORT" "$CPID" "$clients" "$pipe" "$@")); r=($(run "$RPORT" "$RPID" "$clients" "$pipe" "$@"))
        cs+=("${c[0]}"); rs+=("${r[0]}"); c50+=("${c[1]}"); c99+=("${c[2]}"); r50+=("${r[1]}"); r99+=("${r[2]}")
        ccpu+=("${c[3]}"); rcpu+=("${r[3]}"); cgen+=("${c[4]}"); rgen+=("${r[4]}"); csys+=("${c[5]}"); rsys+=("${r[5]}")
        ratios+=("$(quotient "${c[0]}" "${r[0]}")")
        cpu_ratios+=("$(quotient "${c[3]}" "${r[3]}")")
    done
    med() { printf '%s\n' "$@" | { grep -v '^-$' || true; } | median; }
    local cps rps
    cps=$(printf '%.0f' "$(med "${cs[@]}")"); rps=$(printf '%.0f' "$(med "${rs[@]}")")
    if [ "$FORMAT" = markdown ]; then
        echo "| $label | $clients | $pipe | $(commas <<<"$cps") | $(commas <<<"$rps") | $(med "${ratios[@]}") |" \
            "$(med "${ccpu[@]}") | $(med "${rcpu[@]}") | $(med "${cpu_ratios[@]}") |" \
            "$(med "${csys[@]}")% / $(med "${rsys[@]}")% |" \
            "$(med "${c50[@]}") / $(med "${r50[@]}") | $(med "${c99[@]}") / $(med "${r99[@]}") |" \
            "$(med "${cgen[@]}")% / $(med "${rgen[@]}")% |"
    else
        # shellcheck disable=SC2059
        printf "$TABLE_FMT" "$label" "$clients" "$pipe" "$cps" "$rps" "$(med "${ratios[@]}")" \
            "$(med "${ccpu[@]}")" "$(med "${rcpu[@]}")" "$(med "${cpu_ratios[@]}")" \
            "$(med "${csys[@]}")/$(med "${rsys[@]}")" "$(med "${c50[@]}")" "$(med "${r50[@]}")" "$(med "${c99[@]}")" "$(med "${r99[@]}")" \
            "$(med "${cgen[@]}")/$(med "${rgen[@]}")"
    fi
}

header
if [ "$ROWS" != streams ] && [ "$ROWS" != hll ] && [ "$ROWS" != geo ] && [ "$ROWS" != eviction ]; then
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
if [ "$ROWS" = all ] || [ "$ROWS" = cpu ]; then
    for p in "$CPORT" "$RPORT"; do
        redis-cli -p "$p" del mylist lr100 lr600 >/dev/null
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
if [ "$ROWS" = all ] || [ "$ROWS" = streams ]; then
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
# HyperLogLog: adds to one dense HLL (a million distinct elements) and to a
# thousand small sparse ones, PFCOUNT of one key (its cached cardinality,
# stale after every add only in the add rows) and of two (a union of 16384
# registers each, computed every time: unpipelined only, it is slow).
if [ "$ROWS" = all ] || [ "$ROWS" = hll ]; then
    for p in "$CPORT" "$RPORT"; do
        redis-cli -p "$p" del hll hll2 >/dev/null
    done
    for pipe in 1 16; do
        row "PFADD dense" "$CLIENTS" "$pipe" -r 1000000 PFADD hll "e:__rand_int__"
        row "PFADD sparse" "$CLIENTS" "$pipe" -r 1000 PFADD "hs:__rand_int__" "e:__rand_int__"
        row "PFCOUNT" "$CLIENTS" "$pipe" PFCOUNT hll
    done
    PREFILL="-r 1000000 PFADD hll2 e:__rand_int__" row "PFCOUNT 2 keys" "$CLIENTS" 1 PFCOUNT hll hll2
fi

# GEO: adds to an index (positions from the random integers, so members
# and positions repeat), and a nearest-ten search in an index of 100,000
# members spread over one degree by one degree (about 111 by 87 km; a 2 km
# circle holds about 130 of them, the nine cells searched several times
# that).
if [ "$ROWS" = all ] || [ "$ROWS" = geo ]; then
    for p in "$CPORT" "$RPORT"; do
        redis-cli -p "$p" del geo geoadd >/dev/null
        python3 - <<'PY' | redis-cli -p "$p" --pipe >/dev/null
import random, sys
rng = random.Random(7)
out = sys.stdout.buffer
for start in range(0, 100000, 100):
    args = [b"GEOADD", b"geo"]
    for i in range(start, start + 100):
        args += [b"%.6f" % (13 + rng.random()), b"%.6f" % (38 + rng.random()), b"driver:%d" % i]
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
PY
    done
    for pipe in 1 16; do
        row "GEOADD" "$CLIENTS" "$pipe" -r 100000 GEOADD geoadd "13.__rand_int__" "38.__rand_int__" "m:__rand_int__"
        row "GEOSEARCH 2km COUNT 10" "$CLIENTS" "$pipe" GEOSEARCH geo FROMLONLAT 13.5 38.5 BYRADIUS 2 km COUNT 10 ASC
    done
fi
# Eviction: SET of 100-byte values to random keys of a keyspace far larger
# than fits (100M keys), first without a limit (memory grows), then under
# `maxmemory EVICT_MB` and allkeys-lru, filled to the limit beforehand
# (untimed), so that nearly every SET adds a key and evicts one (the
# evictions per SET of the limited rows are printed after them).
if [ "$ROWS" = eviction ]; then
    EVICT_MB=${EVICT_MB:-64}
    SET_ARGS="-t set -r 100000000 -d 100"
    field() { redis-cli -p "$1" info "$2" | tr -d '\r' | awk -F: -v f="$3" '$1 == f {print $2}'; }
    for pipe in 1 16; do
        # shellcheck disable=SC2086
        row "SET new key, no limit" "$CLIENTS" "$pipe" $SET_ARGS
    done
    for p in "$CPORT" "$RPORT"; do
        redis-cli -p "$p" flushall >/dev/null
        redis-cli -p "$p" config set maxmemory-policy allkeys-lru >/dev/null
        redis-cli -p "$p" config set maxmemory "${EVICT_MB}mb" >/dev/null
        # shellcheck disable=SC2086
        until [ "$(field "$p" stats evicted_keys)" -gt 0 ]; do
            redis-benchmark -p "$p" -n 200000 -c 50 -P 16 -q $SET_ARGS >/dev/null 2>&1
        done
    done
    declare -A EVICTED_BEFORE SETS_BEFORE
    for p in "$CPORT" "$RPORT"; do
        EVICTED_BEFORE[$p]=$(field "$p" stats evicted_keys)
        SETS_BEFORE[$p]=$(redis-cli -p "$p" info commandstats | tr -d '\r' | sed -n 's/^cmdstat_set:calls=\([0-9]*\).*/\1/p')
    done
    for pipe in 1 16; do
        # shellcheck disable=SC2086
        row "SET at the limit (LRU)" "$CLIENTS" "$pipe" $SET_ARGS
    done
    echo
    for p in "$CPORT" "$RPORT"; do
        name=coordis
        [ "$p" = "$RPORT" ] && name=Redis
        sets=$(redis-cli -p "$p" info commandstats | tr -d '\r' | sed -n 's/^cmdstat_set:calls=\([0-9]*\).*/\1/p')
        evicted=$(field "$p" stats evicted_keys)
        echo "$name: $((evicted - EVICTED_BEFORE[$p])) keys evicted for $((sets - SETS_BEFORE[$p])) SETs at the limit," \
            "used_memory $(field "$p" memory used_memory) of maxmemory $(field "$p" memory maxmemory)"
    done
fi
echo
echo "load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
