"""The sm_90a GEMM (issue 14 item 1) on the interpreter, which executes TMA,
the mbarrier ring, wgmma and setmaxnreg exactly: fresh random bf16/f16
operands with odd tails, both B layouts, bias and activations, a persistent
grid smaller than the tile count, outputs poisoned, compared with float64
numpy on the same rounded operands. Also: the module verifies, round-trips
through .zir, is rejected below sm_90a, and its PTX passes ptxas. The device
twin is tests/python/gpu/test_gemm_sm90_gpu.py."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

import zyntax
from zyntax import hir, interp
from zyntax.kernels import gemm_sm90
from zyntax.kernels.gemm_sm90 import Config

rng = np.random.default_rng()
TOL = {"bf16": 1e-2, "f16": 1e-3, "f32": 1e-5, "tf32": 1e-5, "e4m3": 1e-5}


def to_bits(x: np.ndarray, dtype: str) -> np.ndarray:
    """Round f32 `x` to `dtype` ("bf16": nearest even; "f16") as uint16 bits."""
    if dtype == "f16":
        return x.astype(np.float16).view(np.uint16)
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def e4m3_bits(shape: tuple[int, ...]) -> np.ndarray:
    """Random e4m3 bytes of moderate size (exponent field 5..9: 1/4 .. 8)."""
    sign = rng.integers(0, 2, shape, dtype=np.uint8) << 7
    exp = rng.integers(5, 10, shape, dtype=np.uint8) << 3
    return sign | exp | rng.integers(0, 8, shape, dtype=np.uint8)


def operand(shape: tuple[int, ...], dtype: str) -> np.ndarray:
    """Fresh random operand bits of `dtype` (tf32: f32 values)."""
    if dtype == "e4m3":
        return e4m3_bits(shape)
    if dtype == "tf32":
        return rng.standard_normal(shape, dtype=np.float32)
    return to_bits(rng.standard_normal(shape, dtype=np.float32), dtype)


def from_bits(bits: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "e4m3":
        b = bits.astype(np.int64)
        mag = np.where(
            (b >> 3) & 15, (8 + (b & 7)) * 2.0 ** (((b >> 3) & 15) - 10), (b & 7) * 2.0**-9
        )
        return np.where(b & 0x80, -mag, mag)
    if dtype == "tf32":  # the tensor cores read the top 19 bits
        return (bits.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32).astype(np.float64)
    if dtype == "f32":
        return bits.view(np.float32).astype(np.float64)
    if dtype == "f16":
        return bits.view(np.float16).astype(np.float64)
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def pad8(x: np.ndarray) -> np.ndarray:
    """`x` with its rows zero-padded to a multiple of 16 bytes."""
    per16 = 16 // x.itemsize
    pitch = -(-x.shape[1] // per16) * per16
    out = np.zeros((x.shape[0], pitch), x.dtype)
    out[:, : x.shape[1]] = x
    return out


def run(
    m: int,
    n: int,
    k: int,
    cfg: Config,
    grid: int | None = None,
    bias: bool = False,
) -> None:
    """Runs `cfg` on the interpreter for an m x n x k product and checks it."""
    dt = cfg.dtype
    a = operand((m, k), dt)
    if cfg.b_layout == "col":
        b_rows = operand((n, k), dt)
        b = from_bits(b_rows, dt).T
    else:
        b_rows = operand((k, n), dt)
        b = from_bits(b_rows, dt)
    ref = from_bits(a, dt) @ b
    args: list[object] = []
    if cfg.scaled:
        sa, sb = (rng.uniform(0.5, 2.0, 1).astype(np.float32) for _ in range(2))
        ref = ref * (float(sa[0]) * float(sb[0]))
    if bias:
        assert cfg.bias is not None
        bias_bits = (
            rng.standard_normal(n).astype(np.float32)
            if cfg.bias == "f32"
            else to_bits(rng.standard_normal(n, dtype=np.float32), cfg.bias)
        )
        ref = ref + (
            bias_bits.astype(np.float64) if cfg.bias == "f32" else from_bits(bias_bits, cfg.bias)
        )
        args.append(bias_bits)
    if cfg.scaled:
        args += [sa, sb]
    if cfg.activation == "relu":
        ref = np.maximum(ref, 0.0)
    elif cfg.activation == "gelu":
        ref = 0.5 * ref * (1.0 + np.tanh(gemm_sm90.GELU_C * (ref + 0.044715 * ref**3)))
    poison = {"f32": np.float32, "f16": np.float16}
    out = (
        np.full((m, n), np.nan, poison[cfg.out_dtype])
        if cfg.out_dtype in poison
        else np.full((m, n), 0x7FFF, np.uint16)  # a bf16 NaN
    )
    # TMA needs 16-byte aligned rows: zero-pad them, as matmul_sm90 does on the GPU
    tma_dtype = gemm_sm90.IN_TMA[dt]
    ta, tb = gemm_sm90.tensor_maps(interp.TensorMap, cfg, pad8(a), pad8(b_rows), dtype=tma_dtype)
    g, block, shared = gemm_sm90.launch_shape(cfg, m, n, grid or 1 << 30)
    module = gemm_sm90.module(cfg)
    interp.launch(module, "gemm_sm90", g, block, ta, tb, out, *args, m, n, k, shared_bytes=shared)
    got = from_bits(out, cfg.out_dtype)
    assert np.isfinite(got).all(), "unwritten (poisoned) output elements"
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    assert err < max(TOL[dt], TOL[cfg.out_dtype]), f"relative error {err:.3g}"


def test_bf16_col_two_tiles_one_block() -> None:
    # one block walks both tiles: the ring's phases carry across tiles
    run(128, 512, 192, Config(), grid=1)


def test_bf16_row_layout_tails() -> None:
    # N-major B; partial tiles in M, N and K (TMA fills zeros), odd N
    run(130, 257, 71, Config(b_layout="row", pair_store=False))


def test_f16_to_f32_bias_gelu() -> None:
    cfg = Config(dtype="f16", out_dtype="f32", bias="f32", activation="gelu")
    run(64, 256, 128, cfg, bias=True)


def test_f16_relu_bias_bf16_small_tile_no_overlap() -> None:
    cfg = Config(
        dtype="f16", out_dtype="f16", bias="bf16", activation="relu", bn=128, overlap=False
    )
    run(200, 136, 64, cfg, grid=2, bias=True)


def test_tf32_to_f32_tails() -> None:
    # K tiles of 32 f32 elements, wgmma m64n256k8
    run(70, 300, 40, Config(dtype="tf32", out_dtype="f32", pair_store=False))


def test_e4m3_scaled_to_bf16_bias() -> None:
    # K tiles of 128 bytes, wgmma m64n256k32, per-tensor scales, bf16 out, tails
    cfg = Config(dtype="e4m3", out_dtype="bf16", scaled=True, bias="f32")
    run(128, 250, 150, cfg, bias=True)


def test_one_consumer_without_setmaxnreg() -> None:
    run(64, 64, 256, Config(bn=64, consumers=1, stages=2, setmaxnreg=False))


def test_persistent_grid_is_the_fewest_blocks_for_its_rounds() -> None:
    one = Config()
    assert gemm_sm90.launch_shape(one, 8192, 8192, 132)[0] == 128  # 2048 tiles, 16 rounds
    assert gemm_sm90.launch_shape(one, 4096, 4096, 132)[0] == 128  # 512 tiles, 4 rounds
    assert gemm_sm90.launch_shape(one, 3200, 10240, 132)[0] == 125  # 1000 tiles, 8 rounds
    assert gemm_sm90.launch_shape(one, 1024, 2048, 8)[0] == 8  # 64 tiles on 8 SMs
    assert gemm_sm90.launch_shape(one, 1000, 1000, 132)[0] == 32  # a tile per block
    for m, n, sms in [(8192, 8192, 132), (4096, 12288, 114), (300, 700, 7)]:
        tiles = -(-m // one.bm) * -(-n // one.bn)
        grid = gemm_sm90.launch_shape(one, m, n, sms)[0]
        assert grid <= sms and -(-tiles // grid) == -(-tiles // min(tiles, sms))


def test_cluster_pair_multicast_b() -> None:
    # 3 tile rows: the second unit's lower tile lies wholly below M (zeros,
    # no stores) yet still multicasts its half of B; one cluster walks all
    # 4 units, so the ring's phases and the remote releases carry across
    run(300, 512, 192, Config(cluster_m=2), grid=2)


def test_cluster_row_layout_tails_f16_bias() -> None:
    # N-major B: each block multicasts half of the 64-column boxes; tails in M, N, K
    cfg = Config(
        dtype="f16", out_dtype="f32", b_layout="row", bias="f32", cluster_m=2, pair_store=False
    )
    run(130, 257, 71, cfg, bias=True)


def test_cluster_launch_shape_and_ptx() -> None:
    cfg = Config(cluster_m=2)
    # 64 x 32 tiles in units of 2 tile rows: 1024 units take 16 rounds on the
    # 66 clusters that fit 133 SMs, and 64 clusters run them in 16 rounds too
    assert gemm_sm90.launch_shape(cfg, 8192, 8192, 133)[0] == 128
    assert gemm_sm90.launch_shape(cfg, 100, 100, 132)[0] == 2
    assert gemm_sm90._boxes(cfg)[1] == (64, 128)
    ptx = zyntax.compile(gemm_sm90.build(cfg), backend="nvptx", arch="sm_90a")
    assert ".reqnctapercluster 2, 1, 1" in ptx
    assert "multicast::cluster" in ptx
    # stages go back with relaxed remote arrivals: a cluster-scope release put
    # MEMBAR.GPU before each and halved the speed on the H100
    assert "mbarrier.arrive.shared::cluster.b64" in ptx
    assert "mbarrier.arrive.release.cluster" not in ptx
    assert "barrier.cluster.wait" in ptx
    zyntax.validate_ptx(ptx, arch="sm_90a")
    with pytest.raises(ValueError, match="cluster"):
        gemm_sm90.build(Config(cluster_m=2, b_layout="row", bn=64))
    with pytest.raises(ValueError, match="cluster"):
        gemm_sm90.build(Config(cluster_m=4))


def test_default_config_cluster_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    assert gemm_sm90.default_config(8192, 8192).cluster_m == 1  # unmeasured: off
    monkeypatch.setattr(gemm_sm90, "CLUSTER_MIN_TILES", 64)
    assert gemm_sm90.default_config(8192, 8192).cluster_m == 2
    assert gemm_sm90.default_config(1024, 1024).cluster_m == 1  # 32 tiles
    assert gemm_sm90.default_config(128, 1 << 20).cluster_m == 1  # one tile row
    monkeypatch.setattr(gemm_sm90, "CLUSTER_M", 2)
    assert gemm_sm90.default_config(100, 100).cluster_m == 2


def test_module_verifies_round_trips_and_assembles() -> None:
    cfg = Config(bias="bf16", activation="relu")
    m = gemm_sm90.build(cfg)
    text = m.to_zir()
    for op in ("wgmma.m64n256.bf16.bf16", "tma.load", "setmaxnreg.inc", "mbarrier.try_wait_parity"):
        assert op in text
    assert hir.parse_zir(text) == m
    ptx = zyntax.compile(m, backend="nvptx", arch="sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16" in ptx
    assert "cp.async.bulk.tensor.2d" in ptx
    zyntax.validate_ptx(ptx, arch="sm_90a")


def test_rejected_below_sm_90a() -> None:
    m = gemm_sm90.build(Config())
    m.targets = ["sm_90"]
    with pytest.raises(zyntax.VerifyError, match="wgmma"):
        m.verify()


def test_supports_and_bad_config() -> None:
    assert gemm_sm90.sm90_supports("bf16", "bf16", "f32", "row", "col")
    assert not gemm_sm90.sm90_supports("bf16", "f16", "f32", "row", "row")
    assert not gemm_sm90.sm90_supports("f32", "f32", "f32", "row", "row")
    assert gemm_sm90.sm90_supports("f32", "f32", "f32", "row", "col")
    assert gemm_sm90.sm90_supports("e4m3", "e4m3", "bf16", "row", "col")
    assert not gemm_sm90.sm90_supports("e4m3", "e4m3", "bf16", "row", "row")
    with pytest.raises(ValueError, match="K-major"):
        gemm_sm90.build(Config(dtype="e4m3", b_layout="row"))
    assert not gemm_sm90.sm90_supports("bf16", "bf16", "bf16", "col", "row")
    with pytest.raises(ValueError, match="b_layout"):
        gemm_sm90.build(dataclasses.replace(Config(), b_layout="diag"))


def test_wgmma_tile_example_on_interpreter() -> None:
    """examples/wgmma_tile.py: one warpgroup per 64 x 128 tile, a 2-stage TMA ring."""
    import wgmma_tile

    m, n, k = 128, 256, 320  # 5 K tiles: the ring wraps twice
    a = to_bits(rng.standard_normal((m, k), dtype=np.float32), "bf16")
    bt = to_bits(rng.standard_normal((n, k), dtype=np.float32), "bf16")
    d = np.full((m, n), np.nan, np.float32)
    ta = interp.TensorMap.tiled(a, (wgmma_tile.BK, wgmma_tile.BM), swizzle="128B", dtype="bf16")
    tb = interp.TensorMap.tiled(bt, (wgmma_tile.BK, wgmma_tile.BN), swizzle="128B", dtype="bf16")
    grid = (n // wgmma_tile.BN, m // wgmma_tile.BM)
    shared = wgmma_tile.SHARED_BYTES
    interp.launch(wgmma_tile.build(), "wgmma_tile", grid, 128, ta, tb, d, n, k, shared_bytes=shared)
    ref = from_bits(a, "bf16") @ from_bits(bt, "bf16").T
    # f32 accumulation of exact bf16 products: far below bf16 rounding
    np.testing.assert_allclose(d, ref, rtol=1e-5, atol=1e-4)


def test_wgmma_tile_example_assembles() -> None:
    import wgmma_tile

    ptx = zyntax.compile(wgmma_tile.build(), backend="nvptx", arch="sm_90a")
    assert "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16" in ptx
    zyntax.validate_ptx(ptx, arch="sm_90a")


def test_pad_kernel_on_interpreter() -> None:
    """The copy matmul_sm90 makes of operands TMA cannot describe: a strided
    (column-major) 5 x 13 view into zero-padded 16-element rows."""
    src = rng.integers(0, 2**16, (13, 5), dtype=np.uint16)  # holds the 5 x 13 view's transpose
    dst = np.full((5, 16), 0xFFFF, np.uint16)
    m = gemm_sm90._pad_module("bf16")
    interp.launch(m, "pad", (1, 5), 256, src.ravel(), dst.ravel(), 5, 13, 1, 5, 16)
    np.testing.assert_array_equal(dst[:, :13], src.T)
    assert (dst[:, 13:] == 0).all()
