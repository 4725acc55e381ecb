#!/usr/bin/env bash
# Two `pushfan serve` processes share one 30,000-token broadcast; one is
# killed with -9 at 40 %; the other finishes its chunks. Checks that both
# sent, and that every token was delivered (duplicates reported).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure-mysql.sh
exec go test -count=1 -timeout 10m -v -run 'TestTwoProcessesShareABroadcastAndSurviveAKill' ./cmd/pushfan/
