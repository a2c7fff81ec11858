//! Matrix rows: tensor-core fragments (wmma), warp MMA (`mma.sync`,
//! `ldmatrix`, `stmatrix`) and warpgroup MMA (`wgmma`) with the warp
//! specialisation ops that come with it.

use super::*;

/// Tensor-core fragments (wmma).
pub(super) const WMMA: &[OpDef] = &[
    // --- GPU: tensor cores
    row(
        "mma_load",
        "",
        "mma.load.<layout>",
        &["ptr", "ldm"],
        1,
        "the given fragment",
    )
    .imms(imms!(MmaLoad {
        frag: FragType = "a fragment type",
        layout: Layout = "layout"
    }))
    .gpu()
    .fx(fx::READ | fx::WARP)
    .rust("mma_load(frag, layout, ptr, ldm)")
    .py(Py::Hand("mma_load"))
    .doc("Load a fragment (warp-wide)."),
    row(
        "mma_fill",
        "",
        "mma.fill",
        &["scalar"],
        1,
        "the given accumulator fragment",
    )
    .op(|| Op::MmaFill)
    .gpu()
    .rust("mma_fill(frag, scalar)")
    .py(Py::Hand("mma_fill"))
    .doc("An accumulator fragment with every element equal."),
    row("mma", "", "mma", &["a", "b", "c"], 1, "type of c")
        .op(|| Op::Mma)
        .gpu()
        .fx(fx::WARP)
        .rust("mma(a, b, c)")
        .py(Py::Hand("mma"))
        .doc("a * b + c on fragments (warp-wide)."),
    row(
        "mma_store",
        "",
        "mma.store.<layout>",
        &["ptr", "frag", "ldm"],
        0,
        "–",
    )
    .imms(imms!(MmaStore {
        layout: Layout = "layout"
    }))
    .gpu()
    .fx(fx::WRITE | fx::WARP)
    .rust("mma_store(layout, ptr, frag, ldm)")
    .py(Py::Hand("mma_store"))
    .doc("Store an accumulator fragment (warp-wide)."),
];

/// Warp MMA and ldmatrix/stmatrix (issue 12 items 1-2).
pub(super) const WARP_MMA: &[OpDef] = &[
    // --- GPU: warp MMA, ldmatrix/stmatrix (issue 12 items 1-2)
    row(
        "mma_sync",
        "",
        "mma.sync.<shape>.<elem>",
        &["a", "b", "c"],
        1,
        "type of c",
    )
    .imms(imms!(MmaSync {
        shape: WarpShape = "mma.sync shape",
        elem: MmaElem = "mma.sync input type"
    }))
    .gpu()
    .fx(fx::WARP)
    .needs(MMA_SYNC)
    .rust("mma_sync(shape, elem, a, b, c)")
    .py(Py::Hand("mma_sync"))
    .doc("D = A * B + C over the warp; per-lane register fragments in PTX's layouts."),
    row(
        "ldmatrix",
        "",
        "ldmatrix.x<num>[.trans]",
        &["ptr"],
        1,
        "u32 or vec<u32, n>",
    )
    .imms(imms!(Ldmatrix {
        num: u32 = "matrix count",
        trans: bool = "trans"
    }))
    .sig("ptr<shared, _> -> _")
    .gpu()
    .fx(fx::READ | fx::WARP)
    .needs(LDMATRIX)
    .rust("ldmatrix(num, trans, ptr)")
    .py(Py::Hand("ldmatrix"))
    .doc("Load n 8x8 b16 matrices from shared memory; lane i*8+r gives row r of matrix i."),
    row(
        "stmatrix",
        "",
        "stmatrix.x<num>[.trans]",
        &["ptr", "value"],
        0,
        "–",
    )
    .imms(imms!(Stmatrix {
        num: u32 = "matrix count",
        trans: bool = "trans"
    }))
    .sig("ptr<shared, _>, _")
    .gpu()
    .fx(fx::WRITE | fx::WARP)
    .needs(STMATRIX)
    .rust("stmatrix(num, trans, ptr, value)")
    .py(Py::Hand("stmatrix"))
    .doc("Store n 8x8 b16 matrices to shared memory (the inverse of ldmatrix)."),
];

