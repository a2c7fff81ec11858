//! Clusters, distributed shared memory, programmatic dependent launch and
//! grid-wide sync (issue 13 items 4-5, issue 12 item 6) → NVVM intrinsics
//! where LLVM 19 has them, else inline PTX.
//!
//! A `ptr<shared_cluster, T>` is a *generic* address in LLVM (LLVM 19 has no
//! `shared::cluster` address space): `mapa` is `llvm.nvvm.mapa` on the
//! generic form of the shared pointer, and loads, stores and atomics through
//! it are generic accesses, which reach any block's shared memory in the
//! cluster. `mbarrier.arrive_cluster` converts it back with
//! `cvta.to.shared::cluster`.
//!
//! `grid_sync` is the cooperative-groups algorithm: a block barrier; thread 0
//! of each block adds to a module-wide `u32` counter (`__zyntax_grid_sync`,
//! zero when the module loads) with release semantics: block (0, 0, 0) adds
//! 2^31 - (blocks - 1), every other block 1, so one sync adds exactly 2^31
//! and flips bit 31 once every block has arrived; it spins with acquire
//! loads until bit 31 differs from the value it saw, then a block barrier.
//! All blocks must be co-resident: the runtime insists on a cooperative launch.

use super::FnLowering;
use crate::error::CompileResult;
use inkwell::module::Linkage;
use inkwell::values::BasicMetadataValueEnum;
use inkwell::AddressSpace;
use zyntax_hir as hir;
use zyntax_hir::{ClusterBarrierOp, GriddepOp, Op};

/// The module global that counts `grid_sync` arrivals.
pub const GRID_SYNC_COUNTER: &str = "__zyntax_grid_sync";

/// Thread 0 of the block arrives and waits; `$0` is the counter's address.
/// Labels are local to the `{ }` scope, so the text may appear many times.
const GRID_SYNC_PTX: &str = "{
.reg .pred leader, first, wait;
.reg .b32 a, b, c, nb, old, cur;
mov.u32 a, %tid.x;
mov.u32 b, %tid.y;
mov.u32 c, %tid.z;
or.b32 a, a, b;
or.b32 a, a, c;
setp.ne.u32 leader, a, 0;
@leader bra ZGS_DONE;
mov.u32 a, %ctaid.x;
mov.u32 b, %ctaid.y;
mov.u32 c, %ctaid.z;
or.b32 a, a, b;
or.b32 a, a, c;
setp.eq.u32 first, a, 0;
mov.u32 a, %nctaid.x;
mov.u32 b, %nctaid.y;
mul.lo.u32 a, a, b;
mov.u32 b, %nctaid.z;
mul.lo.u32 a, a, b;
sub.u32 nb, 0x80000001, a;
selp.u32 nb, nb, 1, first;
atom.release.gpu.global.add.u32 old, [$0], nb;
ZGS_SPIN:
ld.acquire.gpu.global.u32 cur, [$0];
xor.b32 cur, cur, old;
and.b32 cur, cur, 0x80000000;
setp.eq.u32 wait, cur, 0;
@wait bra ZGS_SPIN;
ZGS_DONE:
}";

