"""Polynomial evaluation with the coefficients in a module `__constant__`
table and a `__device__` call counter (issue 12 item 7).

out[i] = c0 + c1 x + ... + c7 x^7 by Horner's rule, with `coef` a constant
global the host may rewrite by name (`Module.write_global("coef", ...)`), and
`evaluated`, a device global each thread adds 1 to, read back by name. Run it
to print the .zir.
"""

from zyntax import hir

DEGREE = 7
#: Taylor coefficients of exp(x) (the table's initial value).
COEF = [1.0, 1.0, 0.5, 1.0 / 6, 1.0 / 24, 1.0 / 120, 1.0 / 720, 1.0 / 5040]


def build() -> hir.Module:
    m = hir.Module("poly_constants", targets=["sm_70", "sm_80", "sm_90"])
    m.global_var("coef", hir.f32, DEGREE + 1, space="constant", init=COEF)
    m.global_var("evaluated", hir.u32, 1, space="global")
    f32p = hir.ptr("global", hir.f32)
    with m.kernel("poly", [f32p, f32p, hir.u32], max_threads=256) as b:
        x, out, n = b.params
        i = b.block_idx() * b.block_dim() + b.thread_idx()
        with b.if_(b.lt(i, n)):
            coef = b.global_addr("coef")
            xi = b.load(b.ptr_add(x, i))
            acc = b.load(b.ptr_add(coef, DEGREE))
            for k in range(DEGREE - 1, -1, -1):
                acc = b.fma(acc, xi, b.load(b.ptr_add(coef, k)))
            b.store(b.ptr_add(out, i), acc)
            b.atomic_add(b.global_addr("evaluated"), 1)
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
