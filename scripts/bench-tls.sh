#!/usr/bin/env bash
# Side-by-side redis-benchmark --tls of coordis-server and redis-server
# 7.0.15, both serving TLS only (`--port 0 --tls-port P`) with the same
# throw-away ECDSA P-256 certificates (made here with the openssl tool) and
# client certificates required (tls-auth-clients yes, Redis's default).
#
#   scripts/bench-tls.sh
#   ROUNDS=5 N=200000 FORMAT=markdown scripts/bench-tls.sh
#
# Rows:
#   SET, GET at -c 50 -P 16: throughput over established TLS connections.
#   PING, -k 0: every request on a new connection (a full TLS handshake,
#             no session resumption: redis-benchmark keeps no sessions), so
#             req/s is the handshake rate.
# Settings (environment):
#   ROUNDS    rounds per row (default 3): one coordis run then one Redis run.
#   N         requests per pipelined run (default 800000); the handshake row
#             sends HANDSHAKES (default 5000).
#   COORDIS_BIN  the coordis-server to measure (default
#             target/release/coordis-server, built when missing).
#   FORMAT    table (default) or markdown.
# Each row reports the median of each server's runs: req/s as
# redis-benchmark measured it, and the server's CPU per request (utime +
# stime of all its threads from /proc/PID/stat over the run, divided by the
# requests sent); ratio = coordis / Redis.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
N=${N:-800000}
HANDSHAKES=${HANDSHAKES:-5000}
FORMAT=${FORMAT:-table}
case "$FORMAT" in table | markdown) ;; *) echo "FORMAT must be table or markdown" >&2; exit 2 ;; esac

for tool in redis-benchmark redis-server redis-cli openssl; do
    command -v "$tool" >/dev/null || { echo "$tool not found" >&2; exit 1; }
done
COORDIS=${COORDIS_BIN:-target/release/coordis-server}
if [ -z "${COORDIS_BIN:-}" ] && [ ! -x "$COORDIS" ]; then
    cargo build --release --quiet --bin coordis-server
fi
[ -x "$COORDIS" ] || { echo "$COORDIS is not an executable" >&2; exit 1; }
COORDIS=$(realpath "$COORDIS")

TMP=$(mktemp -d)
cleanup() {
    local pid
    for pid in ${CPID:-} ${RPID:-}; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# A CA, a server certificate for 127.0.0.1 and a client certificate.
certs() {
    local d=$TMP/certs
    mkdir -p "$d"
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 2 -subj "/CN=bench CA" \
        -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
    for who in server client; do
        openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -subj "/CN=bench $who" \
            -keyout "$d/$who.key" -out "$d/$who.csr" 2>/dev/null
        printf 'subjectAltName=IP:127.0.0.1\n' >"$d/$who.ext"
        openssl x509 -req -in "$d/$who.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial -days 2 \
            -extfile "$d/$who.ext" -out "$d/$who.crt" 2>/dev/null
    done
}
certs
C=$TMP/certs
TLS_SERVER=(--tls-cert-file "$C/server.crt" --tls-key-file "$C/server.key" --tls-ca-cert-file "$C/ca.crt")
TLS_CLIENT=(--tls --cacert "$C/ca.crt" --cert "$C/client.crt" --key "$C/client.key")

free_port() {
    local p
    while :; do
        p=$((20000 + RANDOM % 10000))
        (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null || { echo "$p"; return; }
    done
}

# Starts a server serving TLS only; sets PORT and PID.
start() { # name binary
    local dir=$TMP/$1 bin=$2
    mkdir -p "$dir"
    for _ in 1 2 3 4 5; do
        PORT=$(free_port)
        (cd "$dir" && exec "$bin" --port 0 --tls-port "$PORT" "${TLS_SERVER[@]}" --save '' --appendonly no \
            --loglevel warning >>"$dir/log" 2>&1) &
        PID=$!
        for _ in $(seq 100); do
            if redis-cli -p "$PORT" "${TLS_CLIENT[@]}" info server 2>/dev/null | tr -d '\r' | grep -qx "process_id:$PID"; then
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

cpu_ticks() { sed 's/.*) //' "/proc/$1/stat" | awk '{print $12 + $13}'; }
TICK_US=$((1000000 / $(getconf CLK_TCK)))

# One run; prints "req/s server-µs/request".
run() { # port pid n benchmark-args...
    local port=$1 pid=$2 n=$3; shift 3
    local before after rps
    before=$(cpu_ticks "$pid")
    rps=$(redis-benchmark -p "$port" "${TLS_CLIENT[@]}" -n "$n" --csv "$@" 2>/dev/null | tail -n 1 | tr -d '"' | cut -d, -f2)
    after=$(cpu_ticks "$pid")
    echo "$rps $(awk -v t=$((after - before)) -v us="$TICK_US" -v n="$n" 'BEGIN {printf "%.2f", t * us / n}')"
}
median() { sort -g | awk '{a[NR]=$1} END {if (NR == 0) print "-"; else print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
quotient() { awk -v a="$1" -v b="$2" 'BEGIN {if (b == 0) print "-"; else printf "%.2f\n", a / b}'; }

commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
echo "coordis $commit vs Redis $(redis-server --version | cut -d' ' -f3 | tr -d 'v='), TLS; $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg); ROUNDS=$ROUNDS N=$N HANDSHAKES=$HANDSHAKES"
echo
if [ "$FORMAT" = markdown ]; then
    echo "| test | coordis req/s | Redis req/s | ratio | coordis µs CPU/req | Redis µs CPU/req | CPU ratio |"
    echo "|---|---|---|---|---|---|---|"
else
    printf "%-34s %10s %10s %6s %9s %9s %6s\n" test coordis/s redis/s ratio "c µs/req" "r µs/req" CPU
fi

row() { # label n benchmark-args...
    local label=$1 n=$2; shift 2
    local cs=() rs=() ccpu=() rcpu=() ratios=() cratios=()
    for _ in $(seq "$ROUNDS"); do
        local c r
        read -r -a c <<<"$(run "$CPORT" "$CPID" "$n" "$@")"
        read -r -a r <<<"$(run "$RPORT" "$RPID" "$n" "$@")"
        cs+=("${c[0]}"); rs+=("${r[0]}"); ccpu+=("${c[1]}"); rcpu+=("${r[1]}")
        ratios+=("$(quotient "${c[0]}" "${r[0]}")"); cratios+=("$(quotient "${c[1]}" "${r[1]}")")
    done
    local mc mr mcc mrc ratio cratio
    mc=$(printf '%s\n' "${cs[@]}" | median); mr=$(printf '%s\n' "${rs[@]}" | median)
    mcc=$(printf '%s\n' "${ccpu[@]}" | median); mrc=$(printf '%s\n' "${rcpu[@]}" | median)
    ratio=$(printf '%s\n' "${ratios[@]}" | median); cratio=$(printf '%s\n' "${cratios[@]}" | median)
    if [ "$FORMAT" = markdown ]; then
        echo "| $label | $mc | $mr | $ratio | $mcc | $mrc | $cratio |"
    else
        printf "%-34s %10s %10s %6s %9s %9s %6s\n" "$label" "$mc" "$mr" "$ratio" "$mcc" "$mrc" "$cratio"
    fi
}

row "SET -c 50 -P 16" "$N" -c 50 -P 16 -t set
row "GET -c 50 -P 16" "$N" -c 50 -P 16 -t get
row "PING -c 50 -k 0 (handshakes)" "$HANDSHAKES" -c 50 -k 0 -t ping_inline
