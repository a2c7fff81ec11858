//! Hopper barriers (issue 13) → inline PTX.
//!
//! LLVM 19 has intrinsics for the sm_80 `mbarrier` forms only, none for the
//! transaction-count forms, `try_wait.parity` or the async-proxy fences, so
//! every `mbarrier` op is one inline PTX instruction (uniform and exactly the
//! instruction the docs name). The barrier's shared address travels as a
//! 64-bit register (`l`); predicates come back through `selp` as a u32.

use super::FnLowering;
use crate::error::CompileResult;
use inkwell::values::BasicMetadataValueEnum;
use inkwell::IntPredicate;
use zyntax_hir as hir;
use zyntax_hir::MbarrierOp;

impl<'ctx> FnLowering<'_, 'ctx> {
    pub(super) fn mbarrier(&mut self, d: &hir::InstData, op: MbarrierOp) -> CompileResult<()> {
        let i64t = self.ctx().i64_type();
        let i32t = self.ctx().i32_type();
        let bar = self.ptr(self.arg(d, 0)?)?;
        let bar = self.b.build_ptr_to_int(bar, i64t, "")?;
        let mut args: Vec<BasicMetadataValueEnum<'ctx>> = vec![bar.into()];
        for i in 1..d.args.len() {
            args.push(self.int(self.arg(d, i)?)?.into());
        }
        // (PTX text, constraints, result: None / u64 state / predicate)
        let (text, cons, ret) = match op {
            MbarrierOp::Init => ("mbarrier.init.shared.b64 [$0], $1;", "l,r", 0),
            MbarrierOp::Inval => ("mbarrier.inval.shared.b64 [$0];", "l", 0),
            MbarrierOp::Arrive => ("mbarrier.arrive.shared.b64 $0, [$1];", "=l,l", 1),
            MbarrierOp::ArriveExpectTx => (
                "mbarrier.arrive.expect_tx.shared::cta.b64 $0, [$1], $2;",
                "=l,l,r",
                1,
            ),
            MbarrierOp::CompleteTx => (
                "mbarrier.complete_tx.shared::cta.b64 [$0], $1;",
                "l,r",
                0,
            ),
            MbarrierOp::TestWait => (
                "{ .reg .pred p; mbarrier.test_wait.shared.b64 p, [$1], $2; selp.u32 $0, 1, 0, p; }",
                "=r,l,l",
                2,
            ),
            MbarrierOp::TryWaitParity => (
                "{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [$1], $2, $3; selp.u32 $0, 1, 0, p; }",
                "=r,l,r,r",
                2,
            ),
        };
        let cons = format!("{cons},~{{memory}}");
        let ty = match ret {
            0 => None,
            1 => Some(i64t.into()),
            _ => Some(i32t.into()),
        };
        let r = self.asm(text, &cons, ty, &args)?;
        if let Some(r) = r {
            let r = if ret == 2 {
                let zero = i32t.const_zero();
                self.b
                    .build_int_compare(IntPredicate::NE, r.into_int_value(), zero, "")?
                    .into()
            } else {
                r
            };
            self.set(self.result(d, 0)?, r);
        }
        Ok(())
    }

    /// `fence.proxy.async` (`shared_cta`: the only state space zyntax's async ops use)
    /// or `fence.mbarrier_init.release.cluster`.
    pub(super) fn hopper_fence(&mut self, init: bool) -> CompileResult<()> {
        let text = if init {
            "fence.mbarrier_init.release.cluster;"
        } else {
            "fence.proxy.async.shared::cta;"
        };
        self.asm(text, "~{memory}", None, &[])?;
        Ok(())
    }
}
