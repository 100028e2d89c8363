#!/usr/bin/env bash
# Runs the Python client-library matrix (redis-py, rq, python-redis-lock)
# against coordis-server and redis-server. The virtualenv lives in
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
exec "$VENV/bin/python" -m pytest -q -rxXs -p no:cacheprovider --timeout 60 "$@"
