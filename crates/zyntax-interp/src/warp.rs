//! Warp collectives: `warp_sync`, `shfl`, `vote`, `redux`, `match` and
//! `elect`. They run once every lane their member masks name has arrived
//! (see `Exec::gather_collective`); each lane reads the others' values
//! as they were when the last lane arrived.

use crate::decode::{DOp, InstCx};
use crate::exec::{lanes, r, w, Exec};
use crate::{InterpError, Result};
use zyntax_hir::{MatchMode, Op, ReduxOp, ShflMode, Type, VoteMode};

/// Decode a warp collective.
pub(crate) fn decode_warp(ic: &InstCx) -> Result<DOp> {
    Ok(match &ic.d.op {
        Op::WarpSync => DOp::WarpSync { mask: ic.arg(0)? },
        Op::Redux(op) => DOp::Redux {
            op: *op,
            signed: ic.arg_ty(1) == Type::I32,
            dst: ic.res(0)?,
            mask: ic.arg(0)?,
            val: ic.arg(1)?,
        },
        Op::Shfl { mode, width } => {
            if !width.is_power_of_two() || *width > 32 {
                return ic.bad("shuffle width must be a power of two <= 32");
            }
            DOp::Shfl {
                mode: *mode,
                width: *width,
                dst: ic.res(0)?,
                mask: ic.arg(0)?,
                val: ic.arg(1)?,
                lane: ic.arg(2)?,
                n: ic.res_slots(),
            }
        }
        Op::Vote(mode) => DOp::Vote {
            mode: *mode,
            dst: ic.res(0)?,
            mask: ic.arg(0)?,
            pred: ic.arg(1)?,
        },
        Op::Match(mode) => DOp::Match {
            mode: *mode,
            dst: ic.res(0)?,
            dst2: if *mode == MatchMode::All {
                ic.res(1)?
            } else {
                0
            },
            mask: ic.arg(0)?,
            val: ic.arg(1)?,
            n: ic.arg_slots(1),
        },
        Op::ElectSync => DOp::Elect { dst: ic.res(0)? },
        _ => return Err(InterpError::Internal("not a warp collective".into())),
    })
}

impl Exec<'_> {
    /// Execute a warp collective (`warp_sync`, `shfl`, `vote`, `redux`, `match`,
    /// `elect`) for the lanes `group`.
    pub(crate) fn exec_warp(&mut self, wi: usize, group: u32, op: &DOp) -> Result<()> {
        let warp = &mut self.warps[wi];
        match op {
            DOp::WarpSync { .. } => {}
            DOp::Shfl {
                mode,
                width,
                dst,
                mask,
                val,
                lane,
                n,
            } => {
                let segmask = (32 - width) & 31;
                let cval = if *mode == ShflMode::Up { 0 } else { 31 };
                for l in lanes(group) {
                    let li = l as i32;
                    let b = (r(&warp.regs, *lane, l) & 31) as i32;
                    let seg = segmask as i32;
                    let max_lane = (li & seg) | (cval & !seg & 31);
                    let min_lane = li & seg;
                    let (j, ok) = match mode {
                        ShflMode::Up => {
                            let j = li - b;
                            (j, j >= max_lane)
                        }
                        ShflMode::Down => {
                            let j = li + b;
                            (j, j <= max_lane)
                        }
                        ShflMode::Xor => {
                            let j = li ^ b;
                            (j, j <= max_lane)
                        }
                        ShflMode::Idx => {
                            let j = min_lane | (b & !seg & 31);
                            (j, j <= max_lane)
                        }
                    };
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    // Out of the segment: own value (PTX). A source lane that does not
                    // take part: own value too (PTX leaves it undefined).
                    let j = if ok && (0..32).contains(&j) && mm & (1 << j) != 0 {
                        j as usize
                    } else {
                        l
                    };
                    for k in 0..*n {
                        let v = r(&warp.regs, val + k, j);
                        w(&mut warp.regs, dst + k, l, v);
                    }
                }
            }
            DOp::Vote {
                mode,
                dst,
                mask,
                pred,
            } => {
                let mut ballot_all = 0u32;
                for l in lanes(group) {
                    if r(&warp.regs, *pred, l) & 1 != 0 {
                        ballot_all |= 1 << l;
                    }
                }
                for l in lanes(group) {
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    let b = ballot_all & mm;
                    let v = match mode {
                        VoteMode::Ballot => u64::from(b),
                        VoteMode::Any => u64::from(b != 0),
                        VoteMode::All => u64::from(b == mm),
                    };
                    w(&mut warp.regs, *dst, l, v);
                }
            }
            // issue 12: each lane gets the reduction over the lanes of its mask.
            DOp::Redux {
                op,
                signed,
                dst,
                mask,
                val,
            } => {
                let mut out = [0u64; 32];
                for l in lanes(group) {
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    let vals = lanes(mm).map(|j| r(&warp.regs, *val, j) as u32);
                    let key = |x: u32| {
                        if *signed {
                            i64::from(x as i32)
                        } else {
                            i64::from(x)
                        }
                    };
                    out[l] = u64::from(match op {
                        ReduxOp::Add => vals.fold(0u32, u32::wrapping_add),
                        ReduxOp::Min => vals.min_by_key(|x| key(*x)).unwrap_or(0),
                        ReduxOp::Max => vals.max_by_key(|x| key(*x)).unwrap_or(0),
                        ReduxOp::And => vals.fold(u32::MAX, |a, x| a & x),
                        ReduxOp::Or => vals.fold(0, |a, x| a | x),
                        ReduxOp::Xor => vals.fold(0, |a, x| a ^ x),
                    });
                }
                for l in lanes(group) {
                    w(&mut warp.regs, *dst, l, out[l]);
                }
            }
            DOp::Match {
                mode,
                dst,
                dst2,
                mask,
                val,
                n,
            } => {
                let eq = |regs: &[u64], a: usize, b: usize| {
                    (0..*n).all(|k| r(regs, val + k, a) == r(regs, val + k, b))
                };
                let mut out = [(0u32, false); 32];
                for l in lanes(group) {
                    let mm = r(&warp.regs, *mask, l) as u32 & group;
                    let mut same = 0u32;
                    for j in lanes(mm) {
                        if eq(&warp.regs, l, j) {
                            same |= 1 << j;
                        }
                    }
                    out[l] = match mode {
                        MatchMode::Any => (same, false),
                        MatchMode::All => {
                            if same == mm {
                                (mm, true)
                            } else {
                                (0, false)
                            }
                        }
                    };
                }
                for l in lanes(group) {
                    w(&mut warp.regs, *dst, l, u64::from(out[l].0));
                    if *mode == MatchMode::All {
                        w(&mut warp.regs, *dst2, l, u64::from(out[l].1));
                    }
                }
            }
            DOp::Elect { dst } => {
                let first = group.trailing_zeros() as usize;
                for l in lanes(group) {
                    w(&mut warp.regs, *dst, l, u64::from(l == first));
                }
            }

            _ => return Err(InterpError::Internal("not a warp collective".into())),
        }
        Ok(())
    }
}
