//! TMA and bulk copies (issue 13 item 2) → inline PTX.
//!
//! LLVM 19 has `cp.async.bulk*` intrinsics only for some forms, so each op is
//! one inline PTX instruction, exactly the one `docs/lowering.md` names.
//! A `tensormap` kernel parameter is a `ptr byval([128 x i8]) align 64`
//! marked `grid_constant` (see [`Lowerer::declare`](super)), so its SSA value
//! is the generic address of the parameter (`cvta.param`), which is what the
//! instructions take. Addresses travel as 64-bit registers (`l`),
//! coordinates and byte counts as 32-bit (`r`), the multicast mask as 16-bit (`h`).

use super::FnLowering;
use crate::error::CompileResult;
use inkwell::values::BasicMetadataValueEnum;
use zyntax_hir as hir;
use zyntax_hir::{BulkRedOp, Op, ScalarType, Type};

/// The `.type` of `cp.reduce.async.bulk` (f16/bf16 `add` is `.noftz`).
fn reduce_type(op: BulkRedOp, s: ScalarType) -> &'static str {
    use ScalarType as S;
    match (op, s) {
        (BulkRedOp::Add, S::F16) => ".noftz.f16",
        (BulkRedOp::Add, S::BF16) => ".noftz.bf16",
        (_, S::F16) => ".f16",
        (_, S::BF16) => ".bf16",
        (_, S::F32) => ".f32",
        (_, S::F64) => ".f64",
        (_, S::U32) => ".u32",
        (_, S::I32) => ".s32",
        (_, S::U64) => ".u64",
        _ => ".s64",
    }
}

impl<'ctx> FnLowering<'_, 'ctx> {
    /// A pointer operand as a 64-bit address.
    fn addr64(
        &mut self,
        d: &hir::InstData,
        n: usize,
    ) -> CompileResult<BasicMetadataValueEnum<'ctx>> {
        let p = self.ptr(self.arg(d, n)?)?;
        Ok(self
            .b
            .build_ptr_to_int(p, self.ctx().i64_type(), "")?
            .into())
    }

    /// `{$a, $b, ...}` for operands `first..first + n`.
    fn coord_list(first: usize, n: usize) -> String {
        let regs: Vec<String> = (first..first + n).map(|i| format!("${i}")).collect();
        format!("{{{}}}", regs.join(", "))
    }

    pub(super) fn tma(&mut self, d: &hir::InstData) -> CompileResult<()> {
        let mut args: Vec<BasicMetadataValueEnum<'ctx>> = Vec::new();
        let mut cons: Vec<&str> = Vec::new();
        let text = match &d.op {
            Op::TmaLoad { multicast } => {
                // dst, tmap, bar, coords…, [mask]
                for i in 0..3 {
                    args.push(self.addr64(d, i)?);
                    cons.push("l");
                }
                let n = d.args.len() - 3 - usize::from(*multicast);
                for i in 0..n {
                    args.push(self.int(self.arg(d, 3 + i)?)?.into());
                    cons.push("r");
                }
                let mut t = format!(
                    "cp.async.bulk.tensor.{n}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                );
                let tail = if *multicast {
                    args.push(self.int(self.arg(d, 3 + n)?)?.into());
                    cons.push("h");
                    t.push_str(".multicast::cluster");
                    format!(", ${}", 3 + n)
                } else {
                    String::new()
                };
                format!("{t} [$0], [$1, {}], [$2]{tail};", Self::coord_list(3, n))
            }
            Op::TmaStore | Op::TmaReduce(_) => {
                // tmap, src, coords…
                for i in 0..2 {
                    args.push(self.addr64(d, i)?);
                    cons.push("l");
                }
                let n = d.args.len() - 2;
                for i in 0..n {
                    args.push(self.int(self.arg(d, 2 + i)?)?.into());
                    cons.push("r");
                }
                let coords = Self::coord_list(2, n);
                match &d.op {
                    Op::TmaReduce(r) => format!(
                        "cp.reduce.async.bulk.tensor.{n}d.global.shared::cta.{r}.tile.bulk_group [$0, {coords}], [$1];"
                    ),
                    _ => format!(
                        "cp.async.bulk.tensor.{n}d.global.shared::cta.tile.bulk_group [$0, {coords}], [$1];"
                    ),
                }
            }
            Op::BulkCopyG2S => {
                args.push(self.addr64(d, 0)?);
                args.push(self.addr64(d, 1)?);
                args.push(self.int(self.arg(d, 2)?)?.into());
                args.push(self.addr64(d, 3)?);
                cons.extend(["l", "l", "r", "l"]);
                "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [$0], [$1], $2, [$3];"
                    .into()
            }
            Op::BulkCopyS2G => {
                args.push(self.addr64(d, 0)?);
                args.push(self.addr64(d, 1)?);
                args.push(self.int(self.arg(d, 2)?)?.into());
                cons.extend(["l", "l", "r"]);
                "cp.async.bulk.global.shared::cta.bulk_group [$0], [$1], $2;".into()
            }
            Op::BulkReduce(r) => {
                let elem = self
                    .hir_ty(self.arg(d, 1)?)
                    .pointee()
                    .and_then(Type::as_scalar)
                    .ok_or_else(|| self.bug("bulk.reduce on a non-scalar pointer"))?;
                args.push(self.addr64(d, 0)?);
                args.push(self.addr64(d, 1)?);
                args.push(self.int(self.arg(d, 2)?)?.into());
                cons.extend(["l", "l", "r"]);
                format!(
                    "cp.reduce.async.bulk.global.shared::cta.bulk_group.{r}{} [$0], [$1], $2;",
                    reduce_type(*r, elem)
                )
            }
            Op::BulkCommitGroup => "cp.async.bulk.commit_group;".into(),
            Op::BulkWaitGroup { pending, read } => format!(
                "cp.async.bulk.wait_group{} {pending};",
                if *read { ".read" } else { "" }
            ),
            Op::PrefetchTensormap => {
                args.push(self.addr64(d, 0)?);
                cons.push("l");
                "prefetch.tensormap [$0];".into()
            }
            other => return Err(self.bug(format!("`{}` is not a TMA op", other.mnemonic()))),
        };
        cons.push("~{memory}");
        self.asm(&text, &cons.join(","), None, &args)?;
        Ok(())
    }
}
