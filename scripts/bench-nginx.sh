#!/usr/bin/env bash
# The limiter's cost in nginx (BENCHMARKS.md, section "The access phase").
#  1. /loop: 1e6-call loops inside one worker (ns per call).
#  2. wrk on loopback, the access phase side by side: /plain/ (no limiter), /limit_req/
#     (nginx's own), /native/ (the native module's slidewin_limit), /count/ (a hand-written
#     shdict count + one header), /api/ (store "local"), /shm/ (store "shm"); limits never reached. RUNS alternating runs each; prints every run
#     and the medians of req/s and of the workers' CPU time per request (from /proc: steadier
#     than req/s on a shared machine), and each one's CPU over /plain/. LOCATIONS="/plain/ ..."
#     picks others: a path ending in -users/ is driven over 10000 keys (?user=); /conc/ and
#     /limit_conn/ (concurrency limits) need LIMIT_TRAFFIC_DIR, a lua-resty-limit-traffic checkout.
#  A location written host:NAME is `/` of bench.conf's server NAME (its last servers: one
#  limiter each, so finding the location costs each the same); BASE names the location the
#  others are counted over (default /plain/), e.g.
#  BASE=host:plain-nginx LOCATIONS="host:limit-req-1 host:native-both" REFERENCE=host:limit-req-1
#  Before and after a change, in the same run: BEFORE=DIR (a checkout of the earlier commit,
#  e.g. `git worktree add /tmp/before HEAD~3`) starts that checkout's nginx beside this one's,
#  and a location written before:/shm-key-var/ is driven there (its build is made first).
#  PIN=1 puts every worker of both on the last core and wrk on the first. Two nginx instances
#  still differ by a few hundred ns a request with the same code: run BEFORE=. (an A/A run) to
#  see the spread before reading a difference.
# usage: scripts/bench-nginx.sh [RUNS=5] [DURATION=5s]
#   (env: PORT, WORKERS, CONNECTIONS, THREADS, LOCATIONS, BASE, REFERENCE, LIMIT_TRAFFIC_DIR,
#    BEFORE)
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:-5}
DURATION=${2:-5s}
PORT=${PORT:-18480}
WORKERS=${WORKERS:-1}
CONNECTIONS=${CONNECTIONS:-32}
THREADS=${THREADS:-1}

source scripts/bench-lib.sh
if [ -n "${BEFORE:-}" ]; then
  (cd "$BEFORE" && cargo build -q --release -p slidewin-lua -p slidewin-tests --bin slidewin-nginx \
    && scripts/build-nginx-module.sh >/dev/null)
  PORT=$((PORT + 1)) start_nginx_in "$BEFORE" bench.conf /plain/
  before_workers=$(workers)
fi
start_nginx bench.conf /plain/
WRK=(wrk)
if [ "${PIN:-0}" = 1 ]; then
  last=$(($(nproc) - 1))
  for w in $(workers) ${before_workers:-}; do taskset -pc "$last" "$w" >/dev/null; done
  WRK=(taskset -c 0 wrk)
fi

echo "== loops in one worker ($(date -u +%FT%TZ), $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg))"
curl -sf "127.0.0.1:$PORT/loop"

workers=$(workers)
cpu_ticks() { for w in $1; do awk '{print $14 + $15}' "/proc/$w/stat"; done | awk '{s += $1} END {print s}'; }
# One wrk run (path, then extra wrk arguments; before:PATH on BEFORE's nginx): "req/s
# ns-of-worker-CPU-per-request".
rps() {
  local before after out port=$PORT path=$1 pids=$workers
  if [[ $path == before:* ]]; then
    port=$((PORT + 1)) path=${path#before:} pids=$before_workers
  fi
  before=$(cpu_ticks "$pids")
  local extra=()
  [[ $path == *-users/ ]] && extra=(-s scripts/wrk-random-user.lua)
  if [[ $path == host:* ]]; then
    extra=(-H "Host: ${path#host:}") path=/
  fi
  out=$("${WRK[@]}" -t"$THREADS" -c"$CONNECTIONS" -d"$DURATION" "${extra[@]}" "${@:2}" "http://127.0.0.1:$port$path")
  after=$(cpu_ticks "$pids")
  awk -v b="$before" -v a="$after" -v hz="$(getconf CLK_TCK)" '
    /requests in/ {n = $1} /Requests\/sec/ {r = $2}
    END {printf "%.0f %.0f\n", r, (a - b) / hz * 1e9 / n}' <<<"$out"
}
median() { sort -n | awk '{v[NR]=$1} END {print (NR % 2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
# The access phase's cost, side by side: every location in each run, runs alternating.
read -r -a LOCATIONS <<<"${LOCATIONS:-/plain/ /limit_req/ /native/ /count/ /api/ /shm/}"
# Each location's added CPU is counted over this one's.
BASE=${BASE:-/plain/}
[[ " ${LOCATIONS[*]} " == *" $BASE "* ]] || LOCATIONS=("$BASE" "${LOCATIONS[@]}")
# Each location's added CPU is also printed over this one's (when it runs).
REFERENCE=${REFERENCE:-/limit_req/}
echo "== wrk -t$THREADS -c$CONNECTIONS -d$DURATION, $WORKERS worker(s), $RUNS runs each, alternating"
rps "$BASE" >/dev/null # warm-up
declare -A rates cpus
for run in $(seq "$RUNS"); do
  line="run $run:"
  for loc in "${LOCATIONS[@]}"; do
    read -r r c <<<"$(rps "$loc")"
    rates[$loc]+="$r " cpus[$loc]+="$c "
    line+="  $loc $r req/s ($c ns)"
  done
  echo "$line"
done
base_cpu=$(tr ' ' '\n' <<<"${cpus[$BASE]}" | grep . | median)
ref_cpu=$(tr ' ' '\n' <<<"${cpus[$REFERENCE]:-}" | { grep . || echo 0; } | median)
for loc in "${LOCATIONS[@]}"; do
  r=$(tr ' ' '\n' <<<"${rates[$loc]}" | grep . | median)
  c=$(tr ' ' '\n' <<<"${cpus[$loc]}" | grep . | median)
  awk -v loc="$loc" -v r="$r" -v c="$c" -v p="$base_cpu" -v l="$ref_cpu" -v ref="$REFERENCE" -v base="$BASE" 'BEGIN {
    added = c - p; lr = l - p
    printf "median %-18s %7.0f req/s  %6.0f ns worker CPU/req  +%5.0f ns over %s", loc, r, c, added, base
    if (lr > 0) printf "  (%.2fx %s'"'"'s)", added / lr, ref
    printf "\n"
  }'
done

# With several workers (WORKERS=2): one hot key (every worker on one set lock) against 10000
# keys, alternating.
if [ "$WORKERS" -gt 1 ]; then
  echo "== $WORKERS workers: store shm on one hot key vs on 10000 keys"
  hot=() many=()
  for run in $(seq "$RUNS"); do
    read -r h _ <<<"$(rps /shm/)"
    read -r m _ <<<"$(rps /shm-users/)"
    hot+=("$h") many+=("$m")
    echo "run $run: hot key $h req/s   10000 keys $m req/s"
  done
  h=$(printf '%s\n' "${hot[@]}" | median) m=$(printf '%s\n' "${many[@]}" | median)
  awk -v h="$h" -v m="$m" 'BEGIN { printf "median: hot key %.0f req/s, 10000 keys %.0f req/s: %.2fx\n", h, m, m / h }'
fi
