//! Layout inference: gives every tile a [`Layout`] ([`Blocked`], or [`Mma`]
//! for tensor-core `dot` results) and inserts `ConvertLayout` where an op
//! needs its operand in another one. The program names no layout; the rules
//! (Triton's, simplified):
//!
//! - `load`, `full`, `iota`: the coalesced layout of the shape; for loads the
//!   fastest dim is the view's unit-stride dim when the front-end declared one,
//!   else the last.
//! - element-wise ops: the layout of the first operand in an `Mma` layout,
//!   else of the first not made from `full`s, `iota`s and broadcasts, else
//!   of the first;
//!   other operands are converted to it. `cast`: its operand's layout.
//! - `broadcast`: an `Mma` operand's layout; a blocked operand's layout when
//!   it spreads the result as evenly as the coalesced one (a reduce result
//!   keeps its tile's layout, so `x - max(x)` needs no conversion, for 2-byte
//!   data too); otherwise the coalesced layout of the result shape, which
//!   the operand must hold on its own shape.
//! - `reduce`: the operand's layout (blocked or `Mma`), on the reduced shape.
//! - `dot`: on tensor cores (the schedule's `dot_path` and arch allow it,
//!   f16/bf16 operands, M, N, K multiples of 16, 8, 16) the `mma.sync`
//!   accumulator layout [`Mma`]; on the FFMA path the coalesced layout of the
//!   accumulator. `a` and `b` are staged through shared memory either way, so
//!   any layout will do. A loop-carried accumulator that a `dot` in the loop
//!   updates starts in the `dot`'s layout, so nothing is converted per
//!   iteration.
//! - `for`: a carried tile keeps its initial value's layout, or, when that
//!   value is made from `full`s and `iota`s, the layout its yield gets in a
//!   trial inference of the body; yields are converted to it.
//! - converting a tile made from `full`s and `iota`s makes it again in the
//!   wanted layout, and converting a `broadcast` converts its source
//!   (`infer/remat.rs`).
//! - `store`, `atomic_add`: any layout (owners write).

mod remat;
mod rows;

use crate::error::{TileError, TileResult};
use crate::ir::{Op, ScalarId, TileId, TileProgram, Value};
use crate::layout::{Blocked, Layout, Mma};
use crate::lower::pipeline::{gemm_loop, wgmma_unfit};
use crate::schedule::{DotPath, Schedule};
use std::collections::{HashMap, HashSet};
use zyntax_hir::{Arch, Type};

/// The layout of every tile, indexed by [`TileId`].
#[derive(Clone, Debug, Default)]
pub struct Layouts {
    pub of: Vec<Option<Layout>>,
}

impl Layouts {
    pub fn get(&self, t: TileId) -> Option<&Layout> {
        self.of.get(t.0 as usize).and_then(Option::as_ref)
    }
    fn set(&mut self, t: TileId, l: Layout) {
        let i = t.0 as usize;
        if self.of.len() <= i {
            self.of.resize(i + 1, None);
        }
        self.of[i] = Some(l);
    }
}

struct Inference<'p> {
    program: &'p mut TileProgram,
    warps: u32,
    arch: Arch,
    dot_path: DotPath,
    layouts: Layouts,
    /// The first `dot` that `dot_path: MmaSync` cannot put on tensor cores.
    error: Option<TileError>,
    /// Tiles made by `full`, and their value: "converting" one makes a new
    /// `full` in the wanted layout instead of a trip through shared memory.
    fulls: HashMap<TileId, ScalarId>,
    /// Pipeline stages (the wgmma pipeline's shared-memory fit).
    stages: u32,
    /// The `a` operands of `dot`s of GEMM loops lowered to the wgmma
    /// pipeline (`lower/pipeline.rs`).
    wgmma: HashSet<TileId>,
    /// Definitions of tiles that may be made again in another layout
    /// instead of converted (`infer/remat.rs`).
    defs: HashMap<TileId, Op>,
    /// `dot` results whose warps all lie along M (`infer/rows.rs`).
    row_dots: HashSet<TileId>,
    /// Views the program stores or adds into (`infer/remat.rs` loads the
    /// others again rather than convert them).
    written: HashSet<crate::ir::ViewId>,
}

/// Infers layouts for `warps` warps with every `dot` on the FFMA path,
/// rewriting `program` in place.
pub fn infer(program: &mut TileProgram, warps: u32) -> Layouts {
    run(program, warps, Arch::Sm80, DotPath::Ffma, 1).0
}

