#!/usr/bin/env bash
# Build crates/slidewin-wasm to WebAssembly and bind it into js/pkg/ (ES module, `--target web`,
# with .d.ts types); then vendor what the dashboard page loads into js/dashboard/vendor/.
#
# Uses rustup's wasm32 target when it is installed; otherwise Debian's rustc-web + rust-web-src
# with -Zbuild-std (rustup cannot always download the target). Installs the wasm-bindgen-cli that
# matches the crate's exact wasm-bindgen pin once, into cargo's bin dir.
set -euo pipefail
cd "$(dirname "$0")/.."

target=wasm32-unknown-unknown
profile=wasm-release
export CARGO_TARGET_DIR="$PWD/target/wasm"

# The pin in crates/slidewin-wasm/Cargo.toml: wasm-bindgen = "=X.Y.Z".
bindgen_version=$(sed -n 's/^wasm-bindgen = "=\([0-9.]*\)".*/\1/p' crates/slidewin-wasm/Cargo.toml)
[ -n "$bindgen_version" ] || { echo "build-wasm: no exact wasm-bindgen pin found" >&2; exit 1; }
if [ "$(wasm-bindgen --version 2>/dev/null)" != "wasm-bindgen $bindgen_version" ]; then
  echo "build-wasm: installing wasm-bindgen-cli $bindgen_version (once, a few minutes)"
  # Not --locked: the CLI's lock file may name crate versions newer than the registry serves.
  cargo install wasm-bindgen-cli --version "=$bindgen_version"
fi

scripts/deps.sh wasm
# Without reference types wasm-bindgen keeps JS objects in a JS-side table instead of an
# externref table, which Debian's binaryen (108) would corrupt; the cost is nil at this size.
flags="-Ctarget-feature=-reference-types"
if rustup target list --installed 2>/dev/null | grep -qx "$target"; then
  # Stable std, prebuilt: panics keep their messages (a few KB more than below).
  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$flags" \
    cargo build -p slidewin-wasm --target "$target" --profile "$profile"
else
  # std built from Debian's source, with panics that abort at once (no message formatting).
  CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER=wasm-ld RUSTC=/usr/bin/rustc RUSTC_BOOTSTRAP=1 \
    CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_RUSTFLAGS="$flags -Zunstable-options -Cpanic=immediate-abort" \
    /usr/bin/cargo build -p slidewin-wasm --target "$target" --profile "$profile" \
    -Zbuild-std=std,panic_abort
fi

rm -rf js/pkg
wasm-bindgen --target web --out-dir js/pkg --out-name slidewin --remove-name-section --remove-producers-section \
  "$CARGO_TARGET_DIR/$target/$profile/slidewin_wasm.wasm"
# wasm-bindgen declares `[Symbol.dispose]`, which TypeScript knows only with lib esnext: a
# consumer on es2022 would fail `tsc --strict` in our types (index.js adds the method at run
# time where Symbol.dispose exists).
sed -i '/\[Symbol.dispose\]()/d' js/pkg/slidewin.d.ts
# binaryen's size passes take another ~13% off what LLVM leaves.
wasm-opt -Oz js/pkg/slidewin_bg.wasm -o js/pkg/slidewin_bg.wasm

# The dashboard is static files served as they are: give it the package and the chart library.
vendor=js/dashboard/vendor
rm -rf "$vendor" && mkdir -p "$vendor/pkg"
cp js/index.js "$vendor/"
cp js/pkg/slidewin.js js/pkg/slidewin_bg.wasm "$vendor/pkg/"
cp js/node_modules/uplot/dist/uPlot.esm.js js/node_modules/uplot/dist/uPlot.min.css "$vendor/"
