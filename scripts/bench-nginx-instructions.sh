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

source scripts/bench-lib.sh
callgrind_setup bench.conf /plain/

# count SERVER [CALLGRIND-OPTION]: instructions per request of SERVER.
count() { callgrind_per_request bench.conf /plain/ "$1" "$N" ${2:+"$2"}; }

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