/// Warpgroup MMA (sm_90a) and warp specialisation (issue 13 items 1 and 5).
pub(super) const WARPGROUP_MMA: &[OpDef] = &[
    // --- issue 13 items 1 and 5: warpgroup MMA (sm_90a), warp specialisation
    row(
        "wgmma_desc",
        "",
        "wgmma.desc.<swizzle>",
        &["ptr", "lbo", "sbo"],
        1,
        "u64",
    )
    .imms(imms!(WgmmaDesc(swizzle: Swizzle = "swizzle")))
    .sig("ptr<shared, _>, u32, u32 -> u64")
    .gpu()
    .needs(WGMMA)
    .rust("wgmma_desc(swizzle, ptr, lbo, sbo)")
    .py(Py::Hand("wgmma_desc"))
    .doc("Shared-memory matrix descriptor: start address, leading/stride byte offsets, swizzle."),
    row(
        "wgmma",
        "",
        "wgmma.m64n<n>.<a>.<b>[.trans_a][.trans_b][.neg_a][.neg_b]",
        &["acc", "a", "b", "scale_d"],
        1,
        "type of acc",
    )
    .imms(imms!(Wgmma(Wgmma {
        n: u32 = "wgmma shape",
        a: MmaElem = "wgmma input type",
        b: MmaElem = "wgmma input type",
        trans_a: bool = "trans_a",
        trans_b: bool = "trans_b",
        neg_a: bool = "neg_a",
        neg_b: bool = "neg_b",
    })))
    .gpu()
    .fx(fx::READ | fx::WARP)
    .needs(WGMMA)
    .rust("wgmma(form, acc, a, b, scale_d)")
    .py(Py::Hand("wgmma"))
    .doc("D = (scale_d ? acc : 0) + A * B over the warpgroup (64 x N x K); B and A by descriptor or A in registers."),
    row("wgmma_zero", "", "wgmma.zero", NONE, 1, "accumulator (given)")
        .op(|| Op::WgmmaZero)
        .gpu()
        .rust("wgmma_zero(ty)")
        .py(Py::Hand("wgmma_zero"))
        .doc("An accumulator of zeros for `wgmma`."),
    row("wgmma_fence", "", "wgmma.fence", NONE, 0, "–")
        .op(|| Op::WgmmaFence)
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(WGMMA)
        .rust_shorthand("wgmma_fence()")
        .py(Py::Nullary("wgmma_fence"))
        .doc("Orders register and shared-memory accesses before the following `wgmma`s."),
    row("wgmma_commit", "", "wgmma.commit_group", NONE, 0, "–")
        .op(|| Op::WgmmaCommit)
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(WGMMA)
        .rust_shorthand("wgmma_commit_group()")
        .py(Py::Nullary("wgmma_commit_group"))
        .doc("Closes the current group of `wgmma`s."),
    row("wgmma_wait", "", "wgmma.wait_group.<n>", NONE, 0, "–")
        .imms(imms!(WgmmaWait(n: u32 = "count")))
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(WGMMA)
        .rust("wgmma_wait_group(n)")
        .py(Py::Hand("wgmma_wait_group"))
        .doc("Waits until at most n committed `wgmma` groups are pending."),
    row("setmaxnreg", "", "setmaxnreg.<inc|dec>.<count>", NONE, 0, "–")
        .imms(imms!(Setmaxnreg { count: u32 = "count", inc: bool = "setmaxnreg direction" }))
        .gpu()
        .fx(fx::SYNC | fx::WARP)
        .needs(SETMAXNREG)
        .rust("setmaxnreg(count, inc)")
        .py(Py::Hand("setmaxnreg"))
        .doc("Raises or lowers the warpgroup's per-thread register count (24..256, by 8)."),
    row("elect_sync", "", "elect.sync", NONE, 1, "bool")
        .op(|| Op::ElectSync)
        .sig("-> bool")
        .gpu()
        .fx(fx::WARP)
        .needs(ELECT_SYNC)
        .rust("elect_sync()")
        .py(Py::Nullary("elect_sync"))
        .doc("True in one lane of the warp (the lowest active one)."),
];
