"""The sm_80 GEMM: ``mma.sync`` (m16n8k16 for bf16/f16, m16n8k8 for tf32) fed
by ``ldmatrix`` from XOR-swizzled shared memory, with a multi-stage
``cp.async`` pipeline; f32 accumulate.

Written with the HIR builder. One block computes a ``bm x bn`` tile of the
output; its warps form a grid of ``wm x wn`` warp tiles. K advances in tiles
of ``bk`` elements (rows of 64 or 128 bytes: 4 or 8 16-byte chunks) through
a ring of ``stages`` shared-memory buffers: while the warps multiply tile
``kt``, the copies of tiles ``kt+1 .. kt+stages-1`` are in flight.

Layouts: a K-contiguous operand (row-major A, column-major B) is staged as
``[outer][k]`` and read with plain ``ldmatrix``; an outer-contiguous operand
(column-major A, row-major B) is staged ``[k][outer]`` and read with
``ldmatrix.trans`` (tf32: 32-bit shared loads), so no layout needs a copy.
The chunk ``c`` of shared row ``r`` lives at chunk ``c ^ f(r)`` (see
:func:`_swz`): the 8 rows one ``ldmatrix`` phase reads then hit all 32
banks, and so do the 16-byte ``cp.async`` writes.

Tails: blocks past M or N are not launched; a 16-byte chunk that is not
wholly inside the matrix (the last K tile, the last rows or columns) is read
element by element from clamped addresses and zero-filled, and operands
whose rows are not 16-byte aligned (``aligned=False``) are read that way
throughout; with ``Spec.even`` (whole tiles, aligned) there are no checks at
all. The epilogue adds the bias, applies the activation, converts to the
output dtype and stores the elements inside M x N.
"""

from __future__ import annotations

from dataclasses import dataclass

from zyntax import hir
from zyntax.kernels._rows import assign, read, variables

GELU_C = 0.7978845608028654  # sqrt(2 / pi), the tanh form of GELU
GELU_K = 0.044715


