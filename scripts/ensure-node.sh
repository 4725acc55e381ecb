#!/usr/bin/env bash
# ensure-node.sh — make sure Node.js (18 or later) and npm are there for the
# TypeScript half of the generated-client check
# (internal/testsupport/genclient/typescript_test.go: npm ci installs the
# pinned openapi-typescript and typescript, then tsc --strict compiles the
# types generated from the OpenAPI document).
#
# Idempotent and non-interactive. As root on Debian/Ubuntu it installs
# Debian's nodejs and npm packages (apt-get) when either is missing; as any
# other user it only checks and says what to do.
set -euo pipefail

say() { printf 'ensure-node: %s\n' "$*" >&2; }

# openapi-typescript 7 needs Node.js 18.17 or later (Debian 12 has 18.20).
node_ok() {
	command -v node >/dev/null 2>&1 &&
		node -e 'const [a, b] = process.versions.node.split(".").map(Number); process.exit(a > 18 || (a === 18 && b >= 17) ? 0 : 1)'
}

missing=()
node_ok || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi
if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
	say "ERROR: ${missing[*]} missing (Node.js 18.17 or later and npm are needed); install them (Debian: sudo apt-get install nodejs npm)"
	exit 1
fi
say "installing Debian's ${missing[*]} (the TypeScript check of the OpenAPI document needs them)"
export DEBIAN_FRONTEND=noninteractive
if ! apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" </dev/null; then
	apt-get -o DPkg::Lock::Timeout=600 update -q </dev/null
	apt-get -o DPkg::Lock::Timeout=600 install -y -q --no-install-recommends "${missing[@]}" </dev/null
fi
if ! node_ok; then
	say "ERROR: node $(node --version 2>/dev/null || echo missing) is older than 18.17 after the install"
	exit 1
fi
say "node $(node --version), npm $(npm --version)"
