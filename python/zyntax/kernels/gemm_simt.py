"""fp32 SGEMM without tensor cores: register-tiled FFMA (the ``simt`` variant).

Written with the HIR builder. A block of 256 threads computes a 128 x 128
output tile; each thread owns an 8 x 8 sub-tile split as 2 x 2 groups of
4 x 4 (rows ``4*ty + {0, 64}``, columns ``4*tx + {0, 64}``) so that the
16-byte shared loads of a quarter warp fall on distinct banks. K advances
by ``bk`` = 8: both tiles are staged K-major (``As[k][m]``, ``Bs[k][n]``) in
two shared buffers; the next tile is read into registers while the current
one is multiplied, then stored into the other buffer (one barrier per tile).

Tails and unaligned operands are read element by element from clamped
addresses and zero-filled, as in the mma_sync variant.
"""

from __future__ import annotations

from dataclasses import dataclass

from zyntax import hir
from zyntax.kernels._rows import assign, read, variables
from zyntax.kernels.gemm_mma_sync import _SCALAR, activation, zeros


@dataclass(frozen=True)
class Config:
    bm: int = 128
    bn: int = 128
    bk: int = 8
    group_m: int = 8

    @property
    def threads(self) -> int:
        return 256

    @property
    def shared_bytes(self) -> int:
        return 0


@dataclass(frozen=True)
class Spec:
    a_layout: str
    b_layout: str
    a_aligned: bool
    b_aligned: bool
    out_dtype: str
    bias_dtype: str | None
    activation: str | None


KERNEL = "gemm_simt"


