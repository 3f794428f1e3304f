#!/usr/bin/env bash
# Load and faults on the demo (BENCHMARKS.md, "Load and faults"): wrk at full speed for
# DURATION with a mix of valid, hostile and huge requests (scripts/bench-fault.lua), while the
# workers' RSS is sampled every 5 s. Prints the statuses, the RSS series, and whether any worker
# was replaced (PIDs before/after, "exited on signal" in error.log).
# usage: scripts/bench-fault.sh [DURATION=60s]   (env: PORT, WORKERS, CONNECTIONS, THREADS)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-60s}
PORT=${PORT:-18490}
WORKERS=${WORKERS:-2}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-2}

source scripts/bench-lib.sh
start_nginx demo.conf /metrics

rss_mb() { for w in $(workers); do awk '/VmRSS/ {printf "%.1f ", $2 / 1024}' "/proc/$w/status"; done; }
before=$(workers)
echo "== $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "== wrk -t$THREADS -c$CONNECTIONS -d$DURATION -s scripts/bench-fault.lua, $WORKERS workers ($before)"
echo "rss MB at 0 s: $(rss_mb)"
wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" -s scripts/bench-fault.lua "http://127.0.0.1:$PORT" \
  >"$prefix/wrk.out" 2>&1 &
wrk_pid=$!
seconds=0
while kill -0 "$wrk_pid" 2>/dev/null; do
  sleep 5
  seconds=$((seconds + 5))
  kill -0 "$wrk_pid" 2>/dev/null && echo "rss MB at $seconds s: $(rss_mb)"
done
wait "$wrk_pid"
grep -E "requests in|Requests/sec|Non-2xx|Socket errors|statuses" "$prefix/wrk.out"
echo "rss MB after: $(rss_mb)"
after=$(workers)
echo "workers before: $before after: $after ($([ "$before" = "$after" ] && echo unchanged || echo REPLACED))"
echo "'exited on signal' in error.log: $(grep -c 'exited on signal' "$prefix/logs/error.log" || true)"
echo "5xx responses: $(grep -oE 'statuses .*' "$prefix/wrk.out" | tr ' ' '\n' | grep -cE '^5[0-9][0-9]:' || true) kinds"
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
