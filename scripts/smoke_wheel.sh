#!/usr/bin/env bash
# Packaging check: builds the release abi3 wheel, installs it into fresh
# virtual environments (with and without the `compute` extra) and runs a smoke
# test in each: compile saxpy to PTX (and, with `compute`, validate it with
# ptxas, from Python and with `zyntax compile --validate`). The fresh venvs are
# used *un-activated*, with a PATH that holds no other Python or ptxas, as a
# user who runs `venv/bin/python` does: ptxas must be found through the running
# interpreter. Also checks that the native module carries no
# libLLVM/libz3/libxml2 dependency and prints the wheel's size.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
activate_venv
cd "$ZYNTAX_ROOT"

out="$(mktemp -d)"
trap 'rm -rf "$out"' EXIT
maturin build --release --quiet -o "$out/dist"
whl="$(ls "$out"/dist/zyntax_compiler-*.whl)"
echo "wheel: $(basename "$whl") ($(du -h "$whl" | cut -f1))"

mkdir "$out/unpacked"
python -m zipfile -e "$whl" "$out/unpacked"
if ldd "$out"/unpacked/zyntax/_native*.so | grep -E 'libLLVM|libz3|libxml2'; then
    echo "smoke: the native module links LLVM/z3/libxml2 dynamically" >&2
    exit 1
fi

smoke='
import importlib.metadata, sys, zyntax
from zyntax import hir
assert zyntax.build_info()["compute"], "the wheel is built with the compute feature"
assert importlib.metadata.version("zyntax-compiler") == zyntax.__version__, "the distribution"
m = hir.Module("saxpy", targets=["sm_80"])
g = hir.ptr("global", hir.f32)
with m.kernel("saxpy", [hir.u32, hir.f32, g, g]) as b:
    n, a, x, y = b.params
    i = b.block_idx("x") * b.block_dim("x") + b.thread_idx("x")
    with b.if_(i < n):
        yi = b.ptr_add(y, i)
        b.store(yi, b.fma(a, b.load(b.ptr_add(x, i)), b.load(yi)))
ptx = zyntax.compile(m, backend="nvptx", arch="sm_80")
assert ".entry saxpy" in ptx and "fma.rn.f32" in ptx, ptx
if sys.argv[1] == "compute":
    zyntax.validate_ptx(ptx, "sm_80")
print("smoke ok:", sys.argv[1], zyntax.__version__)
'
cp examples/saxpy.zir "$out/saxpy.zir"
# Not activated: no VIRTUAL_ENV, no venv (ours or theirs) on PATH, no ZYNTAX_PTXAS.
bare=(env -u ZYNTAX_PTXAS -u ZYNTAX_PYTHON -u VIRTUAL_ENV -u PYTHONPATH PATH=/usr/bin:/bin)
for extra in compute plain; do
    python -m venv "$out/venv-$extra"
    # The distribution is `zyntax-compiler` (pyproject.toml); the import stays `zyntax`.
    spec="zyntax-compiler @ file://$whl"
    [[ $extra == compute ]] && spec="zyntax-compiler[compute] @ file://$whl"
    "$out/venv-$extra/bin/python" -m pip install -q --disable-pip-version-check "$spec"
    (cd "$out" && "${bare[@]}" "$out/venv-$extra/bin/python" -c "$smoke" "$extra")
    (cd "$out" && "${bare[@]}" "$out/venv-$extra/bin/zyntax" --help >/dev/null)
    if [[ $extra == compute ]]; then
        (cd "$out" && "${bare[@]}" "$out/venv-$extra/bin/zyntax" compile --validate saxpy.zir >/dev/null)
    fi
done
