"""Host (CPU) functions for the latency-critical path: ``critical_path`` and
``no_alloc`` (proven by the verifier: nothing reachable allocates), optimized
with ``Olatency``.

``dot`` is a plain dot product; ``clamp_score`` calls it and clamps the result.
Run it to print the .zir.
"""

from zyntax import hir


def build() -> hir.Module:
    m = hir.Module("host_latency")
    p64 = hir.ptr("generic", hir.f64)
    fast = {"critical_path": True, "no_alloc": True, "opt_level": "Olatency"}

    with m.host_function("dot", [p64, p64, hir.u64], [hir.f64], **fast) as b:
        x, y, n = b.params
        with b.loop(0, n, carry=[b.const(0.0, hir.f64)]) as lp:
            i = lp.index
            (acc,) = lp.carried
            lp.next(b.fma(b.load(b.ptr_add(x, i)), b.load(b.ptr_add(y, i)), acc))
        b.ret(*lp.results)

    with m.host_function(
        "clamp_score", [p64, p64, hir.u64, hir.f64, hir.f64], [hir.f64], **fast
    ) as b:
        x, y, n, lo, hi = b.params
        s = b.call("dot", x, y, n)
        b.ret(b.min(b.max(s, lo), hi))
    return m


if __name__ == "__main__":
    module = build()
    module.verify()
    print(module.to_zir(), end="")
