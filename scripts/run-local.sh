#!/usr/bin/env bash
# run-local.sh — the local demo behind `make run`: MariaDB, migrations, demo
# data, the FCM emulator and `pushfan serve`, all on loopback.
#
#   scripts/run-local.sh          start everything; stay in the foreground until Ctrl-C
#   scripts/run-local.sh stop     stop what a previous run started (what `make stop` runs)
#
# Environment (all optional):
#   PUSHFAN_DETACH=1         return once everything is up instead of staying in the foreground
#   PUSHFAN_DEMO_FRESH=1     drop the demo database first (on this machine only) and seed it anew:
#                            what `make demo-reset` runs, so the README's tour starts over
#   PUSHFAN_MYSQL_DSN        default root@tcp(127.0.0.1:3306)/pushfan?parseTime=true
#   PUSHFAN_HTTP_ADDR        default 127.0.0.1:8080
#   PUSHFAN_ADMIN_TOKENS     default: a dev token generated once into .run/admin-token
#   PUSHFAN_EMULATOR_ADDR    where the FCM emulator listens, default 127.0.0.1:9099
#   PUSHFAN_SEED_USERS       demo users to seed, default 1000
#   PUSHFAN_RUN_DIR          pid files, logs and the dev token, default .run
#   GO                       go command used to build bin/pushfan, default go
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

RUN_DIR="${PUSHFAN_RUN_DIR:-.run}"
BIN="bin/pushfan"
READY_TIMEOUT=60

say() { printf '==> %s\n' "$*"; }
warn() { printf 'run-local: %s\n' "$*" >&2; }
die() {
	warn "ERROR: $*"
	exit 1
}

# ---------------------------------------------------------------------------
# processes and pid files

# ours PID: PID is alive (not a zombie) and is a pushfan process; guards
# against a stale pid file whose PID was reused.
ours() {
	local pid="$1" cmd
	[[ "$pid" =~ ^[0-9]+$ ]] && kill -0 "$pid" 2>/dev/null || return 1
	if [ -d /proc/self ]; then
		cmd="$(tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null || true)" # empty for a zombie
	else
		[[ "$(ps -o stat= -p "$pid" 2>/dev/null)" != Z* ]] || return 1
		cmd="$(ps -o args= -p "$pid" 2>/dev/null || true)"
	fi
	[[ "$cmd" == *pushfan* ]]
}

pid_of() { cat "$RUN_DIR/$1.pid" 2>/dev/null || true; }

# stop_pid NAME PID: SIGTERM, wait for a graceful exit (serve drains for up to
# 30 s), then SIGKILL.
stop_pid() {
	local name="$1" pid="$2" i
	ours "$pid" || return 0
	kill -TERM "$pid" 2>/dev/null || return 0
	for ((i = 0; i < 350; i++)); do
		ours "$pid" || {
			echo "stopped $name (pid $pid)"
			return 0
		}
		sleep 0.1
	done
	warn "$name (pid $pid) did not exit within 35s; killing it"
	kill -KILL "$pid" 2>/dev/null || true
}

# stop_all: stop serve first (it may be mid-broadcast), then the emulator.
stop_all() {
	local name pid found=0
	for name in serve emulator; do
		pid="$(pid_of "$name")"
		if ours "$pid"; then
			found=1
			stop_pid "$name" "$pid"
		fi
		rm -f "$RUN_DIR/$name.pid"
	done
	return $((1 - found))
}

if [ "${1:-}" = "stop" ]; then
	stop_all || echo "nothing to stop (no live pids in $RUN_DIR/)"
	exit 0
elif [ $# -gt 0 ]; then
	die "usage: $0 [stop]"
fi

# ---------------------------------------------------------------------------
# helpers

# http_ok URL: the URL answers 2xx.
http_ok() {
	curl -fsS -o /dev/null --max-time 2 "$1" 2>/dev/null
}

# loopback HOST:PORT -> a host:port a client can dial (":8080" -> "127.0.0.1:8080").
dialable() {
	local addr="$1" host port
	host="${addr%:*}"
	port="${addr##*:}"
	case "$host" in "" | 0.0.0.0 | "[::]" | "::") host=127.0.0.1 ;; esac
	echo "$host:$port"
}

# port_busy HOST:PORT: something already accepts connections there.
port_busy() {
	local hp host port
	hp="$(dialable "$1")"
	host="${hp%:*}"
	port="${hp##*:}"
	host="${host#[}"
	host="${host%]}"
	(exec 3<>"/dev/tcp/$host/$port") 2>/dev/null
}

