#!/usr/bin/env bash
# How close maxmemory holds, per value type: a fresh coordis-server and a
# fresh redis-server 7.0.15 each get `--maxmemory $LIMIT_MB mb
# --maxmemory-policy allkeys-lru`, are filled with twice that much data of
# one type (redis-cli --pipe), and report used_memory and RSS after the
# fill (MB), and the keys evicted.
#
#   scripts/memory-limit.sh
#   LIMIT_MB=64 TYPES="string stream" scripts/memory-limit.sh
set -euo pipefail
cd "$(dirname "$0")/.."

LIMIT_MB=${LIMIT_MB:-32}
TYPES=${TYPES:-string hash list set zset stream}
PORT=${PORT:-7395}
COORDIS_BIN=${COORDIS_BIN:-target/release/coordis-server}
for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "$tool not found"; exit 1; }
done
[ -x "$COORDIS_BIN" ] || cargo build --release --quiet --bin coordis-server
OUT=$(mktemp -d)
cleanup() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$OUT"; }
trap cleanup EXIT

# RESP commands writing about 2 x LIMIT_MB of one type, in keys of ~10 KB.
generate() { # type
    python3 - "$1" "$LIMIT_MB" <<'PY'
import sys
kind, limit_mb = sys.argv[1], int(sys.argv[2])
out = sys.stdout.buffer
def cmd(*args):
    out.write(b"*%d\r\n" % len(args))
    for a in args:
        a = a if isinstance(a, bytes) else str(a).encode()
        out.write(b"$%d\r\n%s\r\n" % (len(a), a))
total = 2 * limit_mb * 1024 * 1024
key_bytes = 10 * 1024
for k in range(total // key_bytes):
    if kind == "string":
        cmd("SET", f"s:{k}", "x" * key_bytes)
    else:
        n = key_bytes // 100
        if kind == "hash":
            cmd("HSET", f"h:{k}", *[x for i in range(n) for x in (f"field:{i}", "v" * 90)])
        elif kind == "list":
            cmd("RPUSH", f"l:{k}", *["e" * 100 for _ in range(n)])
        elif kind == "set":
            cmd("SADD", f"t:{k}", *[f"{i:04d}" + "m" * 96 for i in range(n)])
        elif kind == "zset":
            cmd("ZADD", f"z:{k}", *[x for i in range(n) for x in (i, f"{i:04d}" + "m" * 96)])
        elif kind == "stream":
            # Entries of five 90-byte fields, automatic IDs: 20 per key.
            for _ in range(n // 5):
                cmd("XADD", f"x:{k}", "*", *[x for i in range(5) for x in (f"f{i}", "v" * 90)])
PY
}

field() { redis-cli -p "$PORT" info "$1" | tr -d '\r' | awk -F: -v f="$2" '$1 == f {print $2}'; }

measure() { # type command...
    local kind=$1; shift
    "$@" --port "$PORT" --save '' --appendonly no --maxmemory "${LIMIT_MB}mb" --maxmemory-policy allkeys-lru >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    redis-cli -p "$PORT" --pipe <"$OUT/$kind.resp" >/dev/null
    sleep 1
    local used rss evicted
    used=$(field memory used_memory)
    rss=$(awk '/VmRSS/ {print $2}' "/proc/$pid/status")
    evicted=$(field stats evicted_keys)
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    printf "%6.1f %6.1f %8s" "$(awk -v u="$used" 'BEGIN {print u / 1048576}')" "$(awk -v r="$rss" 'BEGIN {print r / 1024}')" "$evicted"
}

printf "%-8s | %-22s | %-22s\n" "limit ${LIMIT_MB}MB" "coordis used  RSS  evicted" "Redis used  RSS  evicted"
for kind in $TYPES; do
    generate "$kind" >"$OUT/$kind.resp"
    c=$(measure "$kind" "$COORDIS_BIN")
    r=$(measure "$kind" redis-server)
    printf "%-8s | %s | %s\n" "$kind" "$c" "$r"
done
