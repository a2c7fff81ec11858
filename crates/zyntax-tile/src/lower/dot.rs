//! `dot` on the FFMA path: `a` and `b` are staged row-major in shared memory,
//! then each thread accumulates its accumulator registers over K with `fma`,
//! reading each row of `a` and column of `b` it needs once per k (the
//! register-blocked outer product of a SIMT GEMM). f16/bf16 operands are
//! widened to f32 after the shared-memory read; tf32 operands lose their low
//! 13 mantissa bits there (as the tensor cores read them) and fp8 bytes are
//! decoded to f32 with integer arithmetic (any arch, the interpreter too).
//! The MMA (`mma.sync`) and wgmma lowerings, with their own operand layouts,
//! are `dot_mma.rs` and `dot_wgmma.rs`.

use super::convert::{align16, staged_bytes};
use super::Lowerer;
use crate::error::TileResult;
use crate::ir::{DotInputs, TileId};
use crate::layout::Layout;
use zyntax_hir::{Type, ValueId};

impl Lowerer<'_> {
    pub(super) fn dot(
        &mut self,
        out: TileId,
        a: TileId,
        b: TileId,
        acc: TileId,
        inputs: DotInputs,
    ) -> TileResult<()> {
        let (ta, tb) = (self.program.tile(a).clone(), self.program.tile(b).clone());
        let (m, k, n) = (ta.shape[0], ta.shape[1], tb.shape[1]);
        let pa = self.scratch_ptr(&ta.elem, 0)?;
        let b_offset = align16(u64::from(m) * u64::from(k) * staged_bytes(&ta.elem));
        let pb = self.scratch_ptr(&tb.elem, b_offset)?;
        let layout = self.layout(out)?;
        let f32_native =
            ta.elem == Type::F32 && tb.elem == Type::F32 && inputs == DotInputs::Native;
        if register_blocked(&layout) && f32_native {
            return self.dot_blocked(out, (a, pa), (b, pb), acc, [m, k, n], &layout);
        }
        self.stage(a, pa)?;
        self.stage(b, pb)?;
        self.b.barrier()?;

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
        for kk in 0..k {
            let kc = self.u32(kk)?;
            let mut a_vals = Vec::with_capacity(rows.len());
            for &row in &rows {
                let at = self.b.add(row, kc)?;
                let v = self.read_staged(pa, &ta.elem, at)?;
                a_vals.push(self.dot_input(v, &ta.elem, inputs)?);
            }
            let row_b = self.u32(kk * n)?;
            let mut b_vals = Vec::with_capacity(cols.len());
            for &col in &cols {
                let at = self.b.add(row_b, col)?;
                let v = self.read_staged(pb, &tb.elem, at)?;
                b_vals.push(self.dot_input(v, &tb.elem, inputs)?);
            }
            self.outer_product(&mut regs, &layout, shape, &a_vals, &b_vals)?;
        }
        self.b.barrier()?;
        self.set_tile(out, regs);
        Ok(())
    }
}

/// Whether an FFMA accumulator is register-blocked (`infer.rs`,
/// `ffma_layout`): runs of 4 along both dims, so a thread's rows and
/// columns come in aligned fours.
fn register_blocked(layout: &Layout) -> bool {
    matches!(layout, Layout::Blocked(b) if b.size_per_thread == [4, 4])
}

