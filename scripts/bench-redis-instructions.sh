#!/usr/bin/env bash
# Instructions per EVALSHA of the rule script inside redis-server, under valgrind's callgrind:
# reproducible to about 1% where `INFO commandstats`' usec_per_call moves by tens of percent
# with the machine's load (BENCHMARKS.md, "Memory and CPU per decision"). One redis-server
# holds two versions of lua/redis/: BEFORE's (another checkout) and this checkout's; without
# BEFORE, this checkout's twice, one with a comment added (an A/A run: the method's own
# spread). A fixed trace, as slidewin-redis-bench's CPU part: call i on key cpu{i mod 1000} at
# now_ms = START + i/10; W calls of warm-up, then N counted between a zero and a dump of
# callgrind's counters. Per rule, ROUNDS rounds of before then after, each after a FLUSHALL.
# usage: [BEFORE=DIR] scripts/bench-redis-instructions.sh [ROUNDS=2] [N=5000] [W=5000]
#   (env: PORT, RULES="log buckets counter two-logs")
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${1:-2}; N=${2:-5000}; W=${3:-5000}
PORT=${PORT:-18793}
scripts/deps.sh redis
command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
dir=$(mktemp -d /tmp/slidewin-redis-cg-XXXXXX)
valgrind --tool=callgrind --callgrind-out-file="$dir/cg" redis-server --port "$PORT" --save '' \
  --appendonly no --dir "$dir" >"$dir/log" 2>&1 &
rpid=$!
trap 'kill $rpid 2>/dev/null || true; wait $rpid 2>/dev/null || true; rm -rf "$dir"' EXIT
for _ in $(seq 300); do redis-cli -p "$PORT" ping >/dev/null 2>&1 && break; sleep 0.2; done
source_of() { cat "$1"/lua/redis/{args,entries,counter,rule}.lua; }
if [ -n "${BEFORE:-}" ]; then
  before=$(redis-cli -p "$PORT" SCRIPT LOAD "$(source_of "$BEFORE")")
else
  before=$(redis-cli -p "$PORT" SCRIPT LOAD "$(source_of .; echo '-- a/a')")
fi
after=$(redis-cli -p "$PORT" SCRIPT LOAD "$(source_of .)")
echo "== redis-server under callgrind, $N EVALSHA per figure after $W ($(date -u +%FT%TZ)); before ${BEFORE:-. (A/A)}"

# trace SHA FROM COUNT ARGS...: the calls FROM..FROM+COUNT-1 in RESP, for redis-cli --pipe.
trace() {
  python3 - "$@" <<'PY'
import sys
sha, start, count, nkeys = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
args = sys.argv[5:]
out = []
for i in range(start, start + count):
    k = f"cpu{i % 1000}"
    keys = [f"bench:{{{k}}}:{j}" for j in range(1, nkeys + 1)]
    cmd = ["EVALSHA", sha, str(nkeys)] + keys + args + ["now_ms", str(1_700_000_000_000 + i // 10)]
    out.append(f"*{len(cmd)}\r\n" + "".join(f"${len(a.encode())}\r\n{a}\r\n" for a in cmd))
sys.stdout.write("".join(out))
PY
}

# count SHA NKEYS ARGS...: instructions per call of the script SHA on the trace.
count() {
  local dump total
  trace "$1" 0 "$W" "${@:2}" >"$dir/warm"
  trace "$1" "$W" "$N" "${@:2}" >"$dir/counted"
  redis-cli -p "$PORT" FLUSHALL >/dev/null
  redis-cli -p "$PORT" --pipe <"$dir/warm" >/dev/null
  callgrind_control -z "$rpid" >/dev/null 2>&1
  redis-cli -p "$PORT" --pipe <"$dir/counted" >"$dir/pipe"
  grep -q 'errors: 0' "$dir/pipe" || { echo "error replies: $(cat "$dir/pipe")" >&2; exit 1; }
  dump=$(($(ls "$dir" | grep -c '^cg\.') + 1))
  callgrind_control -d "$rpid" >/dev/null 2>&1
  # The dump is written when valgrind next polls its commands.
  until [ -s "$dir/cg.$dump" ] && grep -q '^totals:' "$dir/cg.$dump"; do sleep 0.1; done
  total=$(grep -m1 '^summary:' "$dir/cg.$dump" | awk '{print $2}')
  echo $((total / N))
}

declare -A rules=(
  [log]="1 1 log 100 60000"
  [buckets]="1 1 buckets 100 60000 1000"
  [counter]="1 1 counter 100 60000"
  [two-logs]="2 1 log 100 1000 log 1000 10000"
)
for name in ${RULES:-log buckets counter two-logs}; do
  line=$(printf "%-9s" "$name")
  for _ in $(seq "$ROUNDS"); do
    b=$(count "$before" ${rules[$name]})
    a=$(count "$after" ${rules[$name]})
    line+=$(awk -v b="$b" -v a="$a" 'BEGIN { printf "  %d -> %d (%+.2f%%)", b, a, (a / b - 1) * 100 }')
  done
  echo "$line"
done
