#!/usr/bin/env bash
# Runs the conformance suite against two running servers and prints every
# reply that differs. The scenarios FLUSHALL both servers: use test servers.
#
#   scripts/conformance.sh REFERENCE_HOST:PORT CANDIDATE_HOST:PORT
#   scripts/conformance.sh 127.0.0.1:6379 127.0.0.1:7000
#
# Without arguments it compares a redis-server it starts with an embedded coordis.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ $# -eq 2 ]; then
    export COORDIS_CONFORMANCE_REF=$1 COORDIS_CONFORMANCE_CANDIDATE=$2
elif [ $# -ne 0 ]; then
    echo "usage: $0 [REFERENCE_HOST:PORT CANDIDATE_HOST:PORT]" >&2
    exit 2
fi
cargo test --quiet -p coordis-client-tests --test conformance -- --nocapture 2>&1 \
    | grep -v '^running \|^test result\|^$\|^test conformance'
