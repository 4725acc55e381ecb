#!/usr/bin/env bash
# Crash and deploy drills with real processes at the default configuration:
# kill -9 of the only instance at 20 %, 40 % and 70 % of a 60,000-token
# broadcast (and at 40 % with 5 % of sends answering UNAVAILABLE), then a
# restart under the same pinned instance id; and a SIGTERM mid-broadcast
# followed by another instance. Each checks, token by token against the
# FCM emulator, that nothing is missing or counted twice and that
# duplicate sends stay within the documented bound (docs/reliability.md, "Duplicate bound after a kill -9").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-mysql.sh
exec go test -count=1 -timeout 10m -v -run 'TestKill9MidBroadcastResumesAfterRestart|TestSIGTERMReleasesLeasesAndAnotherInstanceFinishes' ./cmd/pushfan/
