"""The sm_90a attention kernel (zyntax.kernels.attention_sm90: TMA, mbarrier
ring, wgmma, warp specialisation) on a Hopper GPU against a float64 reference
on fresh random inputs: both dtypes and head dims, causal or not, odd and
unequal lengths, strided (B, S, H, D) storage, outputs poisoned first; and
the sm_80 path still selectable with ``variant="sm80"``, giving the same
answer. The interpreter version: tests/python/test_attention_sm90.py."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pytest
from case_groups import run_case_group

from zyntax import kernels

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("torch has no CUDA", allow_module_level=True)
if torch.cuda.get_device_capability()[0] != 9:
    pytest.skip("the sm_90a kernel needs a Hopper GPU", allow_module_level=True)
DEV = torch.device("cuda")
BF16 = torch.bfloat16
att_mod = __import__("zyntax.kernels.attention", fromlist=["T"])


@pytest.fixture
def poisoned(monkeypatch: pytest.MonkeyPatch) -> None:
    """Outputs allocated by attention() start as NaN."""
    real = att_mod.T.output

    def output(out: Any, like: Any, shape: Any, dtype: str, **kw: Any) -> Any:
        obj, t = real(out, like, shape, dtype, **kw)
        obj.fill_(float("nan"))
        return obj, t

    monkeypatch.setattr(att_mod.T, "output", output)


def rel_err(out: Any, ref: Any) -> float:
    out64 = out.double()
    assert not torch.isnan(out64).any(), "NaN in the output (an element not written?)"
    return float((out64 - ref).norm() / ref.norm().clamp_min(1e-30))


def ref_attention(q: Any, k: Any, v: Any, causal: bool, scale: float) -> tuple[Any, Any]:
    s = (q.double() @ k.double().transpose(-1, -2)) * scale
    if causal:  # aligned bottom-right: query i sits at key i + Sk - Sq
        sq, sk = s.shape[-2:]
        mask = torch.ones(sq, sk, dtype=torch.bool, device=DEV).tril(sk - sq)
        s = s.masked_fill(~mask, -math.inf)
    return torch.softmax(s, -1) @ v.double(), torch.logsumexp(s, -1)


@pytest.mark.usefixtures("poisoned")
@pytest.mark.parametrize("dtype", [BF16, torch.float16])
@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("sq_sk", [(1, 1), (100, 100), (257, 257), (64, 300), (1000, 1000)])
def test_attention_sm90(dtype: Any, d: int, causal: bool, sq_sk: tuple[int, int]) -> None:
    sq, sk = sq_sk
    q = torch.randn(2, 3, sq, d, device=DEV, dtype=dtype)
    k = torch.randn(2, 3, sk, d, device=DEV, dtype=dtype)
    v = torch.randn(2, 3, sk, d, device=DEV, dtype=dtype)
    scale = 1 / math.sqrt(d)
    out, lse = kernels.attention(q, k, v, causal=causal, return_lse=True, variant="sm90")
    torch.cuda.synchronize()
    ref, ref_lse = ref_attention(q, k, v, causal, scale)
    assert rel_err(out, ref) < 1e-2
    assert rel_err(lse, ref_lse) < 1e-3


@pytest.mark.usefixtures("poisoned")
def test_attention_sm90_strided_and_sm80_agree() -> None:
    # (B, S, H, D) storage viewed as (B, H, S, D), as transformer code does.
    q = (torch.randn(2, 777, 4, 128, device=DEV, dtype=BF16) * 4).transpose(1, 2)
    k = (torch.randn(2, 777, 4, 128, device=DEV, dtype=BF16) * 4).transpose(1, 2)
    v = torch.randn(2, 4, 777, 128, device=DEV, dtype=BF16)
    new = kernels.attention(q, k, v, causal=True, scale=0.2, variant="sm90")
    old = kernels.attention(q, k, v, causal=True, scale=0.2, variant="sm80")
    dflt = kernels.attention(q, k, v, causal=True, scale=0.2)
    ref, _ = ref_attention(q, k, v, True, 0.2)
    assert rel_err(new, ref) < 2e-2
    assert rel_err(old, ref) < 2e-2
    assert rel_err(dflt, ref) < 2e-2


@pytest.mark.parametrize("case", [(4096, 128, False), (16384, 128, True), (16384, 64, False)])
def test_attention_sm90_bench_sizes(case: tuple[int, int, bool]) -> None:
    """The shapes benches/attention.py times, checked against SDPA."""
    s, d, causal = case
    batch, heads = 16384 // s, 2048 // d
    q, k, v = (torch.randn(batch, heads, s, d, device=DEV, dtype=BF16) for _ in range(3))
    out = kernels.attention(q, k, v, causal=causal, variant="sm90")
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal)
    assert rel_err(out, ref.double()) < 2e-2


#: The consumer loops and shapes (attention_sm90.Loop), in child processes:
#: a wrong barrier phase hangs the kernel, which would stop every GPU test
#: after it. group -> pytest -k expression over
#: attention_sm90_variant_cases.py.
VARIANT_GROUPS = {
    "overlap": "overlapped_loop and not pingpong_on",
    "pingpong": "overlapped_loop and pingpong_on",
    "three_consumers": "three_consumers",
    "lazy_rescale": "lazy_rescale",
    "named_loops": "named_loop",
    "persistent": "persistent_launches",
}


@pytest.mark.parametrize("group", list(VARIANT_GROUPS))
def test_attention_sm90_variants(group: str) -> None:
    cases = Path(__file__).with_name("attention_sm90_variant_cases.py")
    run_case_group(cases, VARIANT_GROUPS[group], group, timeout=240)
