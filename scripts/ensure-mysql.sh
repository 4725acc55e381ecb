#!/usr/bin/env bash
# ensure-mysql.sh — make sure a MariaDB/MySQL server answers on 127.0.0.1:3306 and
# that root can log in over TCP with an empty password (what the tests and
# `make run` use: root@tcp(127.0.0.1:3306)/).
#
# Idempotent and non-interactive. As root on Debian/Ubuntu it installs
# (apt-get), initialises and starts MariaDB when needed; as any other user it
# only checks and says what to do.
#
# Environment:
#   MYSQL_HOST     host to check            (default 127.0.0.1)
#   MYSQL_PORT     port to check            (default 3306)
#   MYSQL_DATADIR  datadir to initialise    (default /var/lib/mysql)
#   MYSQL_WAIT     seconds to wait for boot (default 60)
set -euo pipefail

HOST="${MYSQL_HOST:-127.0.0.1}"
PORT="${MYSQL_PORT:-3306}"
DATADIR="${MYSQL_DATADIR:-/var/lib/mysql}"
WAIT="${MYSQL_WAIT:-60}"
LOG="/var/log/mysql/ensure-mysql.log"
STARTED=0

say() { printf 'ensure-mysql: %s\n' "$*" >&2; }
die() {
	say "ERROR: $*"
	exit 1
}
is_root() { [ "$(id -u)" -eq 0 ]; }
have() { command -v "$1" >/dev/null 2>&1; }
is_local() { case "$HOST" in 127.0.0.1 | localhost | ::1) return 0 ;; *) return 1 ;; esac; }

# Client programs: prefer the mariadb-* names, fall back to the mysql* ones.
pick() {
	local c
	for c in "$@"; do
		if have "$c"; then
			command -v "$c"
			return 0
		fi
	done
	return 1
}
find_clients() {
	ADMIN="$(pick mariadb-admin mysqladmin || true)"
	CLIENT="$(pick mariadb mysql || true)"
}
find_server() {
	local s
	for s in /usr/sbin/mariadbd /usr/sbin/mysqld /usr/bin/mariadbd /usr/bin/mysqld; do
		if [ -x "$s" ]; then
			SERVER="$s"
			return 0
		fi
	done
	SERVER=""
	return 1
}

# port_open: something accepts TCP connections on HOST:PORT (no client needed).
port_open() { (exec 3<>"/dev/tcp/$HOST/$PORT") 2>/dev/null; }

# alive: a server answers on HOST:PORT. mysqladmin ping exits 0 even on
# "Access denied"; a server that refuses the client host (skip-name-resolve and
# no root@127.0.0.1: error 1130 "... is not allowed to connect") has answered
# too. Whether root can log in is checked separately below.
alive() {
	local out
	if [ -z "$ADMIN" ]; then
		port_open
		return
	fi
	out="$("$ADMIN" --no-defaults --protocol=tcp -h"$HOST" -P"$PORT" -uroot --connect-timeout=2 ping 2>&1)" && return 0
	[[ "$out" == *"not allowed to connect"* || "$out" == *"Access denied"* ]]
}

# tcp_sql SQL: run SQL as root over TCP with an empty password, exactly like the
# Go driver does (no option files, no password).
tcp_sql() {
	"$CLIENT" --no-defaults --protocol=tcp -h"$HOST" -P"$PORT" -uroot --connect-timeout=5 -N -B -e "$1"
}
# socket_sql SQL: run SQL as root over the local unix socket (unix_socket auth).
socket_sql() {
	"$CLIENT" -uroot --connect-timeout=5 -N -B -e "$1" </dev/null
}

wait_alive() {
	local i
	for ((i = 0; i < WAIT; i++)); do
		if alive; then
			return 0
		fi
		# If the server we started has already died, stop waiting.
		if [ "$STARTED" = 1 ] && [ "$i" -ge 3 ] && ! start-stop-daemon --status --exec "$SERVER" >/dev/null 2>&1; then
			say "the server process exited"
			return 1
		fi
		sleep 1
	done
	alive
}

install_mariadb() {
	is_root || return 1
	have apt-get || return 1
	say "MariaDB is not installed; installing mariadb-server and mariadb-client with apt-get ..."
	export DEBIAN_FRONTEND=noninteractive
	apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null >&2
	apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends mariadb-server mariadb-client </dev/null >&2
}

start_server() {
	is_root || return 1
	find_server || return 1
	have start-stop-daemon || die "start-stop-daemon not found; start $SERVER yourself (e.g. 'service mariadb start')"

	if id mysql >/dev/null 2>&1; then
		install -d -o mysql -g mysql -m 0755 /run/mysqld
	else
		die "system user 'mysql' does not exist; reinstall the mariadb-server package"
	fi

	if [ ! -d "$DATADIR/mysql" ]; then
		if [ -d "$DATADIR" ] && [ -n "$(ls -A "$DATADIR" 2>/dev/null)" ]; then
			say "note: $DATADIR is not empty but has no 'mysql' system database; initialising it anyway"
		fi
		say "initialising the data directory $DATADIR ..."
		install -d -o mysql -g mysql -m 0750 "$DATADIR"
		local initdb
		initdb="$(pick mariadb-install-db mysql_install_db)" || die "mariadb-install-db not found"
		local out
		if ! out="$("$initdb" --user=mysql --datadir="$DATADIR" 2>&1 </dev/null)"; then
			printf '%s\n' "$out" >&2
			die "$initdb failed"
		fi
	fi

	if start-stop-daemon --status --exec "$SERVER" >/dev/null 2>&1; then
		say "$SERVER is already running but does not answer on $HOST:$PORT yet; waiting for it"
		STARTED=1
		return 0
	fi
	say "starting $SERVER ..."
	local out=()
	install -d -o mysql -g adm -m 2750 /var/log/mysql 2>/dev/null || true
	if start-stop-daemon --help 2>&1 | grep -q -- '--output'; then
		out=(--output "$LOG")
	fi
	start-stop-daemon --start --oknodo --background "${out[@]}" --exec "$SERVER" -- --user=mysql --datadir="$DATADIR" --port="$PORT" </dev/null
	STARTED=1
}

