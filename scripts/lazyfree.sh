#!/usr/bin/env bash
# GET latency while a large value or a large keyspace is freed, coordis-server
# against redis-server 7.0.15: a 1M-member set deleted with DEL and with
# UNLINK, 1M keys flushed with FLUSHALL SYNC and with FLUSHALL ASYNC.
#
#   scripts/lazyfree.sh            # N=1000000
#   N=200000 scripts/lazyfree.sh
#   COORDIS_BIN=/path/to/coordis-server scripts/lazyfree.sh   # another build
#
# A probe client sends GETs at a fixed rate (RATE per second) from 0.5 s
# before the deletion to WINDOW seconds after it, and measures each GET
# from the time it was due, not the time it was sent (so a stall of the
# server counts for every GET it delayed, not once). Prints, per server and
# case, the deletion command's own time, and the probe's p50, p99 and max
# latency over that window (ms).
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
PORT=${PORT:-7395}
RATE=${RATE:-2000}
WINDOW=${WINDOW:-2}
for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "$tool not found"; exit 1; }
done
COORDIS_BIN=${COORDIS_BIN:-target/release/coordis-server}
[ "$COORDIS_BIN" != target/release/coordis-server ] || cargo build --release --quiet --bin coordis-server
OUT=$(mktemp -d)
cleanup() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$OUT"; }
trap cleanup EXIT

# RESP commands for one dataset on stdout: the set `big` of N members, or
# N string keys; `probe` is the key the probe reads.
generate() { # set|keys
    python3 - "$1" "$N" <<'PY'
import sys
shape, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
if shape == "set":
    for start in range(0, n, 1000):
        cmd("SADD", "big", *[f"member:{i}" for i in range(start, min(n, start + 1000))])
else:
    for i in range(n):
        cmd("SET", f"key:{i}", f"value:{i}")
PY
}

# The probe: GETs at RATE/s on one connection while another connection
# runs the deletion 0.5 s in; prints "deletion_ms p50 p99 max".
probe() { # deletion command words...
    python3 - "$PORT" "$RATE" "$WINDOW" "$@" <<'PY'
import socket, sys, threading, time
port, rate, window = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3])
deletion = sys.argv[4:]
def resp(*args):
    return b"".join([b"*%d\r\n" % len(args)] + [b"$%d\r\n%s\r\n" % (len(a), a) for a in (x.encode() for x in args)])
def connect():
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return s
def read_reply(s, buf):
    # One reply of a simple shape (+/-/:/$): enough for GET and the deletions.
    while True:
        end = buf.find(b"\r\n")
        if end >= 0:
            head = buf[:end]
            if head[:1] == b"$" and int(head[1:]) >= 0:
                need = end + 2 + int(head[1:]) + 2
                while len(buf) < need:
                    buf += s.recv(65536)
                return buf[need:]
            return buf[end + 2:]
        buf += s.recv(65536)
took = []
def delete():
    s = connect()
    time.sleep(0.5)
    t = time.perf_counter()
    s.sendall(resp(*deletion))
    read_reply(s, b"")
    took.append((time.perf_counter() - t) * 1000)
deleter = threading.Thread(target=delete)
s = connect()
get = resp("GET", "probe")
interval = 1.0 / rate
start = time.perf_counter()
deleter.start()
lat, buf, i = [], b"", 0
while time.perf_counter() - start < 0.5 + window:
    due = start + i * interval
    now = time.perf_counter()
    if now < due:
        time.sleep(due - now)
    s.sendall(get)
    buf = read_reply(s, buf)
    if due - start >= 0.5:
        lat.append((time.perf_counter() - due) * 1000)
    i += 1
deleter.join()
lat.sort()
pct = lambda p: lat[min(len(lat) - 1, int(len(lat) * p))]
print(f"{took[0]:.1f} {pct(0.5):.2f} {pct(0.99):.2f} {lat[-1]:.1f}")
PY
}

run_case() { # server dataset deletion command... -> one line
    local name=$1 dataset=$2; shift 2
    local case=$1; shift
    "$@" --port "$PORT" --save '' --appendonly no >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$PORT" --pipe <"$OUT/$dataset.resp" >/dev/null
    redis-cli -p "$PORT" set probe v >/dev/null
    local took p50 p99 max
    # shellcheck disable=SC2086
    read -r took p50 p99 max <<<"$(probe $case)"
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    printf "%-8s %-16s %10s %8s %8s %8s\n" "$name" "$case" "$took" "$p50" "$p99" "$max"
}

generate set >"$OUT/set.resp"
generate keys >"$OUT/keys.resp"
printf "N=%s, probe %s GET/s, %s s window\n" "$N" "$RATE" "$WINDOW"
printf "%-8s %-16s %10s %8s %8s %8s\n" server deletion "took ms" "p50 ms" "p99 ms" "max ms"
for server in coordis redis; do
    if [ "$server" = coordis ]; then cmd=("$COORDIS_BIN"); else cmd=(redis-server); fi
    run_case "$server" set "DEL big" "${cmd[@]}"
    run_case "$server" set "UNLINK big" "${cmd[@]}"
    run_case "$server" keys "FLUSHALL SYNC" "${cmd[@]}"
    run_case "$server" keys "FLUSHALL ASYNC" "${cmd[@]}"
done
