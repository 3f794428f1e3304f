#!/usr/bin/env bash
# What the gateway switches add to sw:enforce (BENCHMARKS.md, "Gateway switches"): 1 worker,
# each limiter's enforce N times in one request (store shm, one key, admit path), every
# limiter once per round, ROUNDS rounds; the medians, and each over `plain` (the layer's own
# enforce) and over `none` (the switched path with no header: what headers cost aside).
# usage: scripts/bench-switches.sh [N=20000] [ROUNDS=7]   (env: PORT)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-20000}
ROUNDS=${2:-7}
PORT=${PORT:-18490}
WORKERS=1
LIMITERS=(plain draft x-ratelimit none dry-none refund-none exempt-miss-none exempt-hit)

source scripts/bench-lib.sh
start_nginx bench-switches.conf "/loop?limiter=plain&n=1"

echo "== sw:enforce ns/call, $N calls per request, $ROUNDS rounds ($(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
declare -A times
for round in $(seq "$ROUNDS"); do
  line="round $round:"
  for name in "${LIMITERS[@]}"; do
    ns=$(curl -sf "127.0.0.1:$PORT/loop?limiter=$name&n=$N")
    times[$name]+="$ns "
    line+="  $name $ns"
  done
  echo "$line"
done
median() { tr ' ' '\n' | grep . | sort -n | awk '{v[NR]=$1} END {print v[int((NR+1)/2)]}'; }
plain=$(median <<<"${times[plain]}")
none=$(median <<<"${times[none]}")
for name in "${LIMITERS[@]}"; do
  m=$(median <<<"${times[$name]}")
  awk -v n="$name" -v m="$m" -v p="$plain" -v q="$none" \
    'BEGIN {printf "median %-17s %6d ns/call  %5.2fx plain  %5.2fx none\n", n, m, m / p, m / q}'
done
