#!/usr/bin/env bash
# What a scrape costs the requests beside it (BENCHMARKS.md, "A scrape beside other requests"): one worker, a region
# of REGION (default 1g) filled with KEYS distinct keys (3 million: 1.7 million held in 1g),
# then wrk on /ping (a trivial location) for DURATION each: with no scrape, with /metrics
# scraped back to back (a walk a step at a time), and with the same walk in one go
# (/top-in-one-go, as scrapes walked before). Prints each one's latency p99 and max, and the
# scrapes' count and duration (median, max).
# usage: scripts/bench-scrape.sh [DURATION=10s]   (env: PORT, REGION, KEYS, CONNECTIONS)
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${1:-10s}
PORT=${PORT:-18495}
WORKERS=1
CONNECTIONS=${CONNECTIONS:-8}
export SCRAPE_REGION=${REGION:-1g}
KEYS=${KEYS:-3000000}

source scripts/bench-lib.sh
start_nginx scrape.conf /ping

echo "== $(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
filled=$(date +%s.%N)
held=$(curl -sf "127.0.0.1:$PORT/fill?from=0&n=$KEYS")
echo "region $SCRAPE_REGION: $held keys held after $KEYS requests ($(awk -v s="$filled" -v e="$(date +%s.%N)" 'BEGIN {printf "%.1f", e - s}') s)"

median() { sort -g | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
# wrk on /ping while `scrape PATH` runs back to back (no PATH: no scrape).
run() {
  local label=$1 path=${2:-} times="$prefix/times" out scrapes
  : >"$times"
  wrk -t1 -c"$CONNECTIONS" -d"$DURATION" --latency "http://127.0.0.1:$PORT/ping" >"$prefix/wrk.out" &
  local wrk_pid=$!
  while [ -n "$path" ] && kill -0 "$wrk_pid" 2>/dev/null; do
    curl -sf -o /dev/null -w '%{time_total}\n' "127.0.0.1:$PORT$path" >>"$times"
  done
  wait "$wrk_pid"
  out=$(awk '/^ +Latency / && !/Distribution/ {max = $4} /^ +99%/ {p99 = $2} /Requests\/sec/ {r = $2}
    END {printf "p99 %8s  max %8s  %8.0f req/s", p99, max, r}' "$prefix/wrk.out")
  scrapes=""
  if [ -s "$times" ]; then
    scrapes=$(awk '{s = $1 * 1000; if (s > m) m = s} END {printf "%d scrapes, max %.0f ms", NR, m}' "$times")
    scrapes+=", median $(awk '{print $1 * 1000}' "$times" | median | xargs printf '%.0f') ms"
  fi
  printf '%-28s /ping %s  %s\n' "$label" "$out" "$scrapes"
}
echo "== wrk -t1 -c$CONNECTIONS -d$DURATION --latency /ping, 1 worker"
run "no scrape"
run "/metrics back to back" /metrics
run "/slidewin/top back to back" /slidewin/top
run "one-go walks back to back" /top-in-one-go
echo "== load after: $(cut -d' ' -f1-3 /proc/loadavg)"