who_listens() {
	local port="${1##*:}"
	if command -v ss >/dev/null 2>&1; then
		ss -Hltnp "sport = :$port" 2>/dev/null | sed 's/^/    /' || true
	fi
}

# wait_for NAME URL PID LOG: poll URL until it answers 2xx, the process dies or
# READY_TIMEOUT passes; on failure show the log tail and fail.
wait_for() {
	local name="$1" url="$2" pid="$3" log="$4" i
	for ((i = 0; i < READY_TIMEOUT * 5; i++)); do
		if http_ok "$url"; then
			return 0
		fi
		if ! kill -0 "$pid" 2>/dev/null; then
			warn "$name exited before it was ready; last lines of $log:"
			tail -n 30 "$log" >&2 || true
			stop_all >/dev/null || true
			exit 1
		fi
		sleep 0.2
	done
	warn "$name did not answer $url within ${READY_TIMEOUT}s; last lines of $log:"
	tail -n 30 "$log" >&2 || true
	stop_all >/dev/null || true
	exit 1
}

# start NAME LOG CMD...: run CMD in the background in its own session (so that
# only this script decides when it stops), log to LOG, record its pid.
start() {
	local name="$1" log="$2"
	shift 2
	: >"$log"
	if command -v setsid >/dev/null 2>&1; then
		setsid "$@" </dev/null >>"$log" 2>&1 &
	else
		nohup "$@" </dev/null >>"$log" 2>&1 &
	fi
	echo $! >"$RUN_DIR/$name.pid"
	LAST_PID=$!
}

# ---------------------------------------------------------------------------
# 0. tools

if ! command -v "${GO:-go}" >/dev/null 2>&1 && [ -x /usr/local/go/bin/go ]; then
	export PATH="$PATH:/usr/local/go/bin"
fi
GO="${GO:-go}"
command -v curl >/dev/null 2>&1 || die "curl is needed (apt-get install curl)"

mkdir -p "$RUN_DIR" bin

# 1. build bin/pushfan if it is missing or older than any source file.
stale=""
if [ ! -x "$BIN" ]; then
	stale="missing"
elif [ -n "$(find . \( -path ./.git -o -path "./$RUN_DIR" -o -path ./bin \) -prune -o \
	-type f \( -name '*.go' -o -name go.mod -o -name go.sum -o -name '*.sql' \) -newer "$BIN" -print -quit)" ]; then
	stale="sources changed"
fi
if [ -n "$stale" ]; then
	command -v "$GO" >/dev/null 2>&1 || die "bin/pushfan is $stale and '$GO' is not on PATH"
	say "building $BIN ($stale)"
	"$GO" build -o "$BIN" ./cmd/pushfan
fi

# 2. local configuration.
export PUSHFAN_MYSQL_DSN="${PUSHFAN_MYSQL_DSN:-root@tcp(127.0.0.1:3306)/pushfan?parseTime=true}"
EMU_ADDR="${PUSHFAN_EMULATOR_ADDR:-127.0.0.1:9099}"
EMU_URL="http://$(dialable "$EMU_ADDR")"
export PUSHFAN_FCM_ENDPOINT="$EMU_URL/v1"
export PUSHFAN_FCM_PROJECT_ID=demo-project
export PUSHFAN_HTTP_ADDR="${PUSHFAN_HTTP_ADDR:-127.0.0.1:8080}"
export PUSHFAN_LOG_FORMAT="${PUSHFAN_LOG_FORMAT:-text}"
export PUSHFAN_CONFIG="${PUSHFAN_CONFIG:-$ROOT/examples/pushfan.yaml}"
API_URL="http://$(dialable "$PUSHFAN_HTTP_ADDR")"
if [ -z "${PUSHFAN_ADMIN_TOKENS:-}" ]; then
	if [ ! -s "$RUN_DIR/admin-token" ]; then
		(
			umask 077
			head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' >"$RUN_DIR/admin-token"
		)
		say "generated a dev admin token in $RUN_DIR/admin-token"
	fi
	PUSHFAN_ADMIN_TOKENS="$(cat "$RUN_DIR/admin-token")"
fi
export PUSHFAN_ADMIN_TOKENS
TOKEN="${PUSHFAN_ADMIN_TOKENS%%,*}"

# 3. a previous run still up? Stop it via the pid files; anything else on our
# ports is someone else's, so say so and stop.
if ours "$(pid_of serve)" || ours "$(pid_of emulator)"; then
	say "a previous run is still up; stopping it first"
	stop_all || true
