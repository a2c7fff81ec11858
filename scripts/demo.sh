#!/usr/bin/env bash
# The main job: build zyntax, construct example kernels with the Python builder,
# verify them and print their .zir text (and their PTX where the NVPTX backend
# is compiled in).
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
cd "$ZYNTAX_ROOT"
scripts/deps.sh
scripts/build-python.sh
activate_venv
python examples/saxpy.py