impl Lowerer<'_> {
    /// The FFMA `dot` of f32 tiles into a register-blocked accumulator: `a`
    /// staged K-major (`As[k][m]`) and `b` row-major (`Bs[k][n]`), then per
    /// k one 16-byte shared load per run of 4 of the thread's rows of `a`
    /// and of its columns of `b` (aligned: runs start at multiples of 4 and
    /// staged rows hold a multiple of 4 elements), and the outer product of
    /// the two into the accumulators.
    fn dot_blocked(
        &mut self,
        out: TileId,
        (a, pa): (TileId, ValueId),
        (b, pb): (TileId, ValueId),
        acc: TileId,
        [m, k, n]: [u32; 3],
        layout: &Layout,
    ) -> TileResult<()> {
        self.stage_as(a, pa, true, 0)?;
        self.stage(b, pb)?;
        self.b.barrier()?;
        let shape = [m, n];
        let table = self.coords(layout, &shape)?;
        let mut regs = self.regs(acc)?;
        let v4 = Type::Vector(zyntax_hir::ScalarType::F32, 4);
        let vptr = |this: &mut Self, p: ValueId| {
            this.b
                .ptr_cast(p, Type::ptr(zyntax_hir::AddrSpace::Shared, v4.clone()))
        };
        // Fours of a thread's rows (columns): their first coordinate.
        let firsts =
            |d: usize| -> Vec<ValueId> { table[d].iter().step_by(4).map(|c| c.value).collect() };
        let (rows, cols) = (firsts(0), firsts(1));
        for kk in 0..k {
            let fours = |this: &mut Self, base: ValueId, firsts: &[ValueId], row: u32| {
                let row = this.u32(kk * row)?;
                let mut vals = Vec::with_capacity(firsts.len() * 4);
                for &first in firsts {
                    let at = this.b.add(row, first)?;
                    let p = this.b.ptr_add(base, at)?;
                    let p = vptr(this, p)?;
                    let v = this.b.load(p)?;
                    for i in 0..4 {
                        vals.push(this.b.extract(v, i)?);
                    }
                }
                TileResult::Ok(vals)
            };
            let a_vals = fours(self, pa, &rows, m)?;
            let b_vals = fours(self, pb, &cols, n)?;
            self.outer_product(&mut regs, layout, shape, &a_vals, &b_vals)?;
        }
        self.b.barrier()?;
        self.set_tile(out, regs);
        Ok(())
    }

    /// `acc += a · b` for each accumulator register: the values of `a` and
    /// `b` for this k, indexed by the register's row and column.
    fn outer_product(
        &mut self,
        regs: &mut [ValueId],
        layout: &Layout,
        shape: [u32; 2],
        a_vals: &[ValueId],
        b_vals: &[ValueId],
    ) -> TileResult<()> {
        for (r, acc_reg) in regs.iter_mut().enumerate() {
            let dims = layout.reg_dims(&shape, r as u32);
            *acc_reg = self
                .b
                .fma(a_vals[dims[0] as usize], b_vals[dims[1] as usize], *acc_reg)?;
        }
        Ok(())
    }

    /// Operand element `v` (of type `elem`) as the f32 the dot multiplies.
    fn dot_input(&mut self, v: ValueId, elem: &Type, inputs: DotInputs) -> TileResult<ValueId> {
        match inputs {
            DotInputs::Native if *elem == Type::F32 => Ok(v),
            DotInputs::Native => Ok(self.b.cast(v, Type::F32)?),
            DotInputs::Tf32 => {
                let bits = self.b.bitcast(v, Type::U32)?;
                let mask = self.u32(0xffff_e000)?;
                let bits = self.b.and(bits, mask)?;
                Ok(self.b.bitcast(bits, Type::F32)?)
            }
            DotInputs::E4m3 => self.fp8_to_f32(v, 4, 3),
            DotInputs::E5m2 => self.fp8_to_f32(v, 5, 2),
        }
    }

    /// The f32 value of fp8 byte `v` with `eb` exponent and `mb` mantissa
    /// bits (bias `2^(eb-1) - 1`): normals rebuilt as f32 bits, subnormals as
    /// `m * 2^(1 - bias - mb)`; e4m3's one NaN (`S.1111.111`, no infinities)
    /// and e5m2's infinities and NaNs (exponent all ones) as IEEE does.
    fn fp8_to_f32(&mut self, v: ValueId, eb: u32, mb: u32) -> TileResult<ValueId> {
        let bias = (1u32 << (eb - 1)) - 1;
        let x = self.b.cast(v, Type::U32)?;
        let (c7, c31, cmb) = (self.u32(7)?, self.u32(31)?, self.u32(mb)?);
        let sign = self.b.shr(x, c7)?;
        let sign = self.b.shl(sign, c31)?;
        let e = self.b.shr(x, cmb)?;
        let e_mask = self.u32((1 << eb) - 1)?;
        let e = self.b.and(e, e_mask)?;
        let m_mask = self.u32((1 << mb) - 1)?;
        let m = self.b.and(x, m_mask)?;
        // Normal: exponent rebased to f32's bias, mantissa at the top.
        let rebase = self.u32(127 - bias)?;
        let ef = self.b.add(e, rebase)?;
        let c23 = self.u32(23)?;
        let ef = self.b.shl(ef, c23)?;
        let shift = self.u32(23 - mb)?;
        let mf = self.b.shl(m, shift)?;
        let normal = self.b.or(ef, mf)?;
        // Subnormal: exact in f32.
        let mv = self.b.cast(m, Type::F32)?;
        let unit = self
            .b
            .fconst(Type::F32, 2f64.powi(1 - bias as i32 - mb as i32))?;
        let sub = self.b.mul(mv, unit)?;
        let sub = self.b.bitcast(sub, Type::U32)?;
        let zero = self.u32(0)?;
        let is_sub = self.b.eq(e, zero)?;
        let mag = self.b.select(is_sub, sub, normal)?;
        let top = self.b.eq(e, e_mask)?;
        let special = if eb == 4 {
            // e4m3: only S.1111.111 is special (NaN).
            let all = self.b.eq(m, m_mask)?;
            let nan = self.b.and(top, all)?;
            let q = self.u32(0x7fc0_0000)?;
            self.b.select(nan, q, mag)?
        } else {
            let is_inf = self.b.eq(m, zero)?;
            let (inf, q) = (self.u32(0x7f80_0000)?, self.u32(0x7fc0_0000)?);
            let s = self.b.select(is_inf, inf, q)?;
            self.b.select(top, s, mag)?
        };
        let bits = self.b.or(special, sign)?;
        Ok(self.b.bitcast(bits, Type::F32)?)
    }
}
