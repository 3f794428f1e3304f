# slidewin: `make demo` runs the demo, `make test` runs every test of the project.
SHELL := /bin/bash
CARGO ?= cargo

.PHONY: test test-rust demo deps

deps:
	scripts/deps.sh all

test: test-rust

test-rust:
	$(CARGO) build -p slidewin --no-default-features
	$(CARGO) test --workspace --all-features

demo:
	$(CARGO) run -q -p slidewin --example demo