fi
# need_free NAME ADDR VAR: fail with advice if ADDR already has a listener.
need_free() {
	local name="$1" addr="$2" var="$3"
	port_busy "$addr" || return 0
	warn "ERROR: $addr (for the $name) is already in use by another process:"
	who_listens "$addr" >&2
	warn "stop that process (a 'make run' from another checkout: 'make stop' there),"
	warn "or use another address, e.g.: $var=127.0.0.1:$((${addr##*:} + 10000)) make run"
	exit 1
}
need_free "FCM emulator" "$EMU_ADDR" PUSHFAN_EMULATOR_ADDR
need_free "pushfan API" "$PUSHFAN_HTTP_ADDR" PUSHFAN_HTTP_ADDR

# 4. database, schema, demo data.
if [[ "$PUSHFAN_MYSQL_DSN" =~ tcp\(([^:\)]+):([0-9]+)\) ]]; then
	export MYSQL_HOST="${MYSQL_HOST:-${BASH_REMATCH[1]}}" MYSQL_PORT="${MYSQL_PORT:-${BASH_REMATCH[2]}}"
fi
bash scripts/ensure-mysql.sh
say "migrating"
"$BIN" migrate
if [ "${PUSHFAN_DEMO_FRESH:-}" = 1 ]; then
	say "starting the demo afresh: dropping the demo database, then seeding ${PUSHFAN_SEED_USERS:-1000} demo users"
	"$BIN" seed --fresh --users "${PUSHFAN_SEED_USERS:-1000}"
else
	say "seeding ${PUSHFAN_SEED_USERS:-1000} demo users (make demo-reset starts the demo afresh)"
	"$BIN" seed --users "${PUSHFAN_SEED_USERS:-1000}"
fi

# 5. emulator, then serve.
say "starting the FCM emulator on $EMU_ADDR (log: $RUN_DIR/emulator.log)"
start emulator "$RUN_DIR/emulator.log" "$BIN" emulator --addr "$EMU_ADDR" --latency 30ms --jitter 10ms
EMU_PID=$LAST_PID
wait_for "the emulator" "$EMU_URL/emulator/stats" "$EMU_PID" "$RUN_DIR/emulator.log"

say "starting pushfan serve on $PUSHFAN_HTTP_ADDR (log: $RUN_DIR/serve.log)"
start serve "$RUN_DIR/serve.log" "$BIN" serve
SERVE_PID=$LAST_PID
wait_for "pushfan serve" "$API_URL/readyz" "$SERVE_PID" "$RUN_DIR/serve.log"

cat <<EOF

pushfan is up: API $API_URL (pid $SERVE_PID), FCM emulator $EMU_URL (pid $EMU_PID)
logs: $RUN_DIR/serve.log, $RUN_DIR/emulator.log

# the admin console: open $API_URL/console/ and sign in with the admin token
#   $TOKEN
# (also in $RUN_DIR/admin-token)

# broadcast to every demo user (answers with the final counts):
curl -sS -X POST $API_URL/push/broadcast \\
  -H 'Authorization: Bearer $TOKEN' -H 'Content-Type: application/json' \\
  -d '{"title":"Hello","body":"from pushfan","audience":{"all":true}}'

# totals across broadcasts:
curl -sS -H 'Authorization: Bearer $TOKEN' $API_URL/push/stats

# what the emulator received (totals; per token: $EMU_URL/emulator/counts?token=T):
curl -sS $EMU_URL/emulator/stats

EOF

if [ "${PUSHFAN_DETACH:-}" = 1 ]; then
	echo "running in the background; stop with: make stop"
	exit 0
fi

echo "press Ctrl-C to stop (or run 'make stop' elsewhere)"

on_signal() {
	trap - INT TERM HUP
	echo
	say "stopping"
	stop_all >/dev/null || true
	echo "stopped"
	exit 0
}
trap on_signal INT TERM HUP

# Stay until a signal arrives (the trap stops both) or either child exits
# (crash, or 'make stop' from elsewhere): then stop the other one too.
while ours "$SERVE_PID" && ours "$EMU_PID"; do
	sleep 0.5 &
	wait $! || true # returns at once when a trapped signal arrives
done
trap - INT TERM HUP
for name in serve emulator; do
	[ "$name" = serve ] && pid=$SERVE_PID || pid=$EMU_PID
	ours "$pid" && continue
	rc=0
	wait "$pid" 2>/dev/null || rc=$?
	if [ "$rc" -eq 0 ]; then
		say "$name has stopped; stopping the rest"
	else
		warn "$name exited with status $rc; last lines of $RUN_DIR/$name.log:"
		tail -n 20 "$RUN_DIR/$name.log" >&2 || true
	fi
	break
done
stop_all >/dev/null || true
exit "${rc:-1}"
