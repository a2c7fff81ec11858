#!/usr/bin/env bash
# Runs every check: formatting, clippy, Rust tests, the Python extension, ruff, mypy, pytest.
# GPU tests (marker `gpu`) are skipped on machines without an NVIDIA GPU.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ZYNTAX_ROOT"

step() { printf '\n==> %s\n' "$*"; }

# The fuzz harnesses (docs/testing.md) run inside `cargo test` and pytest with
# this many cases per property: the bounded run, about two minutes in all.
export ZYNTAX_FUZZ_CASES="${ZYNTAX_FUZZ_CASES:-300}"
export ZYNTAX_PY_FUZZ_CASES="${ZYNTAX_PY_FUZZ_CASES:-60}"

step "dependencies"
scripts/deps.sh
activate_venv

step "cargo fmt --check"
cargo fmt --all -- --check

# The workspace is tested with `compute` (NVPTX backend, CUDA runtime), which
# covers every crate; the default build (CPU only) gets clippy (the Python
# extension must build without `compute` too) and the command's refusal of the
# GPU backends.
step "cargo clippy -D warnings (--features compute)"
cargo clippy --workspace --all-targets --features compute --quiet -- -D warnings

step "cargo test (--features compute)"
cargo test --workspace --features compute --quiet

step "default build without compute: clippy (the Python extension too), and the CLI without GPU backends"
cargo clippy -p zyntax -p zyntax-cli -p zyntax-llvm --all-targets --quiet -- -D warnings
cargo clippy -p zyntax-python --all-targets --quiet -- -D warnings
cargo test -p zyntax -p zyntax-cli --quiet

if [[ "${ZYNTAX_DROP_DEBUG_BUILD:-0}" == 1 ]]; then
    step "dropping target/debug (nothing after this point uses it; .ci/run sets this)"
    rm -rf target/debug
fi

step "build the Python extension ($ZYNTAX_PY_PROFILE profile)"
scripts/build-python.sh

step "ruff"
ruff check python tests/python examples benches
ruff format --check python tests/python examples benches

step "mypy"
mypy python/zyntax
python -m mypy.stubtest zyntax._native --allowlist .mypy-stubtest-allowlist

step "packaging: release wheel into fresh venvs (with and without [compute])"
scripts/smoke_wheel.sh

# Two runs: tests/gpu and tests/python each have a conftest.py whose names
# their tests import (`from conftest import ...`); in one run, one of the two
# would shadow the other. The Python suite goes last, so that the test
# runner's summary closes the output.
step "pytest tests/gpu (GPU tests skip without a device)"
python -m pytest -q tests/gpu
step "pytest tests/python"
python -m pytest -q tests/python
