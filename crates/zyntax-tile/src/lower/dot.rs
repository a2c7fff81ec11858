//! `dot` on the FFMA path: `a` and `b` are staged row-major in shared memory,
//! then each thread accumulates its accumulator registers over K with `fma`,
//! reading each row of `a` and column of `b` it needs once per k (the
//! register-blocked outer product of a SIMT GEMM). f16/bf16 operands are
//! widened to f32 after the shared-memory read. The MMA (`mma.sync`) and
//! wgmma lowerings, with their own operand layouts, come later.

use super::convert::{align16, staged_bytes};
use super::Lowerer;
use crate::error::TileResult;
use crate::ir::TileId;
use zyntax_hir::Type;

impl Lowerer<'_> {
    pub(super) fn dot(&mut self, out: TileId, a: TileId, b: TileId, acc: TileId) -> TileResult<()> {
        let (ta, tb) = (self.program.tile(a).clone(), self.program.tile(b).clone());
        let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
        let pa = self.scratch_ptr(&ta.elem, 0)?;
        let b_offset = align16(u64::from(m) * u64::from(k) * staged_bytes(&ta.elem));
        let pb = self.scratch_ptr(&tb.elem, b_offset)?;
        self.stage(a, pa)?;
        self.stage(b, pb)?;
        self.b.barrier()?;

        let layout = self.layout(out)?;
        let shape = [m, n];
        let table = self.coords(&layout, &shape)?;
        let mut regs = self.regs(acc)?;
        // Row offsets into `a` (row · K) and column indices into `b`, per
        // register index along each dim.
        let k_v = self.u32(k)?;
        let rows = table[0]
            .iter()
            .map(|c| self.b.mul(c.value, k_v))
            .collect::<Result<Vec<_>, _>>()?;
        let cols: Vec<_> = table[1].iter().map(|c| c.value).collect();
        let widen = ta.elem != Type::F32;
        for kk in 0..k {
            let kc = self.u32(kk)?;
            let mut a_vals = Vec::with_capacity(rows.len());
            for &row in &rows {
                let at = self.b.add(row, kc)?;
                let v = self.read_staged(pa, &ta.elem, at)?;
                a_vals.push(if widen { self.b.cast(v, Type::F32)? } else { v });
            }
            let row_b = self.u32(kk * n)?;
            let mut b_vals = Vec::with_capacity(cols.len());
            for &col in &cols {
                let at = self.b.add(row_b, col)?;
                let v = self.read_staged(pb, &tb.elem, at)?;
                b_vals.push(if widen { self.b.cast(v, Type::F32)? } else { v });
            }
            for (r, acc_reg) in regs.iter_mut().enumerate() {
                let dims = layout.reg_dims(&shape, r as u32);
                *acc_reg =
                    self.b
                        .fma(a_vals[dims[0] as usize], b_vals[dims[1] as usize], *acc_reg)?;
            }
        }
        self.b.barrier()?;
        self.set_tile(out, regs);
        Ok(())
    }
}
