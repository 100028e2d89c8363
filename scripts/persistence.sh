#!/usr/bin/env bash
# Snapshot figures, coordis-server (forkless snapshot) and redis-server 7.0.15
# (fork) side by side:
#
#   BGSAVE, BGREWRITEAOF   KEYS keys (default 1,000,000), a steady SET load
#                          (redis-benchmark, CLIENTS clients, unpipelined) all
#                          along; a probe client's SET p99 for IDLE_SECS with
#                          nothing saving, then during the save or rewrite;
#                          the server's memory (the RSS of the process and,
#                          Redis, its forked child) before and at its peak
#                          during it; how long it took;
#   SAVE, load             SAVE of the KEYS keys, then a restart on that file:
#                          the time until PING answers PONG.
#
#   scripts/persistence.sh
#   KEYS=200000 ROUNDS=1 scripts/persistence.sh
#   KINDS=BGREWRITEAOF SERVERS="coordis base redis" BASE_BIN=/tmp/old/coordis-server scripts/persistence.sh
#
# Settings (environment): KEYS, ROUNDS (default 3; the servers alternate,
# every figure is the median of the rounds), CLIENTS (default 10), IDLE_SECS
# (default 3), COORDIS_BIN (default target/release/coordis-server, built when
# missing), COORDIS_ARGS (more arguments for coordis-server, e.g.
# "--bgsave-slice-keys 64"), SERVERS (default "coordis redis"; "base" is a
# second coordis build, BASE_BIN, such as the one before a change, measured
# in the same alternation), KINDS (default "BGSAVE BGREWRITEAOF SAVE": the
# measurements to make; SAVE is the SAVE and the restart), GEN_NICE (the
# load generator's nice value, default 10: on a machine of two cores the
# generator and the server each keep a core busy, and at equal priority the
# probe waits for the scheduler for milliseconds, which its latencies then
# show whatever the server does; 0 measures that too). Every server starts here on a free port in a temporary directory
# of its own, and stops when the script exits. The machine's load average is
# printed with the figures: the two servers share its cores with the load
# generator and the probe.
set -euo pipefail
cd "$(dirname "$0")/.."

KEYS=${KEYS:-1000000}
ROUNDS=${ROUNDS:-3}
CLIENTS=${CLIENTS:-10}
IDLE_SECS=${IDLE_SECS:-3}
COORDIS_BIN=${COORDIS_BIN:-target/release/coordis-server}
read -r -a COORDIS_ARGS <<<"${COORDIS_ARGS:-}"
SERVERS=${SERVERS:-coordis redis}
KINDS=${KINDS:-BGSAVE BGREWRITEAOF SAVE}
BASE_BIN=${BASE_BIN:-}
[[ " $SERVERS " != *" base "* || -x $BASE_BIN ]] || { echo "SERVERS has base: set BASE_BIN to a coordis-server" >&2; exit 2; }
GEN_NICE=${GEN_NICE:-10}
if [[ ! -x $COORDIS_BIN ]]; then
    cargo build --release --bin coordis-server
fi
REDIS_BIN=$(command -v redis-server)

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

# Waits until the server on port $1 answers PONG (not -LOADING).
wait_pong() {
    for _ in $(seq 1 6000); do
        [[ $(redis-cli -p "$1" PING 2>/dev/null) == PONG ]] && return 0
        sleep 0.01
    done
    echo "server on port $1 did not start" >&2
    exit 1
}

now_ms() { date +%s%3N; }

# Loads KEYS string keys through redis-cli --pipe.
load() {
    awk -v n="$KEYS" 'BEGIN { for (i = 0; i < n; i++) { k = "key:" i; v = "value:" i;
        printf "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", length(k), k, length(v), v } }' |
        redis-cli -p "$1" --pipe >/dev/null
}

