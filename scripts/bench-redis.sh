#!/usr/bin/env bash
# BENCHMARKS.md "Redis store": wrk through store = "redis" vs a bare EVALSHA, Redis memory per
# key (1-hour window at 10 requests/s) and Redis CPU per decision. Starts its own redis-server
# and nginx on free loopback ports, stops them at the end. Takes about 6 minutes (all parts).
# Also: Redis CPU per refused buckets call next to an admitted one (refusals) and req/s through
# a 3-master Redis Cluster next to one redis-server (cluster); Redis CPU per decision of the rule
# script next to the seed's ZSET script, one hot key (cost).
# Usage: scripts/bench-redis.sh [throughput|redis|refusals|cluster|cost]   (default: all parts)
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh redis nginx
cargo build --release -q -p slidewin-lua
exec cargo run --release -q -p slidewin-tests --bin slidewin-redis-bench -- "$@"
