#!/usr/bin/env bash
# BENCHMARKS.md "Leases": store = "redis" per request next to leases and next to store "shm",
# one hot key and 10,000 keys (req/s, CPU per request of nginx's workers and of redis-server,
# script calls per 1,000 requests), then the latency each adds with Redis a 0.5 ms round trip
# away. Starts its own redis-server and nginx on free loopback ports. About 4 minutes.
# Usage: scripts/bench-leases.sh [cpu|latency|all] [rounds (3)]
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh redis nginx
cargo build --release -q -p slidewin-lua
exec cargo run --release -q -p slidewin-tests --bin slidewin-lease-bench -- "$@"
