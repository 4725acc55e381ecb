#!/usr/bin/env bash
# ensure-prometheus.sh — make sure Prometheus and promtool are there for the
# tests of deploy/prometheus/rules.yaml and deploy/grafana/pushfan.json
# (deploy/monitoring_test.go: promtool check/test rules, and a real
# Prometheus on a free loopback port scraping a running pushfan).
#
# Idempotent and non-interactive. As root on Debian/Ubuntu it installs
# Debian's prometheus package (apt-get; it carries both binaries) when
# either is missing; as any other user it only checks and says what to do.
# PUSHFAN_PROMETHEUS and PUSHFAN_PROMTOOL name other binaries.
#
# The package's postinst may start its own service on :9090 where services
# may start (not in a container whose policy-rc.d forbids it): the tests
# never use that port, but a Prometheus left running there scrapes nothing
# of ours and costs CPU, so a service this script's install started is
# stopped and disabled again.
set -euo pipefail

say() { printf 'ensure-prometheus: %s\n' "$*" >&2; }

prom="${PUSHFAN_PROMETHEUS:-/usr/bin/prometheus}"
tool="${PUSHFAN_PROMTOOL:-/usr/bin/promtool}"
if [ -x "$prom" ] && [ -x "$tool" ]; then
	exit 0
fi
if [ -n "${PUSHFAN_PROMETHEUS:-}${PUSHFAN_PROMTOOL:-}" ]; then
	say "ERROR: PUSHFAN_PROMETHEUS=$prom or PUSHFAN_PROMTOOL=$tool is not an executable"
	exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	say "ERROR: Prometheus is not installed; install it (Debian: sudo apt-get install prometheus) or set PUSHFAN_PROMETHEUS and PUSHFAN_PROMTOOL"
	exit 1
fi
say "installing Debian's prometheus (the alert rules' and the dashboard's tests need prometheus and promtool)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends prometheus </dev/null; then
	apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null
	apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends prometheus </dev/null
fi
# Leave no package-started service holding :9090 (see the top).
if command -v systemctl >/dev/null 2>&1 && systemctl is-active --quiet prometheus 2>/dev/null; then
	systemctl disable --now prometheus >/dev/null 2>&1 || true
elif command -v invoke-rc.d >/dev/null 2>&1; then
	invoke-rc.d prometheus stop >/dev/null 2>&1 || true
fi
"$prom" --version >&2
