//! Special registers: thread, block, grid and cluster indices and sizes.

use crate::cluster::cluster_rank;
use crate::decode::{DOp, InstCx, Special};
use crate::exec::{lanes, w, Exec, Flow};
use crate::{InterpError, Result};
use zyntax_hir::{Dim, Op};

/// Decode a read of a special register.
pub(crate) fn decode_special(ic: &InstCx) -> Result<DOp> {
    let which = match &ic.d.op {
        Op::ThreadIdx(d) => Special::Tid(dim(*d)),
        Op::BlockIdx(d) => Special::Bid(dim(*d)),
        Op::BlockDim(d) => Special::BDim(dim(*d)),
        Op::GridDim(d) => Special::GDim(dim(*d)),
        Op::LaneId => Special::Lane,
        Op::ClusterIdx(d) => Special::ClusterIdx(dim(*d)),
        Op::ClusterDim(d) => Special::ClusterDim(dim(*d)),
        Op::ClusterBlockIdx(d) => Special::ClusterBlockIdx(dim(*d)),
        Op::ClusterGridDim(d) => Special::ClusterGridDim(dim(*d)),
        Op::ClusterCtaRank => Special::ClusterRank,
        Op::ClusterNctaRank => Special::ClusterNRank,
        Op::IsExplicitCluster => Special::IsExplicitCluster,
        _ => return Err(InterpError::Internal("not a special register".into())),
    };
    Ok(DOp::Special {
        dst: ic.res(0)?,
        which,
    })
}

/// The index of a dimension.
fn dim(d: Dim) -> usize {
    match d {
        Dim::X => 0,
        Dim::Y => 1,
        Dim::Z => 2,
    }
}

impl Exec<'_> {
    /// Read a special register (thread, block, grid or cluster index or size).
    #[inline]
    pub(crate) fn exec_special(&mut self, wi: usize, mask: u32, op: &DOp) -> Result<Flow> {
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        match op {
            DOp::Special { dst, which } => {
                for l in lanes(mask) {
                    let t = self.tids[(base + l as u32) as usize];
                    let v = match which {
                        Special::Tid(d) => t[*d],
                        Special::Bid(d) => self.bid[*d],
                        Special::BDim(d) => self.bdim[*d],
                        Special::GDim(d) => self.grid[*d],
                        Special::Lane => l as u32 + self.lane_base,
                        Special::ClusterIdx(d) => self.bid[*d] / self.cluster[*d],
                        Special::ClusterDim(d) => self.cluster[*d],
                        Special::ClusterBlockIdx(d) => self.bid[*d] % self.cluster[*d],
                        Special::ClusterGridDim(d) => self.grid[*d] / self.cluster[*d],
                        Special::ClusterRank => cluster_rank(self.bid, self.cluster),
                        Special::ClusterNRank => self.cluster.iter().product(),
                        Special::IsExplicitCluster => u32::from(self.explicit_cluster),
                    };
                    w(regs, *dst, l, u64::from(v));
                }
            }
            _ => return Err(InterpError::Internal("not a special register".into())),
        }
        Ok(Flow::Next)
    }
}
