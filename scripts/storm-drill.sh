#!/usr/bin/env bash
# storm-drill.sh — a 100k-token broadcast through a 10 s FCM 429 storm,
# with the project's own binaries on loopback. Reports attempts per token
# and the extra requests retries caused, from the emulator's own counts.
#
#   N=100000 STORM_AFTER=30000 STORM_FOR=10s scripts/storm-drill.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N="${N:-100000}"
STORM_AFTER="${STORM_AFTER:-30000}"
STORM_FOR="${STORM_FOR:-10s}"
DB="${DRILL_DB:-pushfan_storm_drill}"
EMU=127.0.0.1:19199
API=127.0.0.1:18180
TOKEN=storm-drill-token-0123456789
DIR="$(mktemp -d)"
pids=()
cleanup() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	wait 2>/dev/null || true
	mariadb -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS $DB" 2>/dev/null || true
	rm -rf "$DIR"
}
trap cleanup EXIT

bash scripts/ensure-mysql.sh
go build -o bin/pushfan ./cmd/pushfan
export PUSHFAN_MYSQL_DSN="root@tcp(127.0.0.1:3306)/$DB?parseTime=true"
export PUSHFAN_FCM_ENDPOINT="http://$EMU/v1" PUSHFAN_FCM_PROJECT_ID=drill
export PUSHFAN_ADMIN_TOKENS="$TOKEN" PUSHFAN_HTTP_ADDR="$API" PUSHFAN_LOG_LEVEL=warn
mariadb -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS $DB"
bin/pushfan seed --users "$N" --tokens-per-user 1 --disabled-every 0 --invalidated-every 0 --dead-every 0 2>/dev/null
bin/pushfan emulator --addr "$EMU" --latency 30ms --jitter 10ms --storm-after "$STORM_AFTER" --storm-for "$STORM_FOR" >"$DIR/emu.out" 2>"$DIR/emu.log" &
pids+=($!)
bin/pushfan serve 2>"$DIR/serve.log" &
pids+=($!)
for _ in $(seq 100); do curl -sf "http://$API/readyz" >/dev/null && break; sleep 0.2; done

start=$(date +%s.%N)
id=$(curl -sS -X POST "http://$API/push/broadcast?wait=0" -H "Authorization: Bearer $TOKEN" \
	-d '{"title":"storm drill","audience":{"all":true}}' | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
while :; do
	b=$(curl -sS "http://$API/push/broadcasts/$id" -H "Authorization: Bearer $TOKEN")
	st=$(printf '%s' "$b" | python3 -c 'import json,sys; print(json.load(sys.stdin)["status"])')
	[ "$st" = running ] || [ "$st" = queued ] || break
	sleep 0.5
done
end=$(date +%s.%N)
echo "broadcast: $b"
curl -sS "http://$EMU/emulator/stats" >"$DIR/stats.json"
curl -sS "http://$EMU/emulator/counts" >"$DIR/counts.json"
python3 - "$DIR/stats.json" "$DIR/counts.json" "$start" "$end" "$N" <<'PY'
import json, sys, collections
stats = json.load(open(sys.argv[1])); counts = json.load(open(sys.argv[2]))["tokens"]
n = int(sys.argv[5]); wall = float(sys.argv[4]) - float(sys.argv[3])
hist = collections.Counter(c["attempts"] for c in counts.values())
missing = n - sum(1 for c in counts.values() if c["accepted"] >= 1)
dups = sum(c["accepted"] - 1 for c in counts.values() if c["accepted"] > 1)
print(f"wall {wall:.1f}s for {n} tokens ({n/wall:.0f} tokens/s)")
print(f"emulator requests {stats['requests']}, accepted {stats['accepted']}, by code {stats['by_code']}")
print(f"extra requests caused by retries: {stats['requests'] - n} ({(stats['requests'] - n) / n:.2%} of the audience)")
print("attempts per token:", dict(sorted(hist.items())))
print(f"missing {missing}, delivered twice or more {dups}, requests inside an announced Retry-After window {stats['requests_during_backoff']}")
PY
