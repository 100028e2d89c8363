#!/usr/bin/env bash
# The CPU floor under the CPU-per-request figures of scripts/bench.sh: the
# server CPU time per request of coordis-server, redis-server 7.0.15 and
# scripts/floor/floor.c (an epoll loop that reads each batch and answers
# +OK to every request in it, with the same read and write per batch as
# both servers and no other work), side by side on the same redis-benchmark
# runs, alternating. What a server spends above the floor is its own code;
# the floor is the kernel's TCP path and the event loop, which no server's
# code removes. "floor/R" says how much of Redis's CPU is that floor, and
# "room" how many µs per request a server may spend above the floor to read
# GOAL_P1 (default 0.95) or GOAL_P16 (default 0.80) of Redis's CPU.
#
#   scripts/cpu-floor.sh
#   ROUNDS=5 N=200000 TESTS="set get" scripts/cpu-floor.sh
#
# Settings (environment): ROUNDS (default 3), N (requests per -P 1 run,
# default 150000; -P 16 runs send 8 times as many), CLIENTS (default 50),
# TESTS (redis-benchmark tests, default "set get incr"), COORDIS_BIN
# (default target/release/coordis-server, built when missing). Needs cc,
# redis-server and redis-benchmark. CPU is utime + stime of the server
# process from /proc/PID/stat around each run, divided by the run's
# requests; every figure is the median of the rounds.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
N=${N:-150000}
CLIENTS=${CLIENTS:-50}
TESTS=${TESTS:-set get incr}
GOAL_P1=${GOAL_P1:-0.95}
GOAL_P16=${GOAL_P16:-0.80}
COORDIS=${COORDIS_BIN:-target/release/coordis-server}
[[ -x $COORDIS ]] || cargo build --release --quiet --bin coordis-server
COORDIS=$(realpath "$COORDIS")

TMP=$(mktemp -d)
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
cc -O2 -o "$TMP/floor" scripts/floor/floor.c

free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
wait_port() { for _ in $(seq 200); do redis-cli -p "$1" PING >/dev/null 2>&1 && return 0; sleep 0.05; done; echo "nothing answers on port $1" >&2; exit 1; }

declare -A PORT PID
for s in coordis redis floor; do
    PORT[$s]=$(free_port)
    case $s in
    coordis) (cd "$TMP" && exec "$COORDIS" --port "${PORT[$s]}" --save '' --appendonly no --loglevel warning >/dev/null 2>&1) & ;;
    redis) (cd "$TMP" && exec redis-server --port "${PORT[$s]}" --save '' --appendonly no --loglevel warning >/dev/null 2>&1) & ;;
    floor) "$TMP/floor" "${PORT[$s]}" >/dev/null 2>&1 & ;;
    esac
    PID[$s]=$!
    PIDS+=("${PID[$s]}")
    wait_port "${PORT[$s]}"
done

ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }

printf '%-6s %3s %9s %9s %9s %8s %8s %8s %9s\n' test -P "c µs/req" "r µs/req" "f µs/req" "c/R" "floor/R" "goal" "room µs"
for test in $TESTS; do
    for pipe in 1 16; do
        n=$N goal=$GOAL_P1
        [[ $pipe == 16 ]] && n=$((N * 8)) goal=$GOAL_P16
        for round in $(seq "$ROUNDS"); do
            for s in coordis redis floor; do
                before=$(ticks "${PID[$s]}")
                redis-benchmark -p "${PORT[$s]}" -t "$test" -n "$n" -c "$CLIENTS" -P "$pipe" -q >/dev/null 2>&1
                after=$(ticks "${PID[$s]}")
                awk -v t=$((after - before)) -v us="$TICK_US" -v n="$n" 'BEGIN {printf "%.3f\n", t * us / n}' >>"$TMP/$test-$pipe-$s"
            done
        done
        c=$(median <"$TMP/$test-$pipe-coordis") r=$(median <"$TMP/$test-$pipe-redis") f=$(median <"$TMP/$test-$pipe-floor")
        awk -v t="$test" -v p="$pipe" -v c="$c" -v r="$r" -v f="$f" -v g="$goal" \
            'BEGIN {printf "%-6s %3s %10.2f %10.2f %10.2f %8.2f %8.2f %8.2f %8.2f\n", t, p, c, r, f, c / r, f / r, g, g * r - f}'
    done
done
echo "(medians of $ROUNDS alternating rounds, N=$N, -c $CLIENTS; room = goal x Redis's CPU - the floor's, what a server's own code may spend per request; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end, $(nproc) cores)"
