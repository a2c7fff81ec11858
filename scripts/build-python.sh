#!/usr/bin/env bash
# Builds the zyntax extension and installs it (editable) into the project venv.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
activate_venv
cd "$ZYNTAX_ROOT"
maturin develop --quiet --profile "$ZYNTAX_PY_PROFILE" "$@"
