#!/usr/bin/env bash
# Instructions per request of each location of nginx/bench.conf, under valgrind's callgrind:
# reproducible to a few instructions where scripts/bench-nginx.sh's CPU time moves by hundreds
# of ns with the machine's load (BENCHMARKS.md, "The native module"). One nginx process
# (master_process off); per location, N keep-alive requests after 200 of warm-up, counted
# between a zero and a dump of callgrind's counters; prints each one's count over /plain/'s.
# usage: scripts/bench-nginx-instructions.sh [N=2000]   (env: PORT, LOCATIONS, NGINX)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-2000}
PORT=${PORT:-18490}
WORKERS=1
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }

source scripts/bench-lib.sh
start_nginx bench.conf /plain/ # renders the prefix; this nginx is stopped, its files kept
kill -QUIT "$(cat "$prefix/logs/nginx.pid")"
wait "$nginx_pid" 2>/dev/null || true
while curl -sf "127.0.0.1:$PORT/plain/" >/dev/null; do sleep 0.1; done
out=$(mktemp -d /tmp/slidewin-callgrind-XXXXXX)
valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.%p" \
  "${NGINX:-nginx}" -p "$prefix" -c "$prefix/conf/bench.conf" \
  -g "master_process off;" >"$out/valgrind.log" 2>&1 &
vg=$!
trap 'kill $vg 2>/dev/null; wait $vg 2>/dev/null; rm -rf "$out"; stop_started_nginx' EXIT
for _ in $(seq 300); do curl -sf "127.0.0.1:$PORT/plain/" >/dev/null && break; sleep 0.2; done

read -r -a LOCATIONS <<<"${LOCATIONS:-/plain/ /limit_req/ /native/ /native-bare/ /shm-key-var/}"
echo "== callgrind, $N requests per location ($(date -u +%FT%TZ))"
plain=
dumps=0
for loc in "${LOCATIONS[@]}"; do
  curl -s "127.0.0.1:$PORT$loc?[1-200]" >/dev/null
  callgrind_control -z "$vg" >/dev/null 2>&1
  curl -s "127.0.0.1:$PORT$loc?[1-$N]" >/dev/null
  callgrind_control -d "$vg" >/dev/null 2>&1
  dumps=$((dumps + 1))
  # The dump is written when valgrind next polls its commands.
  until [ -s "$out/callgrind.$vg.$dumps" ] && grep -q '^totals:' "$out/callgrind.$vg.$dumps"; do sleep 0.1; done
  total=$(grep -m1 '^summary:' "$out/callgrind.$vg.$dumps" | awk '{print $2}')
  per=$((total / N))
  [ "$loc" = /plain/ ] && plain=$per
  printf "%-16s %7d instructions/request  +%5d over /plain/\n" "$loc" "$per" "$((per - ${plain:-$per}))"
done
