#!/usr/bin/env bash
# Limits that follow the load (BENCHMARKS.md, "Limits that follow the load"). The upstream of
# nginx/bench-upstream.conf (a FIFO queue before C slots of S_MS ms: capacity C / S_MS req/s)
# behind the limiter nginx of nginx/bench-adaptive.conf, loaded by slidewin-load (open loop,
# uniform arrivals, a client timeout counted from each request's due time). In every scenario
# each variant runs in turn on a drained upstream: no limiter, static rate limits at 0.5x, 1x
# and 2x capacity, and the adaptive limiter when the limiter nginx has one. Prints each run's
# seconds (offered, admitted, goodput, refusals, timeouts, p50/p99 of admitted requests, the
# limit) and, at the end, a table of every run against the capacity and the no-load p99.
#
# usage: scripts/bench-adaptive.sh [SCENARIO ...]
#   overload2x overload5x  offered 2x / 5x capacity
#   halve double           capacity halves (offered 2x) / doubles (offered 3x) at second 10
#   jitter                 offered 0.8x, service times uniform in S x [0.5, 1.5]
#   sustained              offered 3x for 180 s (not in the default list)
# env: C (8), S_MS (40), RUN_SECONDS (30), TIMEOUT_MS (1000), CLIENTS (256), WORKERS (2),
#      PORT (18610), UPSTREAM_PORT (18611), VARIANTS (every one), REPEAT (1: runs of each)
# The adaptive limiter runs the documented config (a limit of 16 to start, min 2, 500 ms intervals),
# from a cold start in every run.
set -euo pipefail
cd "$(dirname "$0")/.."
SCENARIOS=("$@")
[ ${#SCENARIOS[@]} -gt 0 ] || SCENARIOS=(overload2x overload5x halve double jitter)
C=${C:-8}
S_MS=${S_MS:-40}
RUN_SECONDS=${RUN_SECONDS:-30}
TIMEOUT_MS=${TIMEOUT_MS:-1000}
CLIENTS=${CLIENTS:-256}
WORKERS=${WORKERS:-2}
FRONT_PORT=${PORT:-18610}
UPSTREAM_PORT=${UPSTREAM_PORT:-18611}
CAPACITY=$((C * 1000 / S_MS))

source scripts/bench-lib.sh
cargo build -q --release -p slidewin-tests --bin slidewin-load
PORT=$UPSTREAM_PORT WORKERS=1 start_nginx bench-upstream.conf /admin
export SLIDEWIN_UPSTREAM_PORT=$UPSTREAM_PORT SLIDEWIN_BENCH_CAPACITY=$CAPACITY
PORT=$FRONT_PORT start_nginx bench-adaptive.conf /metrics

# Variants: "name path probe-metric" (the metric that holds its limit in /metrics).
ALL_VARIANTS=("none /none -")
for k in 0.5 1 2; do
  ALL_VARIANTS+=("static-${k}x /static/static-${k}x slidewin_bench_limit{limiter=\"static-${k}x\"}")
done
if curl -sf "127.0.0.1:$FRONT_PORT/adaptive" >/dev/null 2>&1; then
  ALL_VARIANTS+=("adaptive /adaptive slidewin_adaptive_limit{limiter=\"adaptive\"}")
fi

admin() { curl -sf "127.0.0.1:$UPSTREAM_PORT/admin?$1"; }
# Waits (up to 180 s) until the upstream has had nothing in service or queued, and served
# nothing more, for 2 s: work whose clients left is still done (also what sat in its accept
# queue while its connections were all in use), and must not slow the next run down.
drain() {
  local state previous=""
  for _ in $(seq 90); do
    state=$(admin "")
    if grep -q '"busy":0,"queued":0' <<<"$state" && [ "$state" = "$previous" ]; then return; fi
    previous=$state
    sleep 2
  done
  echo "upstream not drained after 180 s: $state" >&2
}

# A fresh controller at the documented starting limit: its state and counts out of the dict, the
# limit back to 16 (what a restarted nginx with a new dict does).
cold_start() {
  curl -sf -X POST "127.0.0.1:$FRONT_PORT/adaptive/reset" >/dev/null
}

# run SCENARIO NAME PATH METRIC RATE SECONDS MEASURE JITTER REFERENCE [--at ...]: one run, its
# summary appended to $results as "scenario name reference=... from=... offered=...".
results=$(mktemp)
run() {
  local scenario=$1 name=$2 path=$3 metric=$4 rate=$5 seconds=$6 measure=$7 jitter=$8 reference=$9
  shift 9
  drain
  admin "c=$C&s_ms=$S_MS&jitter=$jitter" >/dev/null
  local probe=()
  [ "$metric" = - ] || probe=(--probe-path /metrics --probe-metric "$metric")
  echo "== $scenario / $name: $rate req/s for $seconds s, capacity $CAPACITY req/s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  target/release/slidewin-load --port "$FRONT_PORT" --path "$path" --rate "$rate" \
    --seconds "$seconds" --timeout-ms "$TIMEOUT_MS" --clients "$CLIENTS" --measure "$measure" \
    "${probe[@]}" "$@" >"$results.run"
  cat "$results.run"
  grep '^summary' "$results.run" | sed "s|^summary|$scenario $name reference=$reference|" >>"$results"
}

echo "== $(date -u +%FT%TZ), $(nproc) cores, $(uptime)"
echo "== capacity $CAPACITY req/s (c=$C, S=$S_MS ms), client timeout $TIMEOUT_MS ms, $CLIENTS clients, $WORKERS limiter workers"
run noload none /none - $((CAPACITY / 5)) 10 2:10 0 $((CAPACITY / 5))
base_p99=$(awk '$1 == "noload" { for (i = 3; i <= NF; i++) if ($i ~ /^p99=/) print substr($i, 5) }' "$results")

for scenario in "${SCENARIOS[@]}"; do
  seconds=$RUN_SECONDS jitter=0 at=()
  case $scenario in
    overload2x) rate=$((2 * CAPACITY)) measure=10:$seconds reference=$CAPACITY ;;
    overload5x) rate=$((5 * CAPACITY)) measure=10:$seconds reference=$CAPACITY ;;
    halve)
      rate=$((2 * CAPACITY)) measure=15:$seconds reference=$((CAPACITY / 2))
      at=(--at "10:$UPSTREAM_PORT:/admin?c=$((C / 2))") ;;
    double)
      rate=$((3 * CAPACITY)) measure=20:$seconds reference=$((2 * CAPACITY))
      at=(--at "10:$UPSTREAM_PORT:/admin?c=$((2 * C))") ;;
    jitter) rate=$((CAPACITY * 8 / 10)) measure=0:$seconds reference=$((CAPACITY * 8 / 10)) jitter=0.5 ;;
    sustained) seconds=180 rate=$((3 * CAPACITY)) measure=30:180 reference=$CAPACITY ;;
    *) echo "unknown scenario $scenario" >&2; exit 2 ;;
  esac
  for variant in "${ALL_VARIANTS[@]}"; do
    read -r name path metric <<<"$variant"
    if [ -n "${VARIANTS:-}" ] && ! grep -qw -- "$name" <<<"$VARIANTS"; then continue; fi
    for _ in $(seq "${REPEAT:-1}"); do
      [ "$name" = adaptive ] && cold_start
      run "$scenario" "$name" "$path" "$metric" "$rate" "$seconds" "$measure" "$jitter" "$reference" "${at[@]}"
    done
  done
done

echo
echo "== results: goodput over the reference capacity, admitted p99 over the no-load p99 ($base_p99 ms)"
echo "| scenario | variant | seconds | offered/s | admitted/s | goodput/s | goodput / capacity | p99 ms | p99 / no-load | refused | limit (min–max, mean) |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
awk -v base="$base_p99" '$1 != "noload" {
  for (i = 3; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
  ratio = (v["p99"] == "-") ? "-" : sprintf("%.2f", v["p99"] / base)
  printf "| %s | %s | %s–%s | %s | %s | %s | %.2f | %s | %s | %.3f%% | %s–%s, %s |\n",
    $1, $2, v["from"], v["to"], v["offered"], v["admitted"], v["goodput"], v["goodput"] / v["reference"],
    v["p99"], ratio, 100 * v["refused_ratio"], v["limit_min"], v["limit_max"], v["limit_mean"]
}' "$results"
rm -f "$results" "$results.run"