fail_hint() {
	say "ERROR: $1"
	local f
	if [ "$STARTED" = 1 ]; then
		for f in "$LOG" /var/log/mysql/error.log; do
			if [ -r "$f" ] && [ -s "$f" ]; then
				say "last lines of $f:"
				tail -n 20 "$f" >&2 || true
			fi
		done
	fi
	cat >&2 <<EOF
ensure-mysql: what to do:
  - on Debian/Ubuntu, run this script as root: it installs and starts MariaDB itself
  - or start your own MariaDB/MySQL on $HOST:$PORT where root can log in over TCP
    with an empty password, e.g.:
      docker run -d --name pushfan-db -p 127.0.0.1:$PORT:3306 -e MARIADB_ALLOW_EMPTY_ROOT_PASSWORD=1 mariadb:10.11
  - or point the tests elsewhere: PUSHFAN_TEST_MYSQL_DSN='user:pass@tcp(host:port)/?parseTime=true'
EOF
	exit 1
}

# ---------------------------------------------------------------------------

find_clients

if ! alive; then
	if ! is_root; then
		fail_hint "nothing answers on $HOST:$PORT (and I am not root, so I only check)"
	fi
	if ! is_local; then
		fail_hint "nothing answers on $HOST:$PORT; I only install/start a server for 127.0.0.1"
	fi
	if ! find_server; then
		install_mariadb || fail_hint "MariaDB is not installed and apt-get is not available"
		find_clients
		find_server || fail_hint "the MariaDB server binary is still missing after apt-get install"
	fi
	# The package's postinst may already have started it.
	if ! alive; then
		start_server || fail_hint "could not start $SERVER"
		say "waiting up to ${WAIT}s for the server on $HOST:$PORT ..."
		wait_alive || fail_hint "the server did not answer on $HOST:$PORT within ${WAIT}s"
	fi
fi

if [ -z "$CLIENT" ]; then
	# Port answers but no client to check the login with.
	if is_root && have apt-get; then
		say "installing mariadb-client to check the login ..."
		export DEBIAN_FRONTEND=noninteractive
		apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null >&2 || true
		apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends mariadb-client </dev/null >&2 || true
		find_clients
	fi
	if [ -z "$CLIENT" ]; then
		say "warning: a server answers on $HOST:$PORT but no mariadb/mysql client is installed to check root login"
		echo "MariaDB ready on $HOST:$PORT (version unknown: no client to ask)"
		exit 0
	fi
fi

# Root over TCP with an empty password must work.
if ! version="$(tcp_sql 'SELECT VERSION()' 2>/dev/null)"; then
	if ! is_root || ! is_local; then
		err="$(tcp_sql 'SELECT 1' 2>&1 || true)"
		fail_hint "the server answers but 'root' with an empty password cannot log in over TCP: $err"
	fi
	# Fresh Debian installs give root@localhost unix_socket auth only (plus an
	# 'invalid' native password). Allow an empty native password as well, but
	# only when the socket login works (i.e. this is the local server).
	if socket_sql 'SELECT 1' >/dev/null 2>&1; then
		say "root cannot log in over TCP; enabling an empty mysql_native_password for root@localhost (keeping unix_socket) ..."
		socket_sql "ALTER USER 'root'@'localhost' IDENTIFIED VIA mysql_native_password USING PASSWORD('') OR unix_socket; FLUSH PRIVILEGES;"
		if ! tcp_sql 'SELECT 1' >/dev/null 2>&1; then
			# With skip-name-resolve, a TCP login from 127.0.0.1 does not match
			# root@localhost; give root@127.0.0.1 the same rights.
			say "still refused over TCP (skip-name-resolve?); creating root@127.0.0.1 with an empty password ..."
			socket_sql "CREATE USER IF NOT EXISTS 'root'@'127.0.0.1' IDENTIFIED VIA mysql_native_password USING PASSWORD(''); GRANT ALL PRIVILEGES ON *.* TO 'root'@'127.0.0.1' WITH GRANT OPTION; FLUSH PRIVILEGES;"
		fi
	else
		err="$(tcp_sql 'SELECT 1' 2>&1 || true)"
		fail_hint "root cannot log in over TCP ($err) nor over the unix socket; fix the root account by hand"
	fi
	version="$(tcp_sql 'SELECT VERSION()' 2>/dev/null)" ||
		fail_hint "root still cannot log in over TCP with an empty password: $(tcp_sql 'SELECT 1' 2>&1 || true)"
fi

# The test suites run several stacks at once (server's stack tests in
# parallel beside the other packages), each with pools of up to 40
# connections per instance: the default 151 connections can run out. Only a
# server on this machine is changed, and only upward (until it restarts).
if is_local; then
	conns="$(tcp_sql 'SELECT @@GLOBAL.max_connections' 2>/dev/null || echo 0)"
	if [ "${conns:-0}" -lt 1000 ] 2>/dev/null; then
		tcp_sql 'SET GLOBAL max_connections = 1000' >/dev/null 2>&1 &&
			say "max_connections raised from $conns to 1000 (the suites run stacks side by side)" ||
			say "could not raise max_connections from $conns (tests running many stacks at once may be refused connections)"
	fi
fi

echo "MariaDB ready on $HOST:$PORT (version $version)"