# The probe: SET latencies for IDLE_SECS, then COMMAND (BGSAVE or
# BGREWRITEAOF) and SET latencies until INFO's FIELD is 0 again, sampling
# the memory of PID and its children. Prints "idle_p99_ms save_p99_ms save_ms
# mb_before mb_peak".
PROBE=$(
    cat <<'EOF'
import socket, sys, time

port, pid, command, field, idle_secs = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3], sys.argv[4], float(sys.argv[5])

def connect():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s, s.makefile("rb")

def call(conn, *args):
    s, f = conn
    s.sendall(b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in args]))
    line = f.readline()
    if line[:1] == b"$":
        n = int(line[1:])
        return f.read(n + 2)[:-2] if n >= 0 else None
    return line.rstrip(b"\r\n")

# The server's memory without walking its page tables: reading its
# smaps_rollup holds its memory map's lock, and every allocator call that
# maps or protects memory meanwhile (glibc grows a thread's heap a page at
# a time) stalls the server for the walk's milliseconds, which is the
# probe measuring itself. The process's RSS comes from /proc/PID/status
# (counters, no walk); a forked child's (Redis's saving child) pages are
# either shared with the parent, already counted in its RSS, or copies of
# its own, the Private lines of the child's smaps_rollup (another map).
def rss_kb(p):
    total = 0
    try:
        with open("/proc/%d/status" % p) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        for task in __import__("os").listdir("/proc/%d/task" % p):
            with open("/proc/%d/task/%s/children" % (p, task)) as f:
                for child in f.read().split():
                    with open("/proc/%s/smaps_rollup" % child) as g:
                        for line in g:
                            if line.startswith("Private_"):
                                total += int(line.split()[1])
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total

def p99(samples):
    samples = sorted(samples)
    return samples[min(len(samples) - 1, int(len(samples) * 0.99))] * 1000

probe, control = connect(), connect()
def timed_set(i):
    t = time.perf_counter()
    call(probe, b"SET", b"probe:%d" % (i % 1000), b"v")
    return time.perf_counter() - t

idle, i = [], 0
end = time.perf_counter() + idle_secs
while time.perf_counter() < end:
    idle.append(timed_set(i)); i += 1
before = rss_kb(pid)
peak = before
started = time.perf_counter()
reply = call(control, command.encode())
if reply[:1] == b"-":
    sys.exit("%s: %s" % (command, reply.decode()))
during, last_check = [], 0.0
while True:
    during.append(timed_set(i)); i += 1
    now = time.perf_counter()
    if now - last_check >= 0.02:
        last_check = now
        peak = max(peak, rss_kb(pid))
        info = call(control, b"INFO", b"persistence").decode()
        if "\r\n%s:0\r\n" % field in info and now - started > 0.01:
            break
save_ms = (time.perf_counter() - started) * 1000
print("%.3f %.3f %.0f %.1f %.1f" % (p99(idle), p99(during), save_ms, before / 1024, peak / 1024))
EOF
)

