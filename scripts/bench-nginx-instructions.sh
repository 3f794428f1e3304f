#!/usr/bin/env bash
# Instructions per request of each limiter of nginx/bench.conf, under valgrind's callgrind:
# reproducible to a few instructions where scripts/bench-nginx.sh's CPU time moves by hundreds
# of ns with the machine's load (BENCHMARKS.md, "The native module"). Each limiter is a server
# of its own (bench.conf's last servers, named by the Host header, so finding its location
# costs each the same), measured in an nginx of its own (one process, master_process off).
# Per server, N keep-alive requests after 200 of warm-up, counted between a zero and a dump of
# callgrind's counters, twice: the whole request, and only inside its phases
# (ngx_http_core_run_phases: the handlers, the content and its header filter). The whole
# request also counts the allocator, whose state one limiter's pool use moves for all of its
# requests (by ~270 instructions for the native module's headers, its way): the phases are the
# limiter's own cost. Prints each one's counts over plain-nginx's.
# usage: scripts/bench-nginx-instructions.sh [N=2000]   (env: PORT, SERVERS, NGINX)
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
vg=
trap 'kill $vg 2>/dev/null || true; wait $vg 2>/dev/null || true; rm -rf "$out"; stop_started_nginx' EXIT

# count SERVER [CALLGRIND-OPTION]: instructions per request of SERVER, in a fresh nginx under
# callgrind.
count() {
  valgrind --tool=callgrind --callgrind-out-file="$out/callgrind.$1" ${2:+"$2"} \
    "${NGINX:-nginx}" -p "$prefix" -c "$prefix/conf/bench.conf" \
    -g "master_process off;" >"$out/valgrind.log" 2>&1 &
  vg=$!
  for _ in $(seq 300); do curl -sf "127.0.0.1:$PORT/plain/" >/dev/null && break; sleep 0.2; done
  curl -s -H "Host: $1" "127.0.0.1:$PORT/?[1-200]" >/dev/null
  callgrind_control -z "$vg" >/dev/null 2>&1
  curl -s -H "Host: $1" "127.0.0.1:$PORT/?[1-$N]" >/dev/null
  callgrind_control -d "$vg" >/dev/null 2>&1
  # The dump is written when valgrind next polls its commands.
  until [ -s "$out/callgrind.$1.1" ] && grep -q '^totals:' "$out/callgrind.$1.1"; do sleep 0.1; done
  local total
  total=$(grep -m1 '^summary:' "$out/callgrind.$1.1" | awk '{print $2}')
  kill -QUIT "$vg"
  wait "$vg" 2>/dev/null || true
  rm -f "$out"/callgrind."$1"*
  echo $((total / N))
}

read -r -a SERVERS <<<"${SERVERS:-plain-nginx limit-req-1 limit-req-h limit-req-s native-both native-bare shm-key-var}"
echo "== callgrind, $N requests per server, an nginx each ($(date -u +%FT%TZ))"
printf "%-12s %22s %22s\n" server "request (+ over plain)" "phases (+ over plain)"
for server in "${SERVERS[@]}"; do
  request=$(count "$server")
  phases=$(count "$server" --toggle-collect=ngx_http_core_run_phases)
  if [ "$server" = plain-nginx ]; then
    plain_request=$request plain_phases=$phases
  fi
  printf "%-12s %13d (+%5d) %13d (+%5d)\n" "$server" "$request" \
    "$((request - ${plain_request:-$request}))" "$phases" "$((phases - ${plain_phases:-$phases}))"
done
