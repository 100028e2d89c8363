#!/usr/bin/env bash
# Leader election, for a person to watch: starts coordis-server and two
# coordis-pod processes, shows who leads, kills the leader with SIGKILL and
# prints how long the other took to take over.
#
#   scripts/leader-demo.sh            # ttl 1000 ms, heartbeat 200 ms
#   TTL_MS=3000 INTERVAL_MS=500 scripts/leader-demo.sh
set -euo pipefail
cd "$(dirname "$0")/.."
TTL_MS=${TTL_MS:-1000}
INTERVAL_MS=${INTERVAL_MS:-200}
PORT=${PORT:-7399}
cargo build --quiet --release --bin coordis-server -p coordis --bin coordis-pod -p coordis-client-tests
SERVER=target/release/coordis-server
POD=target/release/coordis-pod
PIDS=()
cleanup() { kill "${PIDS[@]}" 2>/dev/null || true; wait 2>/dev/null || true; rm -rf "${TMP:-}"; }
trap cleanup EXIT

"$SERVER" --port "$PORT" --save '' --loglevel warning >/dev/null &
PIDS+=($!)
sleep 0.3
declare -A PODPORT PODPID
TMP=$(mktemp -d)
for pod in pod-a pod-b; do
    "$POD" --url "redis://127.0.0.1:$PORT" --pod "$pod" --ttl-ms "$TTL_MS" --interval-ms "$INTERVAL_MS" > "$TMP/$pod" &
    PODPID[$pod]=$!; PIDS+=($!)
    until grep -q '^port ' "$TMP/$pod" 2>/dev/null; do sleep 0.05; done
    PODPORT[$pod]=$(awk '/^port /{print $2; exit}' "$TMP/$pod")
done
role() { exec 3<>"/dev/tcp/127.0.0.1/${PODPORT[$1]}"; read -r r <&3; exec 3<&-; echo "$r"; }
sleep 1
for pod in pod-a pod-b; do echo "$pod says: $(role "$pod")"; done
echo "leader:svc = $(redis-cli -p "$PORT" get leader:svc 2>/dev/null || echo '(redis-cli not installed)')"
leader=$(for pod in pod-a pod-b; do if role "$pod" | grep -q '^leader'; then echo "$pod"; fi; done)
other=$([ "$leader" = pod-a ] && echo pod-b || echo pod-a)
echo "kill -9 $leader"
start=$(date +%s%N)
kill -9 "${PODPID[$leader]}"
until role "$other" | grep -q '^leader'; do sleep 0.01; done
end=$(date +%s%N)
echo "$other took over after $(( (end - start) / 1000000 )) ms (ttl $TTL_MS ms + heartbeat $INTERVAL_MS ms)"