# One server kind, one round: appends "name command idle_p99 save_p99 save_ms
# mb_before mb_peak" rows and "name SAVE save_ms load_ms" to $WORK/rows.
measure() {
    local name=$1 bin=$2 round=$3 dir="$WORK/$1-$3" port pid bench own=()
    [[ $name == coordis || $name == base ]] && own=("${COORDIS_ARGS[@]}")
    for kind in BGSAVE BGREWRITEAOF; do
        [[ " $KINDS " == *" $kind "* ]] || continue
        mkdir -p "$dir/$kind"
        port=$(free_port)
        local extra=(--appendonly no) field=rdb_bgsave_in_progress
        if [[ $kind == BGREWRITEAOF ]]; then
            extra=(--appendonly yes --appendfsync everysec --auto-aof-rewrite-percentage 0) field=aof_rewrite_in_progress
        fi
        "$bin" --port "$port" --save '' --dir "$dir/$kind" "${extra[@]}" "${own[@]}" --logfile "$dir/$kind.log" >/dev/null &
        pid=$!
        PIDS+=("$pid")
        wait_pong "$port"
        load "$port"
        nice -n "$GEN_NICE" redis-benchmark -p "$port" -t set -r "$KEYS" -n 100000000 -c "$CLIENTS" -q >/dev/null 2>&1 &
        bench=$!
        PIDS+=("$bench")
        sleep 1
        echo "$name $kind $(python3 -c "$PROBE" "$port" "$pid" "$kind" "$field" "$IDLE_SECS")" >>"$WORK/rows"
        echo "round $round: $(tail -1 "$WORK/rows")" >&2
        kill "$bench" "$pid" 2>/dev/null || true
        wait "$bench" "$pid" 2>/dev/null || true
    done
    # SAVE, then a restart on the file.
    [[ " $KINDS " == *" SAVE "* ]] || { rm -rf "$dir"; return 0; }
    mkdir -p "$dir/save"
    port=$(free_port)
    "$bin" --port "$port" --save '' --dir "$dir/save" "${own[@]}" --logfile "$dir/save.log" >/dev/null &
    pid=$!
    PIDS+=("$pid")
    wait_pong "$port"
    load "$port"
    local started save_ms load_ms
    started=$(now_ms)
    redis-cli -p "$port" SAVE >/dev/null
    save_ms=$(($(now_ms) - started))
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    port=$(free_port)
    started=$(now_ms)
    "$bin" --port "$port" --save '' --dir "$dir/save" "${own[@]}" --logfile "$dir/load.log" >/dev/null &
    pid=$!
    PIDS+=("$pid")
    wait_pong "$port"
    load_ms=$(($(now_ms) - started))
    local keys
    keys=$(redis-cli -p "$port" DBSIZE)
    [[ $keys == "$KEYS" ]] || { echo "$name loaded $keys keys, not $KEYS" >&2; exit 1; }
    kill "$pid"
    wait "$pid" 2>/dev/null || true
    echo "$name SAVE $save_ms $load_ms" >>"$WORK/rows"
    echo "round $round: $(tail -1 "$WORK/rows")" >&2
    rm -rf "$dir"
}

load_before=$(cut -d' ' -f1-3 /proc/loadavg)
for round in $(seq 1 "$ROUNDS"); do
    [[ " $SERVERS " == *" coordis "* ]] && measure coordis "$COORDIS_BIN" "$round"
    [[ " $SERVERS " == *" base "* ]] && measure base "$BASE_BIN" "$round"
    [[ " $SERVERS " == *" redis "* ]] && measure redis "$REDIS_BIN" "$round"
done

# The median of column $3 of the rows of server $1 and command $2.
median() {
    awk -v s="$1" -v c="$2" -v col="$3" '$1 == s && $2 == c { print $col }' "$WORK/rows" | sort -g |
        awk '{ v[NR] = $1 } END { print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2 }'
}

printf '%-8s %-13s %12s %12s %9s %10s %10s\n' server command "idle p99 ms" "save p99 ms" "time ms" "RSS MB" "peak MB"
for cmd in BGSAVE BGREWRITEAOF; do
    [[ " $KINDS " == *" $cmd "* ]] || continue
    for s in $SERVERS; do
        printf '%-8s %-13s %12s %12s %9s %10s %10s\n' "$s" "$cmd" "$(median $s $cmd 3)" "$(median $s $cmd 4)" \
            "$(median $s $cmd 5)" "$(median $s $cmd 6)" "$(median $s $cmd 7)"
    done
done
if [[ " $KINDS " == *" SAVE "* ]]; then
    printf '\n%-8s %12s %12s\n' server "SAVE ms" "load ms"
    for s in $SERVERS; do
        printf '%-8s %12s %12s\n' "$s" "$(median $s SAVE 3)" "$(median $s SAVE 4)"
    done
fi
echo "($KEYS keys; SET load from $CLIENTS redis-benchmark clients at nice $GEN_NICE; medians of $ROUNDS alternating rounds;" \
    "load average $load_before before, $(cut -d' ' -f1-3 /proc/loadavg) after; $(nproc) cores)"
