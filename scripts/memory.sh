#!/usr/bin/env bash
# Memory of coordis-server against redis-server 7.0.15 for the shapes
# coordination libraries and job queues create, each loaded the same way
# (redis-cli --pipe) into a fresh server of each:
#
#   scripts/memory.sh            # N=1000000
#   N=100000 scripts/memory.sh
#   SHAPES="stream jobs" scripts/memory.sh   # only these shapes
#   COORDIS_BIN=/path/to/coordis-server scripts/memory.sh   # another build
#
# Prints, per shape, each server's RSS after loading minus its RSS when
# started empty (MB), and the coordis/Redis ratio.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
SHAPES=${SHAPES:-locks hash set list lists jobs stream}
PORT=${PORT:-7394}
for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "$tool not found"; exit 1; }
done
COORDIS_BIN=${COORDIS_BIN:-target/release/coordis-server}
[ "$COORDIS_BIN" != target/release/coordis-server ] || cargo build --release --quiet --bin coordis-server
OUT=$(mktemp -d)
cleanup() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$OUT"; }
trap cleanup EXIT

# RESP commands for one shape on stdout.
generate() { # shape
    python3 - "$1" "$N" <<'PY'
import sys
shape, n = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
owner = "f47ac10b-58cc-4372-a567-0e02b2c3d479"
if shape == "locks":
    for i in range(n):
        cmd("SET", f"lock:{i}", owner, "EX", 300)
elif shape in ("hash", "set", "list"):
    for start in range(0, n, 100):
        items = range(start, min(n, start + 100))
        if shape == "hash":
            args = [x for i in items for x in (f"field:{i}", f"value:{i}")]
            cmd("HSET", "big", *args)
        elif shape == "set":
            cmd("SADD", "big", *[f"member:{i}" for i in items])
        else:
            cmd("RPUSH", "big", *[f"element:{i}" for i in items])
elif shape == "lists":
    for i in range(n):
        cmd("RPUSH", f"queue:{i}", f"job:{i}", f"job:{i + 1}")
elif shape == "stream":
    # An events stream: N entries of three small fields, automatic IDs.
    for i in range(n):
        cmd("XADD", "events", "*", "job", i, "event", "completed", "worker", f"w-{i % 8}")
elif shape == "jobs":
    for i in range(n):
        cmd("HSET", f"job:{i}", "state", "queued", "attempts", 0, "queue", "default",
            "created", 1700000000000 + i, "worker", "w-1")
PY
}

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }

measure() { # shape command...
    local shape=$1; shift
    "$@" --port "$PORT" --save '' --appendonly no >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    local before after
    before=$(rss_kb "$pid")
    redis-cli -p "$PORT" --pipe <"$OUT/$shape.resp" >/dev/null
    sleep 1
    after=$(rss_kb "$pid")
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    echo $(((after - before) / 1024))
}

printf "%-28s %10s %10s %6s\n" "shape (N=$N)" "coordis MB" "Redis MB" "ratio"
for shape in $SHAPES; do
    generate "$shape" >"$OUT/$shape.resp"
    c=$(measure "$shape" "$COORDIS_BIN")
    r=$(measure "$shape" redis-server)
    case $shape in
        locks) label="SET lock:<i> <36 B> EX 300" ;;
        hash) label="one hash, N fields" ;;
        set) label="one set, N members" ;;
        list) label="one list, N elements" ;;
        lists) label="N lists of 2 elements" ;;
        jobs) label="N hashes of 5 fields" ;;
        stream) label="one stream, N 3-field XADDs" ;;
    esac
    printf "%-28s %10s %10s %6s\n" "$label" "$c" "$r" "$(awk -v c="$c" -v r="$r" 'BEGIN {printf "%.2f", c / r}')"
done
