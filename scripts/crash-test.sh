#!/usr/bin/env bash
# Crash and deploy drills with real processes: kill -9 of the only instance
# at 20 %, 40 % and 70 % of a 20,000-token broadcast, then a restart; and a
# SIGTERM mid-broadcast followed by another instance. Each checks, token by
# token against the FCM emulator, that nothing is missing and that
# duplicates stay within the documented bound (README, "Crash safety").
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-mysql.sh
exec go test -count=1 -timeout 10m -v -run 'TestKill9MidBroadcastResumesAfterRestart|TestSIGTERMReleasesLeasesAndAnotherInstanceFinishes' ./cmd/pushfan/
