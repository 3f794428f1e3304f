#!/usr/bin/env bash
# Builds the native module, target/release/ngx_http_slidewin_module.so, against an nginx
# source tree configured like the nginx that will load it (dynamic modules must match it).
#   NGINX_BUILD_DIR=/path/to/nginx-1.28.0/objs scripts/build-nginx-module.sh   # any configured tree
#   scripts/build-nginx-module.sh                                              # Debian's nginx
#   VENDORED=1 scripts/build-nginx-module.sh      # the current upstream nginx, from nginx-src
# Without NGINX_BUILD_DIR it configures Debian's nginx-dev source (/usr/share/nginx/src) with
# the flags Debian built its nginx with (conf_flags; --with-compat) in target/nginx-dev.
# VENDORED=1 builds the nginx the ngx crate's `vendored` feature carries (nginx-src) and the
# module against it: target/nginx-vendored/{nginx,ngx_http_slidewin_module.so}.
set -euo pipefail
cd "$(dirname "$0")/.."
CARGO=${CARGO:-cargo}

if [ "${VENDORED:-0}" = 1 ]; then
  scripts/deps.sh nginx-module
  out=target/nginx-vendored
  $CARGO build --release --manifest-path crates/slidewin-nginx/Cargo.toml --features vendored \
    --target-dir "$out"
  cp "$out/release/libngx_http_slidewin_module.so" "$out/ngx_http_slidewin_module.so"
  binary=$(ls -t "$out"/release/build/nginx-sys-*/out/objs/nginx | head -1)
  ln -sf "$PWD/$binary" "$out/nginx"
  echo "built $out/ngx_http_slidewin_module.so against $("$out/nginx" -v 2>&1)"
  exit 0
fi

if [ -z "${NGINX_BUILD_DIR:-}" ]; then
  scripts/deps.sh nginx-module
  tree=$PWD/target/nginx-dev
  src=/usr/share/nginx/src
  # Configure once per nginx-dev version (an apt upgrade changes conf_flags or the source).
  if ! cmp -s "$src/conf_flags" "$tree/conf_flags" || [ ! -f "$tree/objs/ngx_auto_config.h" ]; then
    rm -rf "$tree" && mkdir -p "$tree"
    cp -r "$src/." "$tree/"
    (cd "$tree" && source ./conf_flags && ./configure "${NGX_CONF_FLAGS[@]}" > configure.log 2>&1) \
      || { echo "build-nginx-module: configure failed, see $tree/configure.log" >&2; exit 1; }
  fi
  export NGINX_BUILD_DIR=$tree/objs
fi

$CARGO build --release --manifest-path crates/slidewin-nginx/Cargo.toml --target-dir target
cp target/release/libngx_http_slidewin_module.so target/release/ngx_http_slidewin_module.so
echo "built target/release/ngx_http_slidewin_module.so (against $NGINX_BUILD_DIR)"