def build(cfg: Config, spec: Spec) -> hir.Module:
    """The kernel ``gemm_simt(a, b, out, bias, M, N, K, lda, ldb, ldc)``."""
    assert (cfg.bm, cfg.bn, cfg.bk) == (128, 128, 8)
    f32x4 = hir.vec(hir.f32, 4)
    out_t = _SCALAR[spec.out_dtype]
    bias_t = _SCALAR[spec.bias_dtype or "f32"]
    # bf16 outputs or bias need sm_80; f32 and f16 run from sm_70 on.
    uses_bf16 = "bf16" in (spec.out_dtype, spec.bias_dtype)
    m = hir.Module(KERNEL, targets=(["sm_80"] if uses_bf16 else ["sm_70", "sm_80"]) + ["sm_90"])
    params = [
        hir.ptr("global", hir.f32),
        hir.ptr("global", hir.f32),
        hir.ptr("global", out_t),
        hir.ptr("global", bias_t),
    ] + [hir.u32] * 6
    nt = cfg.threads
    with m.kernel(KERNEL, params, max_threads=nt) as b:
        pa, pb, pc, pbias, dim_m, dim_n, dim_k, lda, ldb, ldc = b.params
        # Two buffers of As[bk][bm] then Bs[bk][bn], in float4s.
        tile4 = cfg.bk * cfg.bm // 4
        smem = b.shared_alloc(f32x4, 2 * 2 * tile4)
        sflat = b.ptr_cast(smem, hir.ptr("shared", hir.f32))
        zero_f32x4 = zeros(b, hir.f32, 4)
        tid = b.thread_idx()
        tx, ty = tid & 15, tid >> 4

        pid = b.block_idx()
        tiles_m = (dim_m + (cfg.bm - 1)) // cfg.bm
        tiles_n = (dim_n + (cfg.bn - 1)) // cfg.bn
        per_group = tiles_n * cfg.group_m
        first_m = (pid // per_group) * cfg.group_m
        gsize = b.min(tiles_m - first_m, b.const(cfg.group_m, hir.u32))
        pid_m = first_m + (pid % per_group) % gsize
        pid_n = (pid % per_group) // gsize
        row0, col0 = pid_m * cfg.bm, pid_n * cfg.bn

        def fetch(
            gp: hir.Value,
            ld: hir.Value,
            k_contig: bool,
            outer0: hir.Value,
            outer_ext: hir.Value,
            k0: hir.Value,
            aligned: bool,
        ) -> tuple[hir.Value, hir.Value, hir.Value]:
            """This thread's 4 consecutive elements of the next tile of an
            operand: (value, k offset in tile, outer offset in tile)."""
            if k_contig:  # stored [outer][k]: 128 rows x 2 float4
                r, c = tid >> 1, (tid & 1) * 4
                srow0, scol0, srow_ext, scol_ext = outer0, k0, outer_ext, dim_k
                kt_off, out_off = c, r
            else:  # stored [k][outer]: 8 rows x 32 float4
                r, c = tid >> 5, (tid & 31) * 4
                srow0, scol0, srow_ext, scol_ext = k0, outer0, dim_k, outer_ext
                kt_off, out_off = r, c
            grow, gcol = srow0 + r, scol0 + c

            def by_elements() -> hir.Value:
                row_ok = grow < srow_ext
                roff = b.min(grow, srow_ext - 1) * ld
                v = zero_f32x4
                for e in range(4):
                    col = gcol + e
                    ok = b.and_(row_ok, col < scol_ext)
                    x = b.load(b.ptr_add(gp, roff + b.min(col, scol_ext - 1)))
                    v = b.insert(v, b.select(ok, x, b.const(0.0, hir.f32)), e)
                return v

            if not aligned:
                return by_elements(), kt_off, out_off
            full = b.and_(grow < srow_ext, gcol + 4 <= scol_ext)
            with b.if_else(full, results=[f32x4]) as ie:
                with ie.then:
                    p = b.ptr_cast(b.ptr_add(gp, grow * ld + gcol), hir.ptr("global", f32x4))
                    ie.then.yield_(b.load(p))
                with ie.else_:
                    ie.else_.yield_(by_elements())
            return ie.results[0], kt_off, out_off

        a_kc = spec.a_layout == "row"
        b_kc = spec.b_layout == "col"

        def stash(
            buf: hir.Value, part: int, got: tuple[hir.Value, hir.Value, hir.Value], k_contig: bool
        ) -> None:
            """Store fetched elements into tile `part` (0: A, 1: B) of buffer `buf`."""
            v, k_off, o_off = got
            base = (buf * 2 + part) * (tile4 * 4)
            if k_contig:  # 4 consecutive k of one outer index: transpose
                for e in range(4):
                    b.store(b.ptr_add(sflat, base + (k_off + e) * cfg.bm + o_off), b.extract(v, e))
            else:
                p = b.ptr_cast(
                    b.ptr_add(sflat, base + k_off * cfg.bm + o_off), hir.ptr("shared", f32x4)
                )
                b.store(p, v)

        def fetch_both(k0: hir.Value) -> tuple[tuple[hir.Value, hir.Value, hir.Value], ...]:
            fa = fetch(pa, lda, a_kc, row0, dim_m, k0, spec.a_aligned)
            fb = fetch(pb, ldb, b_kc, col0, dim_n, k0, spec.b_aligned)
            return fa, fb

        ktiles = (dim_k + (cfg.bk - 1)) // cfg.bk
        with b.if_(ktiles > 0):  # K = 0: nothing to read, the epilogue writes act(bias)
            fa0, fb0 = fetch_both(b.const(0, hir.u32))
            stash(b.const(0, hir.u32), 0, fa0, a_kc)
            stash(b.const(0, hir.u32), 1, fb0, b_kc)
        b.barrier()
        accs = variables(b, [b.const(0.0, hir.f32)] * 64, "acc")
        with b.for_range(0, ktiles, type=hir.u32) as kt:
            acc = read(b, accs)
            cur = kt & 1
            more = kt + 1 < ktiles
            # Read the next tile into registers before the FMAs (clamped: never out of bounds).
            nxt = b.min(kt + 1, ktiles - 1) * cfg.bk
            fa, fb = fetch_both(nxt)
            abase = (cur * 2) * (tile4 * 4)
            bbase = abase + tile4 * 4
            for kk in range(cfg.bk):
                av, bv = [], []
                for half in range(2):
                    pa4 = b.ptr_cast(
                        b.ptr_add(sflat, abase + kk * cfg.bm + ty * 4 + 64 * half),
                        hir.ptr("shared", f32x4),
                    )
                    x = b.load(pa4)
                    av += [b.extract(x, e) for e in range(4)]
                    pb4 = b.ptr_cast(
                        b.ptr_add(sflat, bbase + kk * cfg.bn + tx * 4 + 64 * half),
                        hir.ptr("shared", f32x4),
                    )
                    y = b.load(pb4)
                    bv += [b.extract(y, e) for e in range(4)]
                for i in range(8):
                    for j in range(8):
                        acc[i * 8 + j] = b.fma(av[i], bv[j], acc[i * 8 + j])
            with b.if_(more):
                stash(cur ^ 1, 0, fa, a_kc)
                stash(cur ^ 1, 1, fb, b_kc)
            b.barrier()
            assign(b, accs, acc)
        acc = read(b, accs)

        for j in range(8):
            col = col0 + tx * 4 + 64 * (j >> 2) + (j & 3)
            bias = None
            if spec.bias_dtype is not None:
                x = b.load(b.ptr_add(pbias, b.min(col, dim_n - 1)))
                bias = b.cast(x, hir.f32) if spec.bias_dtype != "f32" else x
            for i in range(8):
                row = row0 + ty * 4 + 64 * (i >> 2) + (i & 3)
                v = acc[i * 8 + j]
                if bias is not None:
                    v = v + bias
                v = activation(b, v, spec.activation)
                if spec.out_dtype != "f32":
                    v = b.cast(v, out_t)
                with b.if_(b.and_(row < dim_m, col < dim_n)):
                    b.store(b.ptr_add(pc, row * ldc + col), v)
    return m


def grid(cfg: Config, m: int, n: int) -> int:
    return ((m + cfg.bm - 1) // cfg.bm) * ((n + cfg.bn - 1) // cfg.bn)