/// Infers layouts for `schedule` (its warps, arch and `dot_path`), rewriting
/// `program` in place.
pub fn infer_for(program: &mut TileProgram, schedule: &Schedule) -> TileResult<Layouts> {
    let (layouts, error) = run(
        program,
        schedule.warps,
        schedule.arch,
        schedule.dot_path,
        schedule.stages,
    );
    match error {
        Some(e) => Err(e),
        None => Ok(layouts),
    }
}

fn run(
    program: &mut TileProgram,
    warps: u32,
    arch: Arch,
    dot_path: DotPath,
    stages: u32,
) -> (Layouts, Option<TileError>) {
    let body = std::mem::take(&mut program.body);
    let row_dots = rows::row_dots(&body);
    // Row dots on wgmma are marked like GEMM loops' (`dot_layout`).
    let wgmma = rows::wgmma_operands(program, &body, &row_dots, warps, arch, dot_path);
    let written = remat::written(&body);
    let mut inf = Inference {
        program,
        warps,
        arch,
        dot_path,
        layouts: Layouts::default(),
        error: None,
        fulls: HashMap::new(),
        stages,
        wgmma,
        defs: HashMap::new(),
        row_dots,
        written,
    };
    let body = inf.region(body);
    inf.program.body = body;
    (inf.layouts, inf.error)
}

