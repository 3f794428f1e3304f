#!/usr/bin/env bash
# The limiter's cost in nginx (BENCHMARKS.md, section "OpenResty").
#  1. /loop: 1e6-call loops inside one worker (ns per call).
#  2. wrk on loopback: /api/ (store "local", limit never reached) vs /plain/ (no limiter),
#     alternating RUNS runs each; prints every run, the medians and their ratio, and the
#     worker's CPU time per request (from /proc: steadier than req/s on a shared machine).
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

workers=$(pgrep -P "$(cat "$prefix/logs/nginx.pid")" | tr '\n' ' ')
cpu_ticks() { for w in $workers; do awk '{print $14 + $15}' "/proc/$w/stat"; done | awk '{s += $1} END {print s}'; }
# One wrk run: "req/s ns-of-worker-CPU-per-request".
rps() {
  local before after out
  before=$(cpu_ticks)
  out=$(wrk -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" "http://127.0.0.1:$PORT$1")
  after=$(cpu_ticks)
  awk -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" '
    /requests in/ {n = $1} /Requests\/sec/ {r = $2}
    END {printf "%.0f %.0f\n", r, (a - b) / hz * 1e9 / n}' <<<"$out"
}
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
echo "== wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $WORKERS worker(s), $RUNS runs each, alternating"
rps /plain/ >/dev/null # warm-up
api=() plain=() api_cpu=() plain_cpu=()
for run in $(seq "$RUNS"); do
  read -r a ac <<<"$(rps /api/)"
  read -r p pc <<<"$(rps /plain/)"
  api+=("$a") plain+=("$p") api_cpu+=("$ac") plain_cpu+=("$pc")
  echo "run $run: /api/ $a req/s ($ac ns CPU/req)   /plain/ $p req/s ($pc ns CPU/req)"
done
a=$(printf '%s\n' "${api[@]}" | median) p=$(printf '%s\n' "${plain[@]}" | median)
ac=$(printf '%s\n' "${api_cpu[@]}" | median) pc=$(printf '%s\n' "${plain_cpu[@]}" | median)
awk -v a="$a" -v p="$p" -v ac="$ac" -v pc="$pc" 'BEGIN {
  printf "median: /api/ %.0f req/s, /plain/ %.0f req/s: the limiter costs %.1f%% of req/s\n", a, p, 100 * (1 - a / p)
  printf "median worker CPU: /api/ %.0f ns/req, /plain/ %.0f ns/req: +%.0f ns per request (%.1f%%)\n", ac, pc, ac - pc, 100 * (ac / pc - 1)
}'
