# Sourced by the nginx benchmarks: start_nginx CONFIG READY_PATH renders nginx/CONFIG into a
# temporary prefix ($prefix) on $PORT with $WORKERS workers, runs it in the background
# ($nginx_pid, stopped and removed on exit) and waits until READY_PATH answers.
# workers: the worker PIDs, sorted.

start_nginx() {
  scripts/deps.sh nginx
  cargo build -q --release -p slidewin-lua
  cargo build -q --release -p slidewin-tests --bin slidewin-nginx
  prefix=$(mktemp -d /tmp/slidewin-bench-XXXXXX)
  target/release/slidewin-nginx "$1" --port "$PORT" --workers "$WORKERS" --prefix "$prefix" 2>/dev/null &
  nginx_pid=$!
  trap 'kill -TERM $nginx_pid 2>/dev/null; wait $nginx_pid 2>/dev/null; rm -rf "$prefix"' EXIT
  for _ in $(seq 100); do curl -sf "127.0.0.1:$PORT$2" >/dev/null && break; sleep 0.1; done
}

workers() { pgrep -P "$(cat "$prefix/logs/nginx.pid")" | sort | tr '\n' ' '; }