@dataclass(frozen=True)
class Config:
    """Tile shape of the mma_sync kernel (the autotuned part of the cache key)."""

    bm: int = 128
    bn: int = 128
    bk: int = 32
    wm: int = 64
    wn: int = 64
    stages: int = 4
    group_m: int = 8  # blocks of one column group share B tiles in L2
    frag_pipeline: bool = False  # load k-step s+1's fragments before k-step s's mmas
    elem_bytes: int = 2  # 2: bf16/f16 (m16n8k16), 4: tf32 (m16n8k8)

    @property
    def warps(self) -> int:
        return (self.bm // self.wm) * (self.bn // self.wn)

    @property
    def threads(self) -> int:
        return 32 * self.warps

    @property
    def shared_bytes(self) -> int:
        return self.stages * (self.bm + self.bn) * self.bk * self.elem_bytes


@dataclass(frozen=True)
class Spec:
    """What a compiled module is specialised on besides the tile shape."""

    dtype: str  # "bf16", "f16" or "tf32" (f32 operands read as tf32)
    a_layout: str  # "row" (K contiguous) or "col"
    b_layout: str  # "row" (N contiguous) or "col" (K contiguous)
    a_aligned: bool
    b_aligned: bool
    out_dtype: str  # "f32", "bf16", "f16"
    bias_dtype: str | None
    activation: str | None
    # M, N, K multiples of the tile, operands and output 16-byte aligned:
    # no bounds checks at all, output pairs stored as one vector.
    even: bool = False
    # Split-K: block (x, y) multiplies K tiles [y * per, (y + 1) * per) of
    # output tile x, per = ceil(K tiles / grid_dim.y), and writes its f32
    # partial sums to ws[y][M][N]; the last block of tile x to finish (a
    # counter per tile) adds the partials in split order and runs the
    # epilogue. The kernel then takes (a, b, out, bias, ws, counters, ...).
    split_k: bool = False


_SCALAR = {"bf16": hir.bf16, "f16": hir.f16, "f32": hir.f32, "tf32": hir.f32}
KERNEL = "gemm_mma_sync"


def _swz_words(r: hir.Value) -> hir.Value:
    """XOR term of row r of a tf32 ``[k][outer]`` tile, read as single words:
    a warp reads 8 consecutive words (two chunks) from each of 4 rows, so
    the 4 rows take chunk pairs 0, 2, 4, 6 of each 8-chunk (128-byte) group."""
    return (r & 3) << 1


def _swz(r: hir.Value, cpr: int) -> hir.Value:
    """XOR term of shared row r in a tile with `cpr` 16-byte chunks per row:
    the 8 rows of one ldmatrix phase (8 x 16 bytes) land on 8 distinct
    16-byte bank groups."""
    if cpr >= 8:
        return r & 7
    return (r >> (8 // cpr).bit_length() - 1) & (cpr - 1)


def zeros(b: hir.FunctionBuilder, elem: hir.Type, lanes: int) -> hir.Value:
    """A zero ``vec<elem, lanes>`` (HIR has no vector constants: a local
    scratch that LLVM promotes to registers). Call it in the entry block."""
    scratch = b.alloca(hir.vec(elem, lanes))
    p = b.ptr_cast(scratch, hir.ptr("local", elem))
    for i in range(lanes):
        b.store(b.ptr_add(p, i), b.const(0, elem))
    return b.load(scratch)


def activation(b: hir.FunctionBuilder, v: hir.Value, act: str | None) -> hir.Value:
    """The epilogue activation on an f32 value (shared with the simt variant)."""
    if act == "relu":
        return b.max(v, b.const(0.0, hir.f32))
    if act == "gelu":
        inner = v * (v * v * GELU_K + 1.0) * GELU_C
        return v * (b.tanh(inner) + 1.0) * 0.5
    return v


def build(cfg: Config, spec: Spec) -> hir.Module:
    """The kernel ``gemm_mma_sync(a, b, out, bias, M, N, K, lda, ldb, ldc)``;
    launch it with :func:`grid` blocks of ``cfg.threads`` threads and
    ``cfg.shared_bytes`` of dynamic shared memory."""
    tf32 = spec.dtype == "tf32"
    assert cfg.elem_bytes == (4 if tf32 else 2)
    epc = 16 // cfg.elem_bytes  # elements per 16-byte chunk
    kstep = 8 if tf32 else 16  # K of one mma
    assert cfg.bk * cfg.elem_bytes in (64, 128) and cfg.wm % 16 == 0 and cfg.wn % 16 == 0
    assert not tf32 or min(cfg.bm, cfg.bn) >= 32  # _swz_words needs 8-chunk rows
    elem = _SCALAR[spec.dtype]
    out_t = _SCALAR[spec.out_dtype]
    bias_t = _SCALAR[spec.bias_dtype or "f32"]
    u32x4 = hir.vec(hir.u32, 4)
    m = hir.Module(KERNEL, targets=["sm_80", "sm_90"])
    params = [
        hir.ptr("global", elem),
        hir.ptr("global", elem),
        hir.ptr("global", out_t),
        hir.ptr("global", bias_t),
    ]
    if spec.split_k:  # partial sums, arrival counters (zero between launches)
        params += [hir.ptr("global", hir.f32), hir.ptr("global", hir.u32)]
    params += [hir.u32] * 6
    nt = cfg.threads
    kchunks = cfg.bk // epc
    with m.kernel(KERNEL, params, max_threads=nt) as b:
        if spec.split_k:
            pa, pb, pc, pbias, pws, pcount, dim_m, dim_n, dim_k, lda, ldb, ldc = b.params
            last_flag = b.shared_alloc(hir.u32, 1)
        else:
            pa, pb, pc, pbias, dim_m, dim_n, dim_k, lda, ldb, ldc = b.params
        smem = b.dyn_shared(u32x4)
        zero_u32x4, zero_u32x2 = zeros(b, hir.u32, 4), zeros(b, hir.u32, 2)
        zero_f32x4 = zeros(b, hir.f32, 4)
        zero_out2 = zeros(b, out_t, 2) if spec.even else None
        tid = b.thread_idx()
        warp, lane = tid >> 5, tid & 31

        # Grouped tile order: group_m row-blocks walk the columns together.
        pid = b.block_idx()
        tiles_m = (dim_m + (cfg.bm - 1)) // cfg.bm
        tiles_n = (dim_n + (cfg.bn - 1)) // cfg.bn
        per_group = tiles_n * cfg.group_m
        first_m = (pid // per_group) * cfg.group_m
        gsize = b.min(tiles_m - first_m, b.const(cfg.group_m, hir.u32))
        pid_m = first_m + (pid % per_group) % gsize
        pid_n = (pid % per_group) // gsize
        row0, col0 = pid_m * cfg.bm, pid_n * cfg.bn
        ktiles_all = (dim_k + (cfg.bk - 1)) // cfg.bk
        if spec.split_k:
            split, nsplit = b.block_idx("y"), b.grid_dim("y")
            per = (ktiles_all + (nsplit - 1)) // nsplit
            kbeg = b.min(split * per, ktiles_all)
            ktiles = b.min(per, ktiles_all - kbeg)  # this split's K tiles (may be 0)
        else:
            kbeg, ktiles = b.const(0, hir.u32), ktiles_all

        a_kc = spec.a_layout == "row"  # A's K contiguous
        b_kc = spec.b_layout == "col"  # B's K contiguous
        a_chunks = cfg.bm * cfg.bk // epc
        b_chunks = cfg.bn * cfg.bk // epc
        stage_chunks = a_chunks + b_chunks

        def load_tile(
            gp: hir.Value,
            ld: hir.Value,
            k_contig: bool,
            outer0: hir.Value,
            outer_ext: hir.Value,
            outer_tile: int,
            k0: hir.Value,
            base: hir.Value,
            aligned: bool,
        ) -> None:
            """Copy one operand tile into shared chunks starting at `base`."""
            cpr = kchunks if k_contig else outer_tile // epc
            rows = cfg.bk if not k_contig else outer_tile
            word = hir.u32 if tf32 else hir.u16
            g16 = b.ptr_cast(gp, hir.ptr("global", word))
            # Stored matrix coordinates: (srow, scol) with scol contiguous.
            if k_contig:
                srow0, scol0, srow_ext, scol_ext = outer0, k0, outer_ext, dim_k
            else:
                srow0, scol0, srow_ext, scol_ext = k0, outer0, dim_k, outer_ext
            shift = cpr.bit_length() - 1
            for it in range(rows * cpr // nt):
                q = tid + it * nt
                r, c = q >> shift, q & (cpr - 1)
                words = tf32 and not k_contig  # read back by word_at, not ldmatrix
                swz = _swz_words(r) if words else _swz(r, cpr)
                dst = b.ptr_add(smem, base + r * cpr + (c ^ swz))
                grow, gcol = srow0 + r, scol0 + c * epc

                def by_elements(grow: hir.Value, gcol: hir.Value, dst: hir.Value) -> None:
                    last_row, last_col = srow_ext - 1, scol_ext - 1
                    row_ok = grow < srow_ext
                    roff = b.min(grow, last_row) * ld
                    v = zero_u32x4
                    per = epc // 4  # elements per 32-bit word
                    for w in range(4):
                        parts = []
                        for e in range(per * w, per * w + per):
                            col = gcol + e
                            ok = b.and_(row_ok, col < scol_ext)
                            x = b.load(b.ptr_add(g16, roff + b.min(col, last_col)))
                            x = b.select(ok, x, b.const(0, word))
                            parts.append(x if tf32 else b.cast(x, hir.u32))
                        v = b.insert(v, parts[0] if tf32 else parts[0] | (parts[1] << 16), w)
                    b.store(dst, v)

                if spec.even:
                    src = b.ptr_cast(b.ptr_add(g16, grow * ld + gcol), hir.ptr("global", u32x4))
                    b.cp_async(dst, src, bytes=16, cache="cg")
                    continue
                if not aligned:
                    by_elements(grow, gcol, dst)
                    continue
                full = b.and_(grow < srow_ext, gcol + epc <= scol_ext)
                with b.if_else(full) as (yes, no):
                    with yes:
                        src = b.ptr_cast(b.ptr_add(g16, grow * ld + gcol), hir.ptr("global", u32x4))
                        b.cp_async(dst, src, bytes=16, cache="cg")
                    with no:
                        by_elements(grow, gcol, dst)

        def copy(kt: hir.Value, tile: hir.Value) -> None:
            """Copy this block's K tile `tile` into stage kt % stages."""
            base = (kt % cfg.stages) * stage_chunks
            k0 = (kbeg + tile) * cfg.bk
            load_tile(pa, lda, a_kc, row0, dim_m, cfg.bm, k0, base, spec.a_aligned)
            load_tile(pb, ldb, b_kc, col0, dim_n, cfg.bn, k0, base + a_chunks, spec.b_aligned)

        # Prologue: tiles 0 .. stages-2, one commit group each (empty past the end).
        for s in range(cfg.stages - 1):
            kt0 = b.const(s, hir.u32)
            with b.if_(kt0 < ktiles):
                copy(kt0, kt0)
            b.cp_async_commit()

        warps_n = cfg.bn // cfg.wn
        wrow = (warp // warps_n) * cfg.wm
        wcol = (warp % warps_n) * cfg.wn
        mt, ntl = cfg.wm // 16, cfg.wn // 8
        acc0 = [zero_f32x4] * (mt * ntl)
        r8, j8 = lane & 7, lane >> 3
        kks = cfg.bk // kstep
        g, t = lane >> 2, lane & 3

        def rounded(v: hir.Value, n: int, zero: hir.Value) -> hir.Value:
            """tf32: round each f32 of a fragment to nearest (ties away), as
            cvt.rna.tf32.f32 does; the tensor cores would truncate."""
            out = zero
            for e in range(n):
                out = b.insert(out, (b.extract(v, e) + 0x1000) & 0xFFFFE000, e)
            return out

        def word_at(base: hir.Value, cpr: int, k: hir.Value, outer: hir.Value) -> hir.Value:
            """The 32-bit element (k, outer) of a [k][outer] f32 tile."""
            words = b.ptr_cast(base, hir.ptr("shared", hir.u32))
            chunk = k * cpr + ((outer >> 2) ^ _swz_words(k))
            return b.load(b.ptr_add(words, chunk * 4 + (outer & 3)))

        def fragments(stage: hir.Value, kk: int) -> list[hir.Value]:
            """This warp's A fragments (mt) then B fragments (ntl) of k-step kk."""
            sa = b.ptr_add(smem, stage * stage_chunks)
            sb = b.ptr_add(sa, a_chunks)
            fa = []
            for i in range(mt):
                if a_kc:  # [m][k]
                    r = wrow + 16 * i + (lane & 15)
                    c = (lane >> 4) + 2 * kk
                    p = b.ptr_add(sa, r * kchunks + (c ^ _swz(r, kchunks)))
                    fa.append(b.ldmatrix(p, 4))
                elif tf32:  # [k][m] of 32-bit words: no ldmatrix.trans, plain loads
                    v = zero_u32x4
                    for e in range(4):
                        k = t + 4 * (e >> 1) + kstep * kk
                        v = b.insert(
                            v, word_at(sa, cfg.bm // 4, k, wrow + 16 * i + g + 8 * (e & 1)), e
                        )
                    fa.append(v)
                else:  # [k][m]
                    cpr = cfg.bm // 8
                    r = (j8 >> 1) * 8 + r8 + kstep * kk
                    c = (wrow + 16 * i) // 8 + (j8 & 1)
                    p = b.ptr_add(sa, r * cpr + (c ^ _swz(r, cpr)))
                    fa.append(b.ldmatrix(p, 4, trans=True))
            fb = []
            for p2 in range(ntl // 2):
                if tf32 and not b_kc:  # [k][n] of 32-bit words
                    for h in range(2):
                        v = zero_u32x2
                        for e in range(2):
                            n = wcol + 16 * p2 + 8 * h + g
                            v = b.insert(v, word_at(sb, cfg.bn // 4, t + 4 * e + kstep * kk, n), e)
                        fb.append(v)
                    continue
                if b_kc:  # [n][k]
                    r = wcol + 16 * p2 + (j8 >> 1) * 8 + r8
                    c = (j8 & 1) + 2 * kk
                    x = b.ldmatrix(b.ptr_add(sb, r * kchunks + (c ^ _swz(r, kchunks))), 4)
                else:  # [k][n]
                    cpr = cfg.bn // 8
                    r = (j8 & 1) * 8 + r8 + kstep * kk
                    c = (wcol + 16 * p2) // 8 + (j8 >> 1)
                    x = b.ldmatrix(b.ptr_add(sb, r * cpr + (c ^ _swz(r, cpr))), 4, trans=True)
                for h in range(2):
                    v = b.insert(zero_u32x2, b.extract(x, 2 * h), 0)
                    fb.append(b.insert(v, b.extract(x, 2 * h + 1), 1))
            if tf32:
                fa = [rounded(v, 4, zero_u32x4) for v in fa]
                fb = [rounded(v, 2, zero_u32x2) for v in fb]
            return fa + fb

        def mmas(frags: list[hir.Value], acc: list[hir.Value]) -> None:
            fa, fb = frags[:mt], frags[mt:]
            for i in range(mt):
                for j in range(ntl):
                    acc[i * ntl + j] = b.mma_sync(fa[i], fb[j], acc[i * ntl + j], elem=spec.dtype)

        def copy_ahead(kt: hir.Value) -> None:
            """Tile kt+stages-1 into the stage read at kt-1 (free after the last
            barrier). Past the end the last tile is copied again into a stage
            nobody reads: the loop body stays one branch-free block."""
            nxt = kt + (cfg.stages - 1)
            copy(nxt, b.min(nxt, ktiles - 1))
            b.cp_async_commit()

        if not cfg.frag_pipeline:
            accs = variables(b, acc0, "acc")
            with b.for_range(0, ktiles, type=hir.u32) as kt:
                acc = read(b, accs)
                b.cp_async_wait(cfg.stages - 2)
                b.barrier()  # tile kt landed for all threads; stage kt-1 is free
                copy_ahead(kt)
                for kk in range(kks):
                    mmas(fragments(kt % cfg.stages, kk), acc)
                assign(b, accs, acc)
        else:
            # The fragments of the next k-step are loaded before the mmas of
            # this one; the barrier for the next tile comes after the last
            # k-step's mmas are issued, so the tensor pipe works through it.
            b.cp_async_wait(cfg.stages - 2)
            b.barrier()
            frag0 = fragments(b.const(0, hir.u32), 0)
            accs, fvars = variables(b, acc0, "acc"), variables(b, frag0, "frag")
            with b.for_range(0, ktiles, type=hir.u32) as kt:
                acc, frags = read(b, accs), read(b, fvars)
                copy_ahead(kt)
                for kk in range(kks):
                    if kk + 1 < kks:
                        nxt_frags = fragments(kt % cfg.stages, kk + 1)
                        mmas(frags, acc)
                        frags = nxt_frags
                    else:
                        mmas(frags, acc)
                        b.cp_async_wait(cfg.stages - 2)
                        b.barrier()  # tile kt+1 landed; stage kt is free
                        # (The last iteration re-reads its own stage: never
                        # a stage that no copy has written.)
                        frags = fragments(b.min(kt + 1, ktiles - 1) % cfg.stages, 0)
                assign(b, accs, acc)
                assign(b, fvars, frags)
        acc = read(b, accs)
        b.cp_async_wait(0)

        def store_out(acc: list[hir.Value]) -> None:
            """Epilogue: bias, activation, output cast, stores inside M x N."""
            for j in range(ntl):
                col = col0 + wcol + 8 * j + 2 * t
                bias: list[hir.Value | None] = []
                for e in range(2):
                    if spec.bias_dtype is None:
                        bias.append(None)
                        continue
                    cc = col + e
                    x = b.load(b.ptr_add(pbias, b.min(cc, dim_n - 1)))
                    bias.append(b.cast(x, hir.f32) if spec.bias_dtype != "f32" else x)
                for i in range(mt):
                    vals = []
                    for e in range(4):
                        v = b.extract(acc[i * ntl + j], e)
                        be = bias[e & 1]
                        if be is not None:
                            v = v + be
                        v = activation(b, v, spec.activation)
                        vals.append(b.cast(v, out_t) if spec.out_dtype != "f32" else v)
                    for h in range(2):  # rows g and g + 8
                        row = row0 + wrow + 16 * i + g + 8 * h
                        if zero_out2 is not None:  # even: (col, col + 1) as one vector
                            pair = b.insert(b.insert(zero_out2, vals[2 * h], 0), vals[2 * h + 1], 1)
                            dst = b.ptr_cast(
                                b.ptr_add(pc, row * ldc + col), hir.ptr("global", hir.vec(out_t, 2))
                            )
                            b.store(dst, pair)
                            continue
                        for e in range(2):
                            cc = col + e
                            with b.if_(b.and_(row < dim_m, cc < dim_n)):
                                b.store(b.ptr_add(pc, row * ldc + cc), vals[2 * h + e])

        if not spec.split_k:
            store_out(acc)
            return m

        # Split-K: this block's partial sums go to ws[split] (f32, rows of N).
        # Element (i, j, e) of the fragments is at row g + 8 * (e >> 1) and
        # column 2 * t + (e & 1) of 16 x 8 block (i, j) of the warp tile.
        plane = dim_m * dim_n
        elems = [(i, j, e) for i in range(mt) for j in range(ntl) for e in range(4)]

        def place(i: int, j: int, e: int) -> tuple[hir.Value, hir.Value]:
            row = row0 + wrow + 16 * i + g + 8 * (e >> 1)
            return row, col0 + wcol + 8 * j + 2 * t + (e & 1)

        mine = b.ptr_add(pws, split * plane)
        for i, j, e in elems:
            row, col = place(i, j, e)
            v = b.extract(acc[i * ntl + j], e)
            if spec.even:
                b.store(b.ptr_add(mine, row * dim_n + col), v)
                continue
            with b.if_(b.and_(row < dim_m, col < dim_n)):
                b.store(b.ptr_add(mine, row * dim_n + col), v)
        # Release the partials, then count this block in; the last of the
        # tile's blocks to arrive resets the counter for the next launch.
        b.fence_acq_rel("device")
        b.barrier()
        with b.if_(tid < 1):
            counter = b.ptr_add(pcount, pid)
            last = b.eq(b.atomic_add(counter, b.const(1, hir.u32)), nsplit - 1)
            b.store(last_flag, b.select(last, b.const(1, hir.u32), b.const(0, hir.u32)))
            with b.if_(last):
                b.store(counter, b.const(0, hir.u32))
        b.barrier()
        with b.if_(b.ne(b.load(last_flag), b.const(0, hir.u32))):
            # Acquire the other blocks' partials and add all of them in split
            # order (L2 loads: never a stale L1 line): the same sum whichever
            # block came last.
            b.fence_acq_rel("device")
            offs = []
            for i, j, e in elems:
                row, col = place(i, j, e)
                offs.append(b.min(row, dim_m - 1) * dim_n + b.min(col, dim_n - 1))
            zero = b.const(0.0, hir.f32)
            svars = variables(b, [zero] * len(elems), "sum")
            with b.for_range(0, nsplit, type=hir.u32) as split_i:
                part = b.ptr_add(pws, split_i * plane)
                sums = [
                    x + b.load_cached(b.ptr_add(part, off), "cg")
                    for x, off in zip(read(b, svars), offs, strict=True)
                ]
                assign(b, svars, sums)
            sums = read(b, svars)
            total = []
            for f in range(mt * ntl):
                v = zero_f32x4
                for e in range(4):
                    v = b.insert(v, sums[f * 4 + e], e)
                total.append(v)
            store_out(total)
    return m


def grid(cfg: Config, m: int, n: int) -> int:
    """Blocks for an m x n output (a 1-D grid in grouped tile order)."""
    return ((m + cfg.bm - 1) // cfg.bm) * ((n + cfg.bn - 1) // cfg.bn)
