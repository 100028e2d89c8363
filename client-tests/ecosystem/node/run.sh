#!/usr/bin/env bash
# Runs the Node client-library matrix (ioredis, bullmq; cluster.test.mjs: on a cluster;
# sentinel.test.mjs: through a Sentinel failover) with node's own
# test runner on the coordis npm package's helper (node/coordis, linked from
# the source tree; the server is $COORDIS_SERVER_BIN): once on
# coordis-server, once with COORDIS_REDIS_URL set to a redis-server started
# for the run. Packages are installed with `npm ci` from package-lock.json
# into target/ecosystem/node (again when the lock file changes).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/../../.." && pwd)"
PREFIX="$ROOT/target/ecosystem/node"
# Exit code 3: the packages could not be installed (the caller decides
# whether that is a skip or a failure).
command -v node >/dev/null && command -v npm >/dev/null || exit 3
mkdir -p "$PREFIX"
if ! cmp -s "$HERE/package-lock.json" "$PREFIX/package-lock.json"; then
    cp "$HERE/package.json" "$HERE/package-lock.json" "$PREFIX/"
    (cd "$PREFIX" && npm ci --silent --no-audit --no-fund) || exit 3
fi
cp "$HERE"/*.mjs "$PREFIX/"
ln -sfn "$ROOT/node/coordis" "$PREFIX/node_modules/coordis"
cd "$PREFIX"
run_tests() {
    node --test --test-timeout=120000 --test-concurrency=1 clients.test.mjs cluster.test.mjs sentinel.test.mjs
}
unset COORDIS_REDIS_URL
echo "== on coordis-server"
run_tests

echo "== on redis-server (COORDIS_REDIS_URL)"
# shellcheck source=../../../scripts/redis-for-tests.sh
source "$ROOT/scripts/redis-for-tests.sh"
status=0
start_redis || status=$?
if [ "$status" = 4 ]; then
    redis_missing
    exit
fi
[ "$status" = 0 ] || exit "$status"
run_tests
