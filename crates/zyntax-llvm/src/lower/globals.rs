//! Module globals (issue 12 item 7): one LLVM global per [`hir::GlobalVar`],
//! `[count x elem]` in address space 4 (`.const`, a `__constant__`) or 1
//! (`.global`, a `__device__`), with external linkage so that it keeps its
//! name in the PTX and the driver finds it (`cuModuleGetGlobal`).

use super::{ty, FnLowering, Lowerer};
use crate::error::{CompileError, CompileResult};
use inkwell::module::Linkage;
use inkwell::types::{BasicType, BasicTypeEnum};
use inkwell::values::{BasicValue, BasicValueEnum, PointerValue};
use inkwell::AddressSpace;
use zyntax_hir as hir;
use zyntax_hir::{AddrSpace, ConstValue, ScalarType};

/// The NVPTX address space of a module global's symbol.
fn symbol_space(space: AddrSpace) -> u16 {
    match space {
        AddrSpace::Constant => 4,
        _ => 1,
    }
}

impl<'ctx> Lowerer<'ctx> {
    pub(super) fn declare_globals(&mut self, m: &hir::Module) -> CompileResult<()> {
        for g in &m.globals {
            let elem = ty::memory_type(self.ctx, &g.elem)?;
            let n = u32::try_from(g.count).map_err(|_| {
                CompileError::Unsupported(format!("global @{} has too many elements", g.name))
            })?;
            let arr = elem.array_type(n);
            let gv = self.module.add_global(
                arr,
                Some(AddressSpace::from(symbol_space(g.space))),
                &g.name,
            );
            gv.set_linkage(Linkage::External);
            gv.set_alignment(g.elem.align_bytes().max(4) as u32);
            if g.init.is_empty() {
                gv.set_initializer(&arr.const_zero());
            } else {
                gv.set_initializer(&self.global_init(g, elem)?);
            }
        }
        Ok(())
    }

    /// The initializer as a constant `[count x elem]`.
    fn global_init(
        &self,
        g: &hir::GlobalVar,
        elem: BasicTypeEnum<'ctx>,
    ) -> CompileResult<BasicValueEnum<'ctx>> {
        let bad = || CompileError::internal("lowering", format!("initializer of @{}", g.name));
        let lane = g.elem.elem_scalar().ok_or_else(bad)?;
        let lanes: Vec<BasicValueEnum<'ctx>> = g
            .init
            .iter()
            .map(|c| self.lane_const(lane, *c))
            .collect::<CompileResult<_>>()?;
        Ok(match elem {
            BasicTypeEnum::IntType(t) => {
                let v: Vec<_> = lanes.iter().map(|x| x.into_int_value()).collect();
                t.const_array(&v).as_basic_value_enum()
            }
            BasicTypeEnum::FloatType(t) => {
                let v: Vec<_> = lanes.iter().map(|x| x.into_float_value()).collect();
                t.const_array(&v).as_basic_value_enum()
            }
            BasicTypeEnum::VectorType(t) => {
                let per = t.get_size() as usize;
                let v: Vec<_> = lanes
                    .chunks(per)
                    .map(inkwell::types::VectorType::const_vector)
                    .collect();
                t.const_array(&v).as_basic_value_enum()
            }
            _ => return Err(bad()),
        })
    }

    fn lane_const(&self, s: ScalarType, c: ConstValue) -> CompileResult<BasicValueEnum<'ctx>> {
        let lt = ty::scalar_type(self.ctx, s);
        Ok(match (lt, c) {
            (BasicTypeEnum::IntType(it), ConstValue::Int(v)) => it.const_int(v as u64, true).into(),
            (BasicTypeEnum::FloatType(ft), ConstValue::Float(bits)) => {
                ft.const_float(f64::from_bits(bits)).into()
            }
            (BasicTypeEnum::FloatType(ft), ConstValue::Int(v)) => ft.const_float(v as f64).into(),
            _ => {
                return Err(CompileError::internal(
                    "lowering",
                    format!("initializer literal {c:?} for {s}"),
                ))
            }
        })
    }
}

impl<'ctx> FnLowering<'_, 'ctx> {
    /// `global_addr @name`: the symbol's address as the HIR pointer type. A
    /// `ptr<constant>` is an LLVM address-space-1 pointer (see
    /// [`ty::llvm_space`]), so a `.const` symbol goes there through its
    /// generic address (`cvta.const`); the generic and global windows
    /// coincide, and LLVM rejects a direct 4 → 1 cast, hence the integer.
    pub(super) fn global_addr(&mut self, name: &str) -> CompileResult<PointerValue<'ctx>> {
        let gv = self
            .l
            .module
            .get_global(name)
            .ok_or_else(|| self.bug(format!("global @{name} was not declared")))?;
        let p = gv.as_pointer_value();
        if p.get_type().get_address_space() == AddressSpace::from(1u16) {
            return Ok(p);
        }
        let generic =
            self.b
                .build_address_space_cast(p, self.ctx().ptr_type(AddressSpace::default()), "")?;
        let addr = self
            .b
            .build_ptr_to_int(generic, self.ctx().i64_type(), "")?;
        Ok(self
            .b
            .build_int_to_ptr(addr, ty::ptr_type(self.ctx(), AddrSpace::Constant), "")?)
    }
}
