#!/usr/bin/env bash
# Builds the coordis wheel (maturin, release build of coordis-server, from
# requirements-build.txt's pinned maturin), installs it with
# requirements-test.txt into a fresh virtualenv under target/packages/, and
# runs python/tests there with no cargo or rustc on PATH: once on coordis,
# once with --redis-url on a redis-server started for the run. Exit code 3:
# the build or test packages could not be installed (the caller decides
# whether that is a skip or a failure). Arguments go to pytest.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
OUT="$ROOT/target/packages"
BUILD_VENV="$OUT/build-venv"
VENV="$OUT/python-venv"
WHEELS="$OUT/wheels"
command -v python3 >/dev/null || exit 3
mkdir -p "$OUT"

if [ ! -x "$BUILD_VENV/bin/python" ]; then
    python3 -m venv "$BUILD_VENV" || exit 3
fi
if ! cmp -s "$HERE/requirements-build.txt" "$BUILD_VENV/installed-requirements.txt"; then
    "$BUILD_VENV/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements-build.txt" || exit 3
    cp "$HERE/requirements-build.txt" "$BUILD_VENV/installed-requirements.txt"
fi

echo "== building the wheel"
rm -rf "$WHEELS"
started=$SECONDS
(cd "$HERE" && "$BUILD_VENV/bin/maturin" build --release --quiet --out "$WHEELS")
echo "wheel built in $((SECONDS - started)) s: $(ls "$WHEELS")"

echo "== installing it into a fresh virtualenv"
rm -rf "$VENV"
python3 -m venv "$VENV" || exit 3
"$VENV/bin/pip" install --quiet --disable-pip-version-check -r "$HERE/requirements-test.txt" || exit 3
"$VENV/bin/pip" install --quiet --disable-pip-version-check --no-deps "$WHEELS"/coordis-*.whl

# The test run's PATH: the venv, then every PATH entry that holds no Rust
# toolchain (the wheel must need none).
TEST_PATH="$VENV/bin"
IFS=: read -ra entries <<<"$PATH"
for dir in "${entries[@]}"; do
    if [ -n "$dir" ] && [ ! -e "$dir/cargo" ] && [ ! -e "$dir/rustc" ]; then
        TEST_PATH="$TEST_PATH:$dir"
    fi
done
run_tests() {
    (cd "$HERE" && env -u COORDIS_SERVER_BIN -u COORDIS_REDIS_URL PATH="$TEST_PATH" COORDIS_PACKAGE_TEST=1 \
        "$VENV/bin/python" -m pytest -q -rxXs -p no:cacheprovider "$@")
}

echo "== python/tests on coordis"
COORDIS_EXPECT_BACKEND=coordis run_tests "$@"

echo "== python/tests on redis-server (--redis-url)"
# shellcheck source=../scripts/redis-for-tests.sh
source "$ROOT/scripts/redis-for-tests.sh"
status=0
start_redis || status=$?
if [ "$status" = 4 ]; then
    redis_missing
    exit
fi
[ "$status" = 0 ] || exit "$status"
COORDIS_EXPECT_BACKEND=redis run_tests --redis-url "$COORDIS_REDIS_URL" "$@"
