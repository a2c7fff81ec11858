# Shared environment for scripts/*.sh (sourced, not executed).
export LLVM_SYS_191_PREFIX="${LLVM_SYS_191_PREFIX:-/usr/lib/llvm-19}"
ZYNTAX_ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
export ZYNTAX_ROOT
# The project's Python environment; created by scripts/deps.sh.
export ZYNTAX_VENV="${ZYNTAX_VENV:-$ZYNTAX_ROOT/.venv}"
# A cheap-to-build optimized profile for the extension used by tests (see Cargo.toml).
export ZYNTAX_PY_PROFILE="${ZYNTAX_PY_PROFILE:-ci}"
activate_venv() {
    # shellcheck disable=SC1091
    source "$ZYNTAX_VENV/bin/activate"
    # ptxas from the nvidia-cuda-nvcc-cu12 wheel, for the PTX validation tests.
    if [[ -z "${ZYNTAX_PTXAS:-}" ]]; then
        local d
        d="$(python -c 'import nvidia.cuda_nvcc as m; print(list(m.__path__)[0])' 2>/dev/null || true)"
        if [[ -n "$d" && -x "$d/bin/ptxas" ]]; then
            export ZYNTAX_PTXAS="$d/bin/ptxas"
        fi
    fi
}
