#!/usr/bin/env bash
# load.sh — does the read API hold up while a 100k-token broadcast runs, and
# does the broadcast slow down under that API load?
#
# Loopback only, bounded. Starts its own MariaDB database, seeds N tokens,
# runs the FCM emulator (30 ms latency, 5 ms jitter) and one `pushfan serve`,
# then cmd/pushfan-load:
#   run A: one broadcast to all N tokens with no API load (throughput);
#   control: the same API hammering for 10 s with no broadcast running, so
#          run B's latencies can be told apart from the API's own;
#   run B: the same broadcast again (emulator reset first) while WORKERS
#          goroutines hammer GET /push/broadcasts/{id} and GET /push/stats
#          until it finishes (at most MAX_REQUESTS requests and MAX_TIME);
#   run C: (BRACKET=1, the default) once more with no load, so the drop is
#          B against the mean of A and C and machine drift does not pass for
#          the load's effect.
# Prints a table (p50/p90/p99/max per route, req/s, errors, tokens/s with and
# without load, the drop) and writes bench-results/load-<timestamp>.json.
# Processes and the database are removed on exit.
#
#   scripts/load.sh
#   N=20000 WORKERS=64 MAX_TIME=2m scripts/load.sh
set -euo pipefail
cd "$(dirname "$0")/.."

N="${N:-100000}"
WORKERS="${WORKERS:-32}"
MAX_REQUESTS="${MAX_REQUESTS:-2000000}"
MAX_TIME="${MAX_TIME:-5m}"
LATENCY="${LATENCY:-30ms}"
JITTER="${JITTER:-5ms}"
DB="${LOAD_DB:-pushfan_load_$$}"
OUT_DIR="${OUT_DIR:-bench-results}"
BRACKET="${BRACKET:-1}"

if ! command -v go >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="$PATH:/usr/local/go/bin"
fi

# Two free loopback ports, unless given.
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
EMU="127.0.0.1:${EMU_PORT:-$(free_port)}"
API="127.0.0.1:${API_PORT:-$(free_port)}"
TOKEN="loadtest:sender:load-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
DIR="$(mktemp -d)"
pids=()

cleanup() {
	local rc=$?
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	mariadb -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS \`$DB\`" 2>/dev/null || true
	if [ "$rc" -ne 0 ] && [ -s "$DIR/serve.log" ]; then
		echo "load.sh: failed; last lines of the server log:" >&2
		tail -n 20 "$DIR/serve.log" >&2
	fi
	rm -rf "$DIR"
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bash scripts/ensure-mysql.sh
go build -o bin/pushfan ./cmd/pushfan
go build -o bin/pushfan-load ./cmd/pushfan-load

export PUSHFAN_MYSQL_DSN="root@tcp(127.0.0.1:3306)/$DB?parseTime=true"
export PUSHFAN_FCM_ENDPOINT="http://$EMU/v1" PUSHFAN_FCM_PROJECT_ID=load
export PUSHFAN_ADMIN_TOKENS="$TOKEN" PUSHFAN_HTTP_ADDR="$API" PUSHFAN_LOG_LEVEL=warn
mariadb -uroot -h127.0.0.1 -e "DROP DATABASE IF EXISTS \`$DB\`"

echo "--- seeding $N users with one token each into $DB"
bin/pushfan seed --users "$N" --tokens-per-user 1 --disabled-every 0 --invalidated-every 0 --dead-every 0 2>"$DIR/seed.log"

echo "--- starting the emulator on $EMU (latency $LATENCY, jitter $JITTER) and pushfan serve on $API"
bin/pushfan emulator --addr "$EMU" --latency "$LATENCY" --jitter "$JITTER" >"$DIR/emu.out" 2>"$DIR/emu.log" &
pids+=($!)
bin/pushfan serve 2>"$DIR/serve.log" &
pids+=($!)
ready=0
for _ in $(seq 150); do
	if curl -sf "http://$API/readyz" >/dev/null && curl -sf "http://$EMU/emulator/stats" >/dev/null; then
		ready=1
		break
	fi
	sleep 0.2
done
[ "$ready" -eq 1 ] || { echo "load.sh: the server or the emulator did not come up" >&2; exit 1; }

mkdir -p "$OUT_DIR"
out="$OUT_DIR/load-$(date -u +%Y%m%dT%H%M%SZ).json"
echo "--- load test"
# The driver bounds itself (caps and per-broadcast deadlines); timeout is the
# backstop.
PUSHFAN_LOAD_TOKEN="${TOKEN##*:}" timeout 30m bin/pushfan-load \
	-api "http://$API" -emulator "http://$EMU" -workers "$WORKERS" \
	-max-requests "$MAX_REQUESTS" -max-time "$MAX_TIME" -expect "$N" -out "$out" \
	-bracket="$([ "$BRACKET" = 1 ] && echo true || echo false)"
