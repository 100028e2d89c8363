# Sourced by the package test scripts (python/run.sh, node/run.sh, the
# client matrix's run.sh): `start_redis` starts redis-server (from PATH) on
# a free loopback port with no persistence and sets
# COORDIS_REDIS_URL=redis://127.0.0.1:PORT/0; the server is stopped when the
# sourcing shell exits. It returns 4 when there is no redis-server on PATH
# (the caller decides whether that is a skip or a failure: see
# `redis_missing`).

REDIS_FOR_TESTS_PID=""
REDIS_FOR_TESTS_DIR=""

stop_redis() {
    if [ -n "$REDIS_FOR_TESTS_PID" ]; then
        kill "$REDIS_FOR_TESTS_PID" 2>/dev/null || true
        wait "$REDIS_FOR_TESTS_PID" 2>/dev/null || true
        REDIS_FOR_TESTS_PID=""
    fi
    if [ -n "$REDIS_FOR_TESTS_DIR" ]; then
        rm -rf "$REDIS_FOR_TESTS_DIR"
        REDIS_FOR_TESTS_DIR=""
    fi
}

start_redis() {
    command -v redis-server >/dev/null || return 4
    REDIS_FOR_TESTS_DIR="$(mktemp -d)"
    trap stop_redis EXIT
    # The kernel picks the port; the moment between closing it here and
    # Redis binding it is the only race, and a lost race fails loudly below.
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')"
    redis-server --port "$port" --bind 127.0.0.1 --save '' --appendonly no \
        --dir "$REDIS_FOR_TESTS_DIR" --logfile "$REDIS_FOR_TESTS_DIR/redis.log" &
    REDIS_FOR_TESTS_PID=$!
    local _
    for _ in $(seq 100); do
        [ "$(redis-cli -p "$port" ping 2>/dev/null)" = PONG ] && break
        sleep 0.1
    done
    if [ "$(redis-cli -p "$port" ping 2>/dev/null)" != PONG ]; then
        echo "redis-server did not start on port $port:" >&2
        cat "$REDIS_FOR_TESTS_DIR/redis.log" >&2 || true
        return 1
    fi
    export COORDIS_REDIS_URL="redis://127.0.0.1:$port/0"
}

# What a missing redis-server means: a failure under COORDIS_REQUIRE_REDIS=1
# (CI), else a loud skip. Returns 1 for the failure.
redis_missing() {
    if [ "${COORDIS_REQUIRE_REDIS:-}" = 1 ]; then
        echo "COORDIS_REQUIRE_REDIS=1 but redis-server is not on PATH" >&2
        return 1
    fi
    echo "*** SKIPPED: redis-server is not on PATH; the real-Redis run did not happen ***" >&2
}
