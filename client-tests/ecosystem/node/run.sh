#!/usr/bin/env bash
# Runs the Node client-library matrix (ioredis, bullmq) against
# coordis-server and redis-server with node's own test runner. Packages are
# installed with `npm ci` from package-lock.json into
# target/ecosystem/node (again when the lock file changes).
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
cp "$HERE/clients.test.mjs" "$PREFIX/"
cd "$PREFIX"
exec node --test --test-timeout=60000 --test-concurrency=1 clients.test.mjs
