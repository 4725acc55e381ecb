#!/usr/bin/env bash
# ensure-chromium.sh — make sure headless Chromium is there for the console's
# browser tests (console/*_test.go drive /usr/bin/chromium with chromedp).
#
# Idempotent and non-interactive. As root on Debian/Ubuntu it installs
# Debian's chromium package (apt-get) when it is missing; as any other user
# it only checks and says what to do. PUSHFAN_CHROMIUM names another binary.
set -euo pipefail

say() { printf 'ensure-chromium: %s\n' "$*" >&2; }

bin="${PUSHFAN_CHROMIUM:-/usr/bin/chromium}"
if [ -x "$bin" ]; then
	exit 0
fi
if [ -n "${PUSHFAN_CHROMIUM:-}" ]; then
	say "ERROR: PUSHFAN_CHROMIUM=$bin is not an executable"
	exit 1
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	say "ERROR: Chromium is not installed; install it (Debian: sudo apt-get install chromium) or set PUSHFAN_CHROMIUM"
	exit 1
fi
say "installing Debian's chromium (the console's browser tests need it)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends chromium </dev/null; then
	apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null
	apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends chromium </dev/null
fi
"$bin" --version >&2
