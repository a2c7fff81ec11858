#!/usr/bin/env bash
# Builds the zyntax extension and installs it (editable) into the project venv.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
activate_venv
cd "$ZYNTAX_ROOT"
# The distribution was named `zyntax` before it became `zyntax-compiler`
# (pyproject.toml): an install under the old name shares files with this one
# (bin/zyntax), so it goes first, and `maturin develop` then installs them anew.
if python -m pip show --quiet zyntax >/dev/null 2>&1; then
    python -m pip uninstall --quiet --yes zyntax
fi
maturin develop --quiet --profile "$ZYNTAX_PY_PROFILE" "$@"
