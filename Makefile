# slidewin: `make demo` runs the demo, `make test` runs every test of the project.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: test test-rust test-deps demo deps

deps:
	scripts/deps.sh all

test: test-rust

# Tools the Rust tests start (redis-server for tests/tests/redis_*.rs).
test-deps:
	scripts/deps.sh redis

test-rust: test-deps
	$(CARGO) build -p slidewin --no-default-features
	$(CARGO) test --workspace --all-features

demo:
	$(CARGO) run -q -p slidewin --example demo
