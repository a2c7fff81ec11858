//! `full`, `iota`, element-wise maps, `broadcast` and `cast`: register by
//! register, no data movement (operands share the result's layout; layout
//! inference converted any that did not).

use super::Lowerer;
use crate::error::{TileError, TileResult};
use crate::ir::{MapOp, ScalarId, TileId};

impl Lowerer<'_> {
    pub(super) fn full(&mut self, out: TileId, value: ScalarId) -> TileResult<()> {
        let layout = self.layout(out)?;
        let n = layout.num_regs(&self.program.tile(out).shape);
        let v = self.scalar(value)?;
        self.set_tile(out, vec![v; n as usize]);
        Ok(())
    }

    pub(super) fn iota(&mut self, out: TileId, axis: usize) -> TileResult<()> {
        let layout = self.layout(out)?;
        let shape = self.program.tile(out).shape.clone();
        let table = self.coords(&layout, &shape)?;
        let regs = (0..layout.num_regs(&shape))
            .map(|r| Self::reg_coords(&layout, &shape, &table, r)[axis].value)
            .collect();
        self.set_tile(out, regs);
        Ok(())
    }

    pub(super) fn map(&mut self, out: TileId, op: MapOp, args: &[TileId]) -> TileResult<()> {
        let operands = args
            .iter()
            .map(|a| self.regs(*a))
            .collect::<TileResult<Vec<_>>>()?;
        let n = operands[0].len();
        if operands.iter().any(|o| o.len() != n) {
            return Err(TileError::Internal(
                "map operands in different layouts".into(),
            ));
        }
        let regs = (0..n)
            .map(|r| {
                let x = |i: usize| operands[i][r];
                match op {
                    MapOp::Unary(u) => self.b.unary(u, x(0)),
                    MapOp::Binary(b) => self.b.binary(b, x(0), x(1)),
                    MapOp::Cmp(c) => self.b.cmp(c, x(0), x(1)),
                    MapOp::Fma => self.b.fma(x(0), x(1), x(2)),
                    MapOp::Where => self.b.select(x(0), x(1), x(2)),
                    MapOp::Approx(a) => self.b.approx(a, x(0)),
                }
            })
            .collect::<Result<Vec<_>, _>>()?;
        self.set_tile(out, regs);
        Ok(())
    }

    /// The source and result share a layout; along a broadcast dim the source
    /// has one register, which every result register along it reads.
    pub(super) fn broadcast(&mut self, out: TileId, tile: TileId) -> TileResult<()> {
        let layout = self.layout(out)?;
        let out_shape = self.program.tile(out).shape.clone();
        let src_shape = self.program.tile(tile).shape.clone();
        let src = self.regs(tile)?;
        let mut regs = Vec::new();
        for r in 0..layout.num_regs(&out_shape) {
            let mut dims = layout.reg_dims(&out_shape, r);
            for (d, &s) in src_shape.iter().enumerate() {
                if s == 1 {
                    dims[d] = 0;
                }
            }
            let from = layout.reg_index(&src_shape, &dims) as usize;
            regs.push(
                *src.get(from)
                    .ok_or_else(|| TileError::Internal("broadcast register".into()))?,
            );
        }
        self.set_tile(out, regs);
        Ok(())
    }

    pub(super) fn cast(&mut self, out: TileId, tile: TileId) -> TileResult<()> {
        let elem = self.program.tile(out).elem.clone();
        let regs = self
            .regs(tile)?
            .into_iter()
            .map(|v| self.b.cast(v, elem.clone()))
            .collect::<Result<_, _>>()?;
        self.set_tile(out, regs);
        Ok(())
    }
}
