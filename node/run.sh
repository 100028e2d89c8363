#!/usr/bin/env bash
# Builds the npm packages the way they would be published — `coordis` (the
# helper) and `@coordis/<platform>-<arch>` (the coordis-server binary, an
# optionalDependency the helper resolves at run time) — as `npm pack`
# tarballs in target/packages/npm, installs them with test/package-lock.json's
# pinned clients into a fresh target/packages/node-test, and runs
# test/coordis.test.mjs and test/tls.test.mjs there with node:test: once on
# coordis, once on a redis-server started for the run (COORDIS_REDIS_URL;
# the TLS tests start TLS redis-servers of their own). The binary is
# $COORDIS_PACKAGE_BINARY if set (python/run.sh's wheel build made it),
# else a release build. Exit code 3: the packages could not be installed
# (the caller decides whether that is a skip or a failure).
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OUT="$ROOT/target/packages"
STAGE="$OUT/npm"
TESTDIR="$OUT/node-test"
command -v node >/dev/null && command -v npm >/dev/null || exit 3
# The first run is on coordis whatever the caller's environment says.
unset COORDIS_REDIS_URL

PLATFORM="$(node -p 'process.platform + "-" + process.arch')"
if [ ! -d "$HERE/platforms/$PLATFORM" ]; then
    echo "no platform package for $PLATFORM (node/platforms/ has $(ls "$HERE/platforms"))" >&2
    exit 1
fi
BINARY="${COORDIS_PACKAGE_BINARY:-}"
if [ -z "$BINARY" ]; then
    echo "== release build of coordis-server"
    cargo build --release --quiet -p coordis --bin coordis-server --manifest-path "$ROOT/Cargo.toml"
    BINARY="$ROOT/target/release/coordis-server"
fi

echo "== npm pack: coordis and @coordis/$PLATFORM"
rm -rf "$STAGE"
mkdir -p "$STAGE/tarballs"
cp -r "$HERE/coordis" "$STAGE/coordis"
cp -r "$HERE/platforms/$PLATFORM" "$STAGE/platform"
mkdir -p "$STAGE/platform/bin"
cp "$BINARY" "$STAGE/platform/bin/coordis-server"
strip "$STAGE/platform/bin/coordis-server" 2>/dev/null || true
for pkg in coordis platform; do
    (cd "$STAGE/$pkg" && npm pack --silent --pack-destination "$STAGE/tarballs" >/dev/null)
done
ls -l "$STAGE/tarballs"

echo "== installing the tarballs into a fresh directory"
rm -rf "$TESTDIR"
mkdir -p "$TESTDIR"
cp "$HERE/test/package.json" "$HERE/test/package-lock.json" "$HERE/test/coordis.test.mjs" "$HERE/test/tls.test.mjs" "$TESTDIR/"
(cd "$TESTDIR" && npm ci --silent --no-audit --no-fund) || exit 3
# Both tarballs in one install: the platform package satisfies the helper's
# optionalDependency, so nothing is looked up in a registry.
(cd "$TESTDIR" && npm install --silent --no-save --no-audit --no-fund --offline "$STAGE"/tarballs/*.tgz)

run_tests() {
    (cd "$TESTDIR" && env -u COORDIS_SERVER_BIN COORDIS_PACKAGE_TEST=1 \
        node --test --test-timeout=60000 --test-concurrency=1 coordis.test.mjs tls.test.mjs)
}

echo "== node tests on coordis"
COORDIS_EXPECT_BACKEND=coordis run_tests

echo "== node tests on redis-server (COORDIS_REDIS_URL)"
# shellcheck source=../scripts/redis-for-tests.sh
source "$ROOT/scripts/redis-for-tests.sh"
status=0
start_redis || status=$?
if [ "$status" = 4 ]; then
    redis_missing
    exit
fi
[ "$status" = 0 ] || exit "$status"
COORDIS_EXPECT_BACKEND=redis run_tests
