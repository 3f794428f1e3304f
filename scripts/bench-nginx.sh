#!/usr/bin/env bash
# The limiter's cost in nginx (BENCHMARKS.md, section "OpenResty").
#  1. /loop: 1e6-call loops inside one worker (ns per call).
#  2. wrk on loopback: /api/ (store "local", limit never reached) vs /plain/ (no limiter),
#     alternating RUNS runs each; prints every run, the medians and their ratio.
# usage: scripts/bench-nginx.sh [RUNS=5] [DURATION=5s]   (env: PORT, WORKERS, CONNECTIONS, THREADS)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
DURATION=${2:-5s}
PORT=${PORT:-18480}
WORKERS=${WORKERS:-1}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}

scripts/deps.sh nginx
cargo build -q --release -p slidewin-lua
cargo build -q --release -p slidewin-tests --bin slidewin-nginx
prefix=$(mktemp -d /tmp/slidewin-bench-XXXXXX)
target/release/slidewin-nginx bench.conf --port "$PORT" --workers "$WORKERS" --prefix "$prefix" 2>/dev/null &
nginx_pid=$!
trap 'kill -TERM $nginx_pid 2>/dev/null; wait $nginx_pid 2>/dev/null; rm -rf "$prefix"' EXIT
for _ in $(seq 100); do curl -sf "127.0.0.1:$PORT/plain/" >/dev/null && break; sleep 0.1; done

echo "== loops in one worker ($(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
curl -sf "127.0.0.1:$PORT/loop"

rps() { wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" "http://127.0.0.1:$PORT$1" | awk '/Requests\/sec/ {print $2}'; }
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "== wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $WORKERS worker(s), $RUNS runs each, alternating"
rps /plain/ >/dev/null # warm-up
api=() plain=()
for run in $(seq "$RUNS"); do
  a=$(rps /api/) p=$(rps /plain/)
  api+=("$a") plain+=("$p")
  echo "run $run: /api/ $a req/s   /plain/ $p req/s"
done
api_median=$(printf '%s\n' "${api[@]}" | median)
plain_median=$(printf '%s\n' "${plain[@]}" | median)
awk -v a="$api_median" -v p="$plain_median" \
  'BEGIN {printf "median: /api/ %.0f req/s, /plain/ %.0f req/s; the limiter costs %.1f%% of req/s\n", a, p, 100 * (1 - a / p)}'
