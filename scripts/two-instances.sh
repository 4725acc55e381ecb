#!/usr/bin/env bash
# Two `pushfan serve` processes share one 120,000-token broadcast; one is
# killed with -9 at 75 %; the other finishes its chunks. Then two processes
# wrongly started under one instance id, one killed at 40 %. Both at the
# default configuration; each checks that every token was delivered and
# counted once (duplicates reported).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-mysql.sh
exec go test -count=1 -timeout 10m -v -run 'TestTwoProcessesShareABroadcastAndSurviveAKill|TestTwoProcessesWithOneInstanceID' ./cmd/pushfan/
