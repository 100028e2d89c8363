#!/usr/bin/env bash
# Memory of a GEO index of N members in coordis-server against
# redis-server 7.0.15: N GEOADDs (100 members a command, members
# `driver:<i>`, positions spread over the whole valid range from a fixed
# seed) loaded with redis-cli --pipe into a fresh server of each.
#
#   scripts/memory-geo.sh          # N=1000000
#   N=100000 scripts/memory-geo.sh
#
# Prints each server's used_memory (INFO memory: what the server says it
# holds) and RSS (VmRSS), each after loading minus when started empty, in
# MB, and the coordis/Redis ratios.
set -euo pipefail
cd "$(dirname "$0")/.."

N=${N:-1000000}
PORT=${PORT:-7395}
for tool in redis-server redis-cli python3; do
    command -v "$tool" >/dev/null || { echo "$tool not found"; exit 1; }
done
cargo build --release --quiet --bin coordis-server
OUT=$(mktemp -d)
cleanup() { redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true; rm -rf "$OUT"; }
trap cleanup EXIT

python3 - "$N" >"$OUT/geo.resp" <<'PY'
import random, sys
n = int(sys.argv[1])
rng = random.Random(7)
out = sys.stdout.buffer
for start in range(0, n, 100):
    args = [b"GEOADD", b"drivers"]
    for i in range(start, min(n, start + 100)):
        lon = rng.uniform(-180, 180)
        lat = rng.uniform(-85.05112878, 85.05112878)
        args += [b"%.6f" % lon, b"%.6f" % lat, b"driver:%d" % i]
    out.write(b"*%d\r\n" % len(args) + b"".join(b"$%d\r\n%s\r\n" % (len(a), a) for a in args))
PY

rss_kb() { awk '/VmRSS/ {print $2}' "/proc/$1/status"; }
used_bytes() { redis-cli -p "$PORT" info memory | tr -d '\r' | awk -F: '$1 == "used_memory" {print $2}'; }

measure() { # command...: prints "used-MB rss-MB"
    "$@" --port "$PORT" --save '' --appendonly no >/dev/null 2>&1 &
    local pid=$!
    for _ in $(seq 100); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.1; done
    local rss0 used0 rss1 used1 card
    rss0=$(rss_kb "$pid"); used0=$(used_bytes)
    redis-cli -p "$PORT" --pipe <"$OUT/geo.resp" >/dev/null
    sleep 1
    rss1=$(rss_kb "$pid"); used1=$(used_bytes)
    card=$(redis-cli -p "$PORT" zcard drivers)
    [ "$card" = "$N" ] || { echo "loaded $card members, not $N" >&2; exit 1; }
    redis-cli -p "$PORT" shutdown nosave >/dev/null 2>&1 || true
    wait "$pid" 2>/dev/null || true
    echo "$(((used1 - used0) / 1048576)) $(((rss1 - rss0) / 1024))"
}

read -r cu cr <<<"$(measure target/release/coordis-server)"
read -r ru rr <<<"$(measure redis-server)"
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
printf "%-30s %12s %12s %6s\n" "GEO index, N=$N" "coordis MB" "Redis MB" "ratio"
printf "%-30s %12s %12s %6s\n" "used_memory" "$cu" "$ru" "$(ratio "$cu" "$ru")"
printf "%-30s %12s %12s %6s\n" "RSS" "$cr" "$rr" "$(ratio "$cr" "$rr")"