impl<'ctx> FnLowering<'_, 'ctx> {
    pub(super) fn lower_cluster(&mut self, d: &hir::InstData) -> CompileResult<()> {
        match &d.op {
            Op::ClusterIdx(dim) => self.cluster_sreg(d, &format!("clusterid.{dim}")),
            Op::ClusterDim(dim) => self.cluster_sreg(d, &format!("cluster.nctaid.{dim}")),
            Op::ClusterBlockIdx(dim) => self.cluster_sreg(d, &format!("cluster.ctaid.{dim}")),
            Op::ClusterGridDim(dim) => self.cluster_sreg(d, &format!("nclusterid.{dim}")),
            Op::ClusterCtaRank => self.cluster_sreg(d, "cluster.ctarank"),
            Op::ClusterNctaRank => self.cluster_sreg(d, "cluster.nctarank"),
            Op::IsExplicitCluster => {
                let v = self.intrinsic_value("llvm.nvvm.is_explicit_cluster", &[], &[])?;
                self.set(self.result(d, 0)?, v);
                Ok(())
            }
            Op::ClusterBarrier(op) => {
                let name = match op {
                    ClusterBarrierOp::Arrive => "llvm.nvvm.barrier.cluster.arrive",
                    ClusterBarrierOp::ArriveRelaxed => "llvm.nvvm.barrier.cluster.arrive.relaxed",
                    ClusterBarrierOp::Wait => "llvm.nvvm.barrier.cluster.wait",
                };
                self.intrinsic(name, &[], &[])?;
                Ok(())
            }
            Op::Mapa => {
                let generic = self.ctx().ptr_type(AddressSpace::default());
                let p = self.ptr(self.arg(d, 0)?)?;
                let p = self.b.build_address_space_cast(p, generic, "")?;
                let rank = self.int(self.arg(d, 1)?)?;
                let v = self.intrinsic_value("llvm.nvvm.mapa", &[], &[p.into(), rank.into()])?;
                self.set(self.result(d, 0)?, v);
                Ok(())
            }
            Op::MbarrierArriveCluster => self.arrive_cluster(d, ".release.cluster"),
            // Release at CTA scope: ptxas emits no MEMBAR.GPU before the
            // arrive (the cluster-scope release costs two per arrival).
            Op::MbarrierArriveClusterRelaxed => self.arrive_cluster(d, ""),
            Op::Griddep(op) => {
                let text = match op {
                    GriddepOp::LaunchDependents => "griddepcontrol.launch_dependents;",
                    GriddepOp::Wait => "griddepcontrol.wait;",
                };
                self.asm(text, "~{memory}", None, &[])?;
                Ok(())
            }
            Op::GridSync => self.grid_sync(),
            other => Err(self.bug(format!("no cluster lowering for `{}`", other.mnemonic()))),
        }
    }

    /// `mbarrier.arrive<sem>.shared::cluster` on the `mapa` result (a generic
    /// address, converted back to the shared::cluster window).
    fn arrive_cluster(&mut self, d: &hir::InstData, sem: &str) -> CompileResult<()> {
        let p = self.ptr(self.arg(d, 0)?)?;
        let p = self.b.build_ptr_to_int(p, self.ctx().i64_type(), "")?;
        let args: [BasicMetadataValueEnum<'ctx>; 1] = [p.into()];
        let text = format!(
            "{{ .reg .b64 a; cvta.to.shared::cluster.u64 a, $0; \
             mbarrier.arrive{sem}.shared::cluster.b64 _, [a]; }}"
        );
        self.asm(&text, "l,~{memory}", None, &args)?;
        Ok(())
    }

    fn cluster_sreg(&mut self, d: &hir::InstData, reg: &str) -> CompileResult<()> {
        let v = self.intrinsic_value(&format!("llvm.nvvm.read.ptx.sreg.{reg}"), &[], &[])?;
        self.set(self.result(d, 0)?, v);
        Ok(())
    }

    fn grid_sync(&mut self) -> CompileResult<()> {
        let i32t = self.ctx().i32_type();
        let module = &self.l.module;
        let counter = match module.get_global(GRID_SYNC_COUNTER) {
            Some(g) => g,
            None => {
                let g = module.add_global(i32t, Some(AddressSpace::from(1u16)), GRID_SYNC_COUNTER);
                g.set_initializer(&i32t.const_zero());
                g.set_linkage(Linkage::Internal);
                g.set_alignment(4);
                g
            }
        };
        let addr =
            self.b
                .build_ptr_to_int(counter.as_pointer_value(), self.ctx().i64_type(), "")?;
        self.intrinsic("llvm.nvvm.barrier0", &[], &[])?;
        let args: [BasicMetadataValueEnum<'ctx>; 1] = [addr.into()];
        self.asm(GRID_SYNC_PTX, "l,~{memory}", None, &args)?;
        self.intrinsic("llvm.nvvm.barrier0", &[], &[])?;
        Ok(())
    }
}
