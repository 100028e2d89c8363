#!/usr/bin/env bash
# Runs the Python client-library matrix (redis-py, its RedisCluster, rq, python-redis-lock)
# on the coordis pytest plugin (python/coordis, from the source tree; the
# server is $COORDIS_SERVER_BIN): once on coordis-server, once with
# --redis-url on a redis-server started for the run. The virtualenv lives in
# target/ecosystem/python-venv and is (re)installed from requirements.txt,
# which pins every package, when that file changes.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
VENV="$ROOT/target/ecosystem/python-venv"
# Exit code 3: no virtualenv could be made (the caller decides whether that
# is a skip or a failure).
command -v python3 >/dev/null || exit 3
if [ ! -x "$VENV/bin/python" ]; then
    python3 -m venv "$VENV" || exit 3
fi
if ! cmp -s "$HERE/requirements.txt" "$VENV/installed-requirements.txt"; then
    "$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements.txt" || exit 3
    cp "$HERE/requirements.txt" "$VENV/installed-requirements.txt"
fi
cd "$HERE"
run_tests() {
    PYTHONPATH="$ROOT/python" "$VENV/bin/python" -m pytest -q -rxXs -p no:cacheprovider -p coordis.pytest_plugin \
        --timeout 60 "$@"
}
unset COORDIS_REDIS_URL
echo "== on coordis-server"
run_tests "$@"

echo "== on redis-server (--redis-url)"
# shellcheck source=../../../scripts/redis-for-tests.sh
source "$ROOT/scripts/redis-for-tests.sh"
status=0
start_redis || status=$?
if [ "$status" = 4 ]; then
    redis_missing
    exit
fi
[ "$status" = 0 ] || exit "$status"
run_tests --redis-url "$COORDIS_REDIS_URL" "$@"
