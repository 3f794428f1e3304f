# Sourced by the nginx benchmarks: start_nginx CONFIG READY_PATH renders nginx/CONFIG into a
# temporary prefix ($prefix) on $PORT with $WORKERS workers, runs it in the background
# ($nginx_pid) and waits until READY_PATH answers. Called again (with another PORT) it starts
# one more; every one is stopped and its prefix removed on exit.
# workers: the worker PIDs of the last one started, sorted.

started_nginx=()
stop_started_nginx() {
  local entry
  for entry in "${started_nginx[@]}"; do
    # An nginx already stopped (the script quit it) is no error: under set -e a failing
    # command in the EXIT trap would become the script's exit status.
    kill -TERM "${entry%%:*}" 2>/dev/null || true
    wait "${entry%%:*}" 2>/dev/null || true
    rm -rf "${entry#*:}"
  done
}

start_nginx() {
  scripts/deps.sh nginx
  cargo build -q --release -p slidewin-lua
  cargo build -q --release -p slidewin-tests --bin slidewin-nginx
  scripts/build-nginx-module.sh >/dev/null
  start_nginx_in . "$@"
}

# start_nginx_in CHECKOUT CONFIG READY_PATH: as start_nginx, with the nginx, Lua tree and module
# of another checkout (built already), to compare two commits in one run.
start_nginx_in() {
  prefix=$(mktemp -d /tmp/slidewin-bench-XXXXXX)
  "$1/target/release/slidewin-nginx" "$2" --port "$PORT" --workers "$WORKERS" --prefix "$prefix" 2>/dev/null &
  nginx_pid=$!
  started_nginx+=("$nginx_pid:$prefix")
  trap stop_started_nginx EXIT
  for _ in $(seq 100); do curl -sf "127.0.0.1:$PORT$3" >/dev/null && break; sleep 0.1; done
}

workers() { pgrep -P "$(cat "$prefix/logs/nginx.pid")" | sort | tr '\n' ' '; }

# callgrind_setup CONFIG READY_PATH: renders nginx/CONFIG into $prefix (an nginx started and
# stopped again, its files kept) for callgrind_per_request; everything is removed on exit.
callgrind_setup() {
  command -v valgrind >/dev/null || { echo "needs valgrind (apt-get install valgrind)" >&2; exit 1; }
  start_nginx "$1" "$2"
  kill -QUIT "$(cat "$prefix/logs/nginx.pid")"
  wait "$nginx_pid" 2>/dev/null || true
  while curl -sf "127.0.0.1:$PORT$2" >/dev/null; do sleep 0.1; done
  callgrind_out=$(mktemp -d /tmp/slidewin-callgrind-XXXXXX)
  callgrind_pid=
  trap 'kill $callgrind_pid 2>/dev/null || true; wait $callgrind_pid 2>/dev/null || true; rm -rf "$callgrind_out"; stop_started_nginx' EXIT
}

# callgrind_per_request CONFIG READY_PATH SERVER N [CALLGRIND-OPTION]: instructions per
# request of SERVER (CONFIG's server_name, sent as Host), in a fresh nginx of one process under
# callgrind: N keep-alive requests after 200 of warm-up, counted between a zero and a dump of
# callgrind's counters, of REQUEST_PATH (default /). With BODY_FILE set, each POSTs that file.
callgrind_per_request() {
  local conf=$1 ready=$2 server=$3 n=$4 option=${5:-} total
  local curl=(curl -s -H "Host: $server" -o /dev/null)
  [ -n "${BODY_FILE:-}" ] && curl+=(-H "Content-Type: application/json" --data-binary "@$BODY_FILE")
  valgrind --tool=callgrind --callgrind-out-file="$callgrind_out/callgrind.$server" ${option:+"$option"} \
    "${NGINX:-nginx}" -p "$prefix" -c "$prefix/conf/$conf" \
    -g "master_process off;" >"$callgrind_out/valgrind.log" 2>&1 &
  callgrind_pid=$!
  for _ in $(seq 300); do curl -sf "127.0.0.1:$PORT$ready" >/dev/null && break; sleep 0.2; done
  "${curl[@]}" "127.0.0.1:$PORT${REQUEST_PATH:-/}?[1-200]"
  callgrind_control -z "$callgrind_pid" >/dev/null 2>&1
  "${curl[@]}" "127.0.0.1:$PORT${REQUEST_PATH:-/}?[1-$n]"
  callgrind_control -d "$callgrind_pid" >/dev/null 2>&1
  # The dump is written when valgrind next polls its commands.
  until [ -s "$callgrind_out/callgrind.$server.1" ] && grep -q '^totals:' "$callgrind_out/callgrind.$server.1"; do
    sleep 0.1
  done
  total=$(grep -m1 '^summary:' "$callgrind_out/callgrind.$server.1" | awk '{print $2}')
  kill -QUIT "$callgrind_pid"
  wait "$callgrind_pid" 2>/dev/null || true
  rm -f "$callgrind_out"/callgrind."$server"*
  echo $((total / n))
}
