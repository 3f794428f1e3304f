#!/usr/bin/env bash
# Install what a part of the project needs, skipping what is already there (repeat runs stay fast).
# Usage: scripts/deps.sh GROUP...   (groups below; `all` = every group)
set -euo pipefail

declare -A APT=(
  # tzdata: the system zoneinfo the calendar tests (crates/slidewin/tests/calendar.rs) read.
  [rust]="tzdata"
  [nginx]="nginx libnginx-mod-http-lua libnginx-mod-http-ndk lua-resty-core lua-resty-lrucache luajit2 lua-nginx-redis wrk curl"
  [redis]="redis-server openssl"  # openssl: the TLS tests make a CA and a server certificate
  [wasm]="rustc-web cargo-web rust-web-src lld binaryen"
  [browser]="chromium"
  [luarocks]="luarocks"
  # promtool (tests/tests/nginx_top.rs checks /metrics with `promtool check metrics`).
  [promtool]="prometheus"
  # The native module's build: Debian's configured-ready nginx source (nginx-dev, which
  # pulls in the pcre2, ssl and zlib headers) and libclang for the ngx crate's bindgen.
  [nginx-module]="nginx nginx-dev clang libclang-dev"
)

apt_missing() {
  local missing=()
  for pkg in "$@"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
  done
  echo "${missing[@]:-}"
}

groups=("$@")
[ "${groups[0]:-all}" = all ] && groups=("${!APT[@]}")
wanted=()
for g in "${groups[@]}"; do
  [ -n "${APT[$g]+x}" ] || { echo "deps.sh: unknown group '$g' (have: ${!APT[*]})" >&2; exit 2; }
  wanted+=(${APT[$g]})
done
missing=$(apt_missing "${wanted[@]:-}")
if [ -n "$missing" ]; then
  echo "deps.sh: installing $missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq $missing >/dev/null
fi
