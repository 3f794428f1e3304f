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
