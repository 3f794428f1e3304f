#!/usr/bin/env bash
# The language-model layer's cost in nginx (BENCHMARKS.md, "Token limits"), in instructions
# per request under valgrind's callgrind (see scripts/bench-nginx-instructions.sh), each front
# server of nginx/bench-llm.conf in an nginx of its own, side by side in one run:
#   a chat request of ~1 KB answered in JSON: no limit (plain-json), a request-count limit
#   (count-json: enforce), resty.slidewin.llm (token-json: body read, bounded, rewritten,
#   reserved; answer read; settled);
#   a 1 MiB event stream: no limit (plain-sse1), resty.slidewin.llm (token-sse1).
# Each counts the stand-in upstream's share too (the same for each); the differences are the
# layers' own.
# usage: scripts/bench-llm.sh [N=500]   (env: PORT, NGINX)
set -euo pipefail
cd "$(dirname "$0")/.."
N=${1:-500}
PORT=${PORT:-18600}
WORKERS=1

source scripts/bench-lib.sh
callgrind_setup bench-llm.conf /
body=$callgrind_out/body.json
content=$(printf 'Summarize the following text in three sentences. %.0s' $(seq 16))
printf '{"model":"gpt-4o-mini","messages":[{"role":"system","content":"You are terse."},{"role":"user","content":"%s"}],"max_tokens":400,"temperature":0.2}' \
  "$content" >"$body"
stream=$callgrind_out/stream.json
sed 's/,"temperature"/,"stream":true,"temperature"/' "$body" >"$stream"
export REQUEST_PATH=/v1/chat/completions
count() { BODY_FILE=$1 callgrind_per_request bench-llm.conf / "$2" "$N"; }

echo "== callgrind, $N requests per server, an nginx each ($(date -u +%FT%TZ)); request body $(wc -c <"$body") bytes"
plain=$(count "$body" plain-json)
count_limit=$(count "$body" count-json)
tokens=$(count "$body" token-json)
printf "%-11s %12s %14s\n" server "instr/req" "over plain"
printf "%-11s %12d %14s\n" plain-json "$plain" -
printf "%-11s %12d %14d\n" count-json "$count_limit" "$((count_limit - plain))"
printf "%-11s %12d %14d\n" token-json "$tokens" "$((tokens - plain))"
echo "token limit over request-count limit: $(awk -v t=$((tokens - plain)) -v c=$((count_limit - plain)) 'BEGIN { printf "%.2fx", t / c }')"
plain_sse=$(count "$stream" plain-sse1)
tokens_sse=$(count "$stream" token-sse1)
printf "%-11s %12d %14s\n" plain-sse1 "$plain_sse" -
printf "%-11s %12d %14d\n" token-sse1 "$tokens_sse" "$((tokens_sse - plain_sse))"
echo "event stream read and settled: $((tokens_sse - plain_sse)) instructions per MiB ($(awk -v d=$((tokens_sse - plain_sse)) 'BEGIN { printf "%.2f", d / 1048576 }') per byte)"