impl Inference<'_> {
    fn coalesced(&self, t: TileId, contiguous: Option<usize>) -> Layout {
        let ty = self.program.tile(t);
        let rank = ty.shape.len();
        let bytes = ty.elem.size_bytes().unwrap_or(4) as u32;
        Blocked::coalesced(&ty.shape, self.warps, bytes, contiguous.unwrap_or(rank - 1)).into()
    }

    fn layout(&self, t: TileId) -> Layout {
        // Every operand was defined (and given a layout) before its use.
        self.layouts
            .get(t)
            .cloned()
            .unwrap_or_else(|| self.coalesced(t, None))
    }

    /// Why `a @ b` cannot run on `mma.sync`, if it cannot.
    fn mma_unfit(&self, a: TileId, b: TileId) -> Option<String> {
        let (ta, tb) = (self.program.tile(a), self.program.tile(b));
        let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
        if self.arch < Arch::Sm80 {
            Some(format!(
                "mma.sync needs sm_80, the schedule is for {}",
                self.arch
            ))
        } else if ta.elem != Type::F16 && ta.elem != Type::BF16 {
            Some(format!(
                "mma.sync takes f16 or bf16 operands, not {}",
                ta.elem
            ))
        } else if m % 16 != 0 || n % 8 != 0 || k % 16 != 0 {
            Some(format!(
                "mma.sync.m16n8k16 needs M, N, K multiples of 16, 8, 16; the dot is {m}x{n}x{k}"
            ))
        } else {
            None
        }
    }

    /// The accumulator layout of `out = a @ b`: [`Mma`] where the schedule
    /// allows tensor cores and the operands fit, else `None` (FFMA). A row
    /// statistics `dot` (`infer/rows.rs`) puts all its warps along M when
    /// each gets 16 rows or a multiple.
    fn dot_layout(&mut self, out: TileId, a: TileId, b: TileId) -> Option<Layout> {
        if self.dot_path == DotPath::Ffma {
            return self.ffma_layout(out, a, b);
        }
        if self.wgmma.contains(&a) {
            return Some(Layout::Mma(Mma::wgmma(self.warps)));
        }
        if self.dot_path == DotPath::Wgmma {
            if self.error.is_none() {
                self.error = Some(TileError::BadSchedule {
                    field: "dot_path",
                    message: "wgmma lowers the dot of a GEMM loop (a for_range whose body loads a and b and yields dot(a, b, carried)); this dot is not one".into(),
                });
            }
            return None;
        }
        match self.mma_unfit(a, b) {
            None => {
                let (m, n) = (self.program.tile(a).shape[0], self.program.tile(b).shape[1]);
                if self.row_dots.contains(&out) && m % (16 * self.warps) == 0 {
                    return Some(Layout::Mma(Mma {
                        version: 2,
                        warps_per_cta: [self.warps, 1],
                        instr_shape: [16, 8],
                    }));
                }
                Some(Layout::Mma(Mma::for_tile(m, n, self.warps)))
            }
            Some(why) => {
                if self.dot_path == DotPath::MmaSync && self.error.is_none() {
                    self.error = Some(TileError::BadSchedule {
                        field: "dot_path",
                        message: why,
                    });
                }
                self.ffma_layout(out, a, b)
            }
        }
    }

    /// The register-blocked accumulator of an f32 FFMA `dot` (None: the
    /// coalesced layout): each thread holds 4x4 blocks (lanes 4 along M by
    /// 8 along N, warps split to make a thread's rows and columns about as
    /// many), so `lower/dot.rs` reads a thread's 4 rows of `a` (staged
    /// K-major) and 4 columns of `b` per k as one 16-byte shared load each,
    /// a warp's loads over 64 and 128 contiguous bytes (no bank conflict):
    /// at 128x128 over 8 warps, 8x8 a thread, 4 loads for 64 FMAs (the
    /// coalesced layout: rows 8 apart, 12 loads for 128 FMAs, and 128
    /// registers at 64x64 for 32 accumulators).
    fn ffma_layout(&self, out: TileId, a: TileId, b: TileId) -> Option<Layout> {
        let f32_in = |t: TileId| self.program.tile(t).elem == Type::F32;
        let shape = &self.program.tile(out).shape;
        // (a row statistics dot keeps the layout its rows are broadcast in)
        if !(f32_in(a) && f32_in(b) && f32_in(out))
            || shape.len() != 2
            || self.row_dots.contains(&out)
        {
            return None;
        }
        let (bm, bn) = (shape[0], shape[1]);
        let mut best: Option<(u32, u32)> = None;
        let mut wn = 1;
        while wn <= self.warps {
            let wm = self.warps / wn;
            if wm * wn == self.warps && bm % (16 * wm) == 0 && bn % (32 * wn) == 0 {
                let (rows, cols) = (bm / (4 * wm), bn / (8 * wn));
                let skew = rows.abs_diff(cols);
                if best.is_none_or(|(bwm, bwn)| skew < (bm / (4 * bwm)).abs_diff(bn / (8 * bwn))) {
                    best = Some((wm, wn));
                }
            }
            wn *= 2;
        }
        let (wm, wn) = best?;
        Some(
            Blocked {
                size_per_thread: vec![4, 4],
                threads_per_warp: vec![4, 8],
                warps_per_cta: vec![wm, wn],
                order: vec![1, 0],
            }
            .into(),
        )
    }

    /// Marks the `dot` of a GEMM loop for the wgmma pipeline when the
    /// schedule allows it (`auto` on sm_90a, or `wgmma`) and the loop fits;
    /// with `dot_path: wgmma` a loop that does not fit (plain sm_90 included:
    /// wgmma is arch-specific PTX, sm_90a only) is an error.
    fn plan_wgmma(&mut self, args: &[Value], body: &[Op], yields: &[Value]) {
        let auto_ok = self.dot_path == DotPath::Auto && self.arch >= Arch::Sm90a;
        if !(auto_ok || self.dot_path == DotPath::Wgmma) {
            return;
        }
        let Some(g) = gemm_loop(self.program, args, body, yields) else {
            return;
        };
        match wgmma_unfit(self.program, &g, self.warps, self.stages, self.arch) {
            None => {
                self.wgmma.insert(g.a.out);
            }
            Some(why) if self.dot_path == DotPath::Wgmma && self.error.is_none() => {
                self.error = Some(TileError::BadSchedule {
                    field: "dot_path",
                    message: why,
                });
            }
            Some(_) => {}
        }
    }

    /// The layout a tile carried by a loop should start in: the layout of the
    /// `dot` in `body` that updates it (`yielded = dot(_, _, arg)`), if any.
    fn carried_dot_layout(&mut self, body: &[Op], arg: TileId, yielded: TileId) -> Option<Layout> {
        body.iter()
            .find_map(|op| match op {
                Op::Dot { out, a, b, acc, .. } if *out == yielded && *acc == arg => {
                    Some((*out, *a, *b))
                }
                _ => None,
            })
            .and_then(|(out, a, b)| self.dot_layout(out, a, b))
    }

    /// `t` in layout `want`: `t` itself, or a new tile converted to it.
    fn convert(&mut self, t: TileId, want: &Layout, out: &mut Vec<Op>) -> TileId {
        if self.layouts.get(t) == Some(want) {
            return t;
        }
        if let Some(made) = self.remake(t, want, out) {
            return made;
        }
        let ty = self.program.tile(t).clone();
        let converted = self.program.new_tile(ty);
        self.layouts.set(converted, want.clone());
        out.push(match self.fulls.get(&t) {
            Some(&value) => Op::Full {
                out: converted,
                value,
            },
            None => Op::ConvertLayout {
                out: converted,
                tile: t,
            },
        });
        converted
    }

    fn region(&mut self, ops: Vec<Op>) -> Vec<Op> {
        let mut out = Vec::with_capacity(ops.len());
        for op in ops {
            self.op(op, &mut out);
        }
        out
    }

    fn op(&mut self, mut op: Op, out: &mut Vec<Op>) {
        match &mut op {
            Op::Load { out: t, view, .. } => {
                // The tile's dims are the view's last ones (a lower-rank
                // tile indexes the leading dims).
                let v = self.program.view(*view);
                let lead = v.rank - self.program.tile(*t).shape.len();
                let contiguous = v.unit_stride_dim.and_then(|d| d.checked_sub(lead));
                let l = self.coalesced(*t, contiguous);
                self.layouts.set(*t, l);
            }
            Op::Full { out: t, value } => {
                self.fulls.insert(*t, *value);
                let l = self.coalesced(*t, None);
                self.layouts.set(*t, l);
            }
            Op::Iota { out: t, .. } => {
                let l = self.coalesced(*t, None);
                self.layouts.set(*t, l);
            }
            Op::Map { out: t, args, .. } => {
                let leader = self.map_leader(args);
                let l = self.layout(args[leader]);
                for (i, a) in args.iter_mut().enumerate() {
                    if i != leader {
                        *a = self.convert(*a, &l, out);
                    }
                }
                self.layouts.set(*t, l);
            }
            Op::Cast { out: t, tile } => {
                let l = self.layout(*tile);
                self.layouts.set(*t, l);
            }
            Op::Broadcast { out: t, tile } => {
                // An Mma layout holds a size-1 dim the way blocked ones do
                // (every thread along it), so its broadcast copies registers.
                let l = match self.layouts.get(*tile) {
                    Some(mma @ Layout::Mma(_)) => mma.clone(),
                    // A blocked operand keeps its layout where that spreads
                    // the result as evenly as the coalesced one: a row
                    // statistic of 2-byte data (8 per thread) then meets its
                    // rows without a trip through shared memory (f32's
                    // coalesced layout has 4 per thread).
                    Some(own @ Layout::Blocked(_)) => {
                        let shape = &self.program.tile(*t).shape;
                        let coalesced = self.coalesced(*t, None);
                        match own.num_regs(shape) <= coalesced.num_regs(shape) {
                            true => own.clone(),
                            false => coalesced,
                        }
                    }
                    _ => self.coalesced(*t, None),
                };
                *tile = self.convert(*tile, &l, out);
                self.layouts.set(*t, l);
            }
            Op::Reduce { out: t, tile, .. } => {
                let mut l = self.layout(*tile);
                if matches!(l, Layout::DotOperand(_)) {
                    l = self.coalesced(*tile, None);
                    *tile = self.convert(*tile, &l, out);
                }
                self.layouts.set(*t, l);
            }
            Op::Dot {
                out: t, a, b, acc, ..
            } => {
                let l = match self.dot_layout(*t, *a, *b) {
                    Some(mma) => mma,
                    None => self.coalesced(*acc, None),
                };
                *acc = self.convert(*acc, &l, out);
                self.layouts.set(*t, l);
            }
            Op::For {
                inits,
                args,
                body,
                yields,
                results,
                ..
            } => {
                self.plan_wgmma(args, body, yields);
                for (k, init) in inits.iter_mut().enumerate() {
                    if let (Value::Tile(i), Value::Tile(a), Value::Tile(r)) =
                        (*init, args[k], results[k])
                    {
                        let dot = match yields[k] {
                            Value::Tile(y) => self.carried_dot_layout(body, a, y),
                            Value::Scalar(_) => None,
                        };
                        let l = match dot {
                            Some(l) => {
                                *init = Value::Tile(self.convert(i, &l, out));
                                l
                            }
                            None => self.layout(i),
                        };
                        self.layouts.set(a, l.clone());
                        self.layouts.set(r, l);
                    }
                }
                self.carry_yield_layouts(inits, args, body, yields, results, out);
                let mut new_body = self.region(std::mem::take(body));
                for (y, a) in yields.iter_mut().zip(args.iter()) {
                    if let (Value::Tile(yt), Value::Tile(at)) = (y, a) {
                        let l = self.layout(*at);
                        *yt = self.convert(*yt, &l, &mut new_body);
                    }
                }
                *body = new_body;
            }
            Op::ConvertLayout { .. }
            | Op::Store { .. }
            | Op::AtomicAdd { .. }
            | Op::ScalarConst { .. }
            | Op::ProgramId { .. }
            | Op::ScalarBinary { .. }
            | Op::ScalarCmp { .. }
            | Op::ViewDim { .. } => {}
        }
        self.record(&op);
        out.push(op);
    }
}
