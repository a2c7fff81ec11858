//! Functions and modules: the data of the HIR.
//!
//! A function owns three arenas (values, blocks, instructions) indexed by
//! [`ValueId`], [`BlockId`] and [`InstId`], plus `layout`, the order of its
//! blocks; the first block in `layout` is the entry, whose parameters are the
//! function's parameters. Blocks take parameters instead of phis: a branch
//! passes arguments to its target (see [`BlockCall`]).
//!
//! Source locations never take part in equality: two functions that differ
//! only in where they came from are equal.

use crate::entities::{BlockId, InstId, ValueId};
use crate::error::Loc;
use crate::op::{ConstValue, Op, OptLevel};
use crate::target::{Arch, PtxVersion};
use crate::types::{AddrSpace, Type};
use serde::{Deserialize, Serialize};

/// Where a value comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueDef {
    /// The n-th parameter of a block.
    Param(BlockId, u32),
    /// The n-th result of an instruction.
    Result(InstId, u32),
}

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ValueData {
    pub ty: Type,
    pub def: ValueDef,
}

#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockData {
    pub params: Vec<ValueId>,
    pub insts: Vec<InstId>,
}

/// A branch target with the arguments bound to its parameters.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct BlockCall {
    pub block: BlockId,
    pub args: Vec<ValueId>,
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct InstData {
    pub op: Op,
    pub args: Vec<ValueId>,
    pub results: Vec<ValueId>,
    /// Branch targets: one for `jump`, two (then, else) for `br`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub targets: Vec<BlockCall>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<Loc>,
}

impl PartialEq for InstData {
    fn eq(&self, other: &Self) -> bool {
        self.op == other.op
            && self.args == other.args
            && self.results == other.results
            && self.targets == other.targets
    }
}
impl Eq for InstData {}

/// Launch and resource metadata of a kernel entry point.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KernelInfo {
    /// Upper bound on threads per block in x, y, z (`.maxntid`), if declared.
    pub max_threads: Option<[u32; 3]>,
    /// Minimum resident blocks per SM (`.minnctapersm`); needs `max_threads`.
    pub min_blocks: Option<u32>,
    /// Register cap per thread (`.maxnreg`).
    pub max_registers: Option<u32>,
    /// Dynamic shared memory bytes the kernel expects at launch by default.
    pub shared_bytes: u32,
    /// The arch this kernel is compiled for, overriding the module's targets.
    pub arch: Option<Arch>,
    /// Exact threads per block in x, y, z (`.reqntid`), if declared: a launch
    /// with another block shape fails.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_threads: Option<[u32; 3]>,
    /// Blocks per cluster in x, y, z (`.reqnctapercluster` + `.explicitcluster`,
    /// sm_90), if declared: launches must use this cluster shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cluster: Option<[u32; 3]>,
}

/// What a function is.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FunctionKind {
    /// Runs on the CPU; may not use GPU instructions.
    Host,
    /// Runs on the GPU, called from kernels or other device functions.
    Device,
    /// A GPU entry point launched over a grid; returns nothing.
    Kernel(KernelInfo),
}

impl FunctionKind {
    pub fn keyword(&self) -> &'static str {
        match self {
            FunctionKind::Host => "host",
            FunctionKind::Device => "device",
            FunctionKind::Kernel(_) => "kernel",
        }
    }
    pub fn is_gpu(&self) -> bool {
        !matches!(self, FunctionKind::Host)
    }
    pub fn kernel_info(&self) -> Option<&KernelInfo> {
        match self {
            FunctionKind::Kernel(k) => Some(k),
            _ => None,
        }
    }
}

/// Execution constraints that drive the optimizer (see `zyntax-opt`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Constraints {
    /// Optimize for the latency of one call; attributes and pass pipeline follow.
    pub critical_path: bool,
    /// Proven, not assumed: any allocation reachable from the function is an error.
    pub no_alloc: bool,
    /// Inline this function into every caller.
    pub inline_always: bool,
    /// Drop bounds checks on memory accesses.
    pub no_bounds_check: bool,
    pub opt_level: OptLevel,
}

impl Constraints {
    /// The flags in `.zir` spelling, in a fixed order.
    pub fn flag_names(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        if self.critical_path {
            out.push("critical_path");
        }
        if self.no_alloc {
            out.push("no_alloc");
        }
        if self.inline_always {
            out.push("inline_always");
        }
        if self.no_bounds_check {
            out.push("no_bounds_check");
        }
        out
    }
}

#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Function {
    pub name: String,
    pub kind: FunctionKind,
    pub returns: Vec<Type>,
    pub constraints: Constraints,
    pub values: Vec<ValueData>,
    pub blocks: Vec<BlockData>,
    pub insts: Vec<InstData>,
    /// Block order; `layout[0]` is the entry block.
    pub layout: Vec<BlockId>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loc: Option<Loc>,
}

impl PartialEq for Function {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
            && self.kind == other.kind
            && self.returns == other.returns
            && self.constraints == other.constraints
            && self.values == other.values
            && self.blocks == other.blocks
            && self.insts == other.insts
            && self.layout == other.layout
    }
}
impl Eq for Function {}

impl Function {
    /// An empty function with no blocks.
    pub fn new(name: impl Into<String>, kind: FunctionKind, returns: Vec<Type>) -> Function {
        Function {
            name: name.into(),
            kind,
            returns,
            constraints: Constraints::default(),
            values: Vec::new(),
            blocks: Vec::new(),
            insts: Vec::new(),
            layout: Vec::new(),
            loc: None,
        }
    }

    pub fn entry(&self) -> Option<BlockId> {
        self.layout.first().copied()
    }

    /// Parameter types (those of the entry block).
    pub fn param_types(&self) -> Vec<Type> {
        match self.entry() {
            Some(b) => self
                .block(b)
                .params
                .iter()
                .map(|v| self.value_type(*v).clone())
                .collect(),
            None => Vec::new(),
        }
    }

    pub fn params(&self) -> &[ValueId] {
        match self.entry() {
            Some(b) => &self.block(b).params,
            None => &[],
        }
    }

    pub fn value(&self, v: ValueId) -> &ValueData {
        &self.values[v.index()]
    }
    pub fn value_type(&self, v: ValueId) -> &Type {
        &self.values[v.index()].ty
    }
    pub fn block(&self, b: BlockId) -> &BlockData {
        &self.blocks[b.index()]
    }
    pub fn inst(&self, i: InstId) -> &InstData {
        &self.insts[i.index()]
    }

    pub fn is_kernel(&self) -> bool {
        matches!(self.kind, FunctionKind::Kernel(_))
    }

    /// Whether an id is in range (the verifier checks every id with these before use).
    pub fn has_value(&self, v: ValueId) -> bool {
        v.index() < self.values.len()
    }
    pub fn has_block(&self, b: BlockId) -> bool {
        b.index() < self.blocks.len()
    }

    /// Instructions in layout order, with their block.
    pub fn insts_in_order(&self) -> impl Iterator<Item = (BlockId, InstId)> + '_ {
        self.layout
            .iter()
            .flat_map(move |b| self.block(*b).insts.iter().map(move |i| (*b, *i)))
    }

    /// Renumber blocks, values and instructions in layout order, dropping
    /// anything not reachable from the layout. After this, printing and parsing
    /// give back an equal function, and ids read top to bottom in the text.
    /// Ids that point outside the arenas are left as they are (the verifier reports them).
    pub fn canonicalize(&mut self) {
        let mut block_map = vec![None; self.blocks.len()];
        for (n, b) in self.layout.iter().enumerate() {
            if let Some(slot) = block_map.get_mut(b.index()) {
                *slot = Some(BlockId::from_index(n));
            }
        }
        let mut value_map: Vec<Option<ValueId>> = vec![None; self.values.len()];
        let mut inst_map: Vec<Option<InstId>> = vec![None; self.insts.len()];
        let mut next_value = 0usize;
        let mut next_inst = 0usize;
        for b in &self.layout {
            let Some(bd) = self.blocks.get(b.index()) else {
                continue;
            };
            for v in &bd.params {
                if let Some(slot) = value_map.get_mut(v.index()) {
                    if slot.is_none() {
                        *slot = Some(ValueId::from_index(next_value));
                        next_value += 1;
                    }
                }
            }
            for i in &bd.insts {
                let Some(slot) = inst_map.get_mut(i.index()) else {
                    continue;
                };
                if slot.is_some() {
                    continue;
                }
                *slot = Some(InstId::from_index(next_inst));
                next_inst += 1;
                for v in &self.insts[i.index()].results {
                    if let Some(slot) = value_map.get_mut(v.index()) {
                        if slot.is_none() {
                            *slot = Some(ValueId::from_index(next_value));
                            next_value += 1;
                        }
                    }
                }
            }
        }
        let mv = |v: ValueId| value_map.get(v.index()).copied().flatten().unwrap_or(v);
        let mb = |b: BlockId| block_map.get(b.index()).copied().flatten().unwrap_or(b);
        let mi = |i: InstId| inst_map.get(i.index()).copied().flatten().unwrap_or(i);

        let mut values: Vec<Option<ValueData>> = vec![None; next_value];
        for (old, data) in self.values.iter().enumerate() {
            if let Some(new) = value_map[old] {
                let def = match data.def {
                    ValueDef::Param(b, n) => ValueDef::Param(mb(b), n),
                    ValueDef::Result(i, n) => ValueDef::Result(mi(i), n),
                };
                values[new.index()] = Some(ValueData {
                    ty: data.ty.clone(),
                    def,
                });
            }
        }
        let mut insts: Vec<Option<InstData>> = vec![None; next_inst];
        for (old, data) in self.insts.iter().enumerate() {
            if let Some(new) = inst_map[old] {
                insts[new.index()] = Some(InstData {
                    op: data.op.clone(),
                    args: data.args.iter().map(|v| mv(*v)).collect(),
                    results: data.results.iter().map(|v| mv(*v)).collect(),
                    targets: data
                        .targets
                        .iter()
                        .map(|t| BlockCall {
                            block: mb(t.block),
                            args: t.args.iter().map(|v| mv(*v)).collect(),
                        })
                        .collect(),
                    loc: data.loc.clone(),
                });
            }
        }
        let blocks: Vec<BlockData> = self
            .layout
            .iter()
            .map(|b| match self.blocks.get(b.index()) {
                Some(bd) => BlockData {
                    params: bd.params.iter().map(|v| mv(*v)).collect(),
                    insts: bd.insts.iter().map(|i| mi(*i)).collect(),
                },
                None => BlockData::default(),
            })
            .collect();
        // Every slot is filled: each new id was assigned exactly once from an existing entry.
        self.values = values.into_iter().flatten().collect();
        self.insts = insts.into_iter().flatten().collect();
        self.layout = (0..blocks.len()).map(BlockId::from_index).collect();
        self.blocks = blocks;
    }
}

/// A module-level variable in device memory: `__constant__` (space
/// `constant`) or `__device__` (space `global`). Kernels reach it through
/// `global_addr @name`; the runtime reads and writes it by name.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct GlobalVar {
    pub name: String,
    /// `Constant` or `Global`.
    pub space: AddrSpace,
    /// A scalar or vector type.
    pub elem: Type,
    /// Number of elements (1 for a single value).
    pub count: u64,
    /// Initial value, one literal per scalar lane in order (vectors
    /// flattened); empty: zero-filled.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub init: Vec<ConstValue>,
}

impl GlobalVar {
    /// Size in bytes (`None` if the element type has no memory size).
    pub fn size_bytes(&self) -> Option<u64> {
        self.elem.size_bytes()?.checked_mul(self.count)
    }
    /// The type `global_addr @name` gives: a pointer to the element type.
    pub fn ptr_type(&self) -> Type {
        Type::ptr(self.space, self.elem.clone())
    }
    /// Scalar lanes in the whole variable (the length of a full `init`).
    pub fn lanes(&self) -> u64 {
        let per = match self.elem {
            Type::Vector(_, n) => u64::from(n),
            _ => 1,
        };
        per.saturating_mul(self.count)
    }
}

/// A compilation unit: functions plus GPU metadata.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Module {
    pub name: String,
    /// Module-level device variables, in declaration order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub globals: Vec<GlobalVar>,
    /// Archs every kernel must compile for (empty: decided at compile time).
    pub targets: Vec<Arch>,
    /// PTX ISA version to emit (default: per arch, see [`Arch::default_ptx`]).
    pub ptx_version: Option<PtxVersion>,
    pub functions: Vec<Function>,
}

impl Module {
    pub fn new(name: impl Into<String>) -> Module {
        Module {
            name: name.into(),
            globals: Vec::new(),
            targets: Vec::new(),
            ptx_version: None,
            functions: Vec::new(),
        }
    }

    pub fn function(&self, name: &str) -> Option<&Function> {
        self.functions.iter().find(|f| f.name == name)
    }

    pub fn function_mut(&mut self, name: &str) -> Option<&mut Function> {
        self.functions.iter_mut().find(|f| f.name == name)
    }

    pub fn global(&self, name: &str) -> Option<&GlobalVar> {
        self.globals.iter().find(|g| g.name == name)
    }

    pub fn kernels(&self) -> impl Iterator<Item = &Function> {
        self.functions.iter().filter(|f| f.is_kernel())
    }

    pub fn canonicalize(&mut self) {
        for f in &mut self.functions {
            f.canonicalize();
        }
    }

    /// JSON serialization (serde), carrying [`crate::FORMAT_VERSION`].
    pub fn to_json(&self) -> Result<String, serde_json::Error> {
        crate::version::to_json(self)
    }

    /// Read a module from JSON of any readable format version (see
    /// [`crate::version`]). The result is not verified, but its structure is
    /// checked ([`Module::check_structure`]), so the accessors of
    /// [`Function`] are safe on it.
    pub fn from_json(text: &str) -> Result<Module, serde_json::Error> {
        let m = crate::version::from_json(text)?;
        m.check_structure()
            .map_err(<serde_json::Error as serde::de::Error>::custom)?;
        Ok(m)
    }

    /// Every id in every function points into its arena, and every type nests
    /// at most [`crate::MAX_TYPE_DEPTH`] deep: what data from outside (JSON)
    /// must satisfy before anything indexes with its ids. The verifier checks
    /// far more; this is the part that keeps accessors from panicking.
    pub fn check_structure(&self) -> Result<(), String> {
        for g in &self.globals {
            g.elem
                .check_depth()
                .map_err(|e| format!("global {:?}: {e}", g.name))?;
        }
        for f in &self.functions {
            f.check_structure()
                .map_err(|e| format!("function {:?}: {e}", f.name))?;
        }
        Ok(())
    }
}

impl Function {
    /// See [`Module::check_structure`].
    pub fn check_structure(&self) -> Result<(), String> {
        let (nv, nb, ni) = (self.values.len(), self.blocks.len(), self.insts.len());
        let value = |v: &ValueId, at: &dyn Fn() -> String| {
            (v.index() < nv)
                .then_some(())
                .ok_or_else(|| format!("{} refers to {v}, but there are {nv} values", at()))
        };
        let block = |b: &BlockId, at: &dyn Fn() -> String| {
            (b.index() < nb)
                .then_some(())
                .ok_or_else(|| format!("{} refers to {b}, but there are {nb} blocks", at()))
        };
        let inst = |i: &InstId, at: &dyn Fn() -> String| {
            (i.index() < ni)
                .then_some(())
                .ok_or_else(|| format!("{} refers to {i}, but there are {ni} instructions", at()))
        };
        for t in &self.returns {
            t.check_depth().map_err(|e| format!("return type: {e}"))?;
        }
        for (k, d) in self.values.iter().enumerate() {
            let at = || format!("value v{k}");
            d.ty.check_depth().map_err(|e| format!("{}: {e}", at()))?;
            match &d.def {
                ValueDef::Param(b, _) => block(b, &at)?,
                ValueDef::Result(i, _) => inst(i, &at)?,
            }
        }
        for (k, bd) in self.blocks.iter().enumerate() {
            let at = || format!("block{k}");
            bd.params.iter().try_for_each(|v| value(v, &at))?;
            bd.insts.iter().try_for_each(|i| inst(i, &at))?;
        }
        for (k, d) in self.insts.iter().enumerate() {
            let at = || format!("inst{k}");
            d.args
                .iter()
                .chain(&d.results)
                .try_for_each(|v| value(v, &at))?;
            for t in &d.targets {
                block(&t.block, &at)?;
                t.args.iter().try_for_each(|v| value(v, &at))?;
            }
            if let Op::Alloca { elem, .. }
            | Op::SharedAlloc { elem, .. }
            | Op::DynShared { elem, .. } = &d.op
            {
                elem.check_depth().map_err(|e| format!("{}: {e}", at()))?;
            }
        }
        let at = || "the layout".to_string();
        self.layout.iter().try_for_each(|b| block(b, &at))
    }
}
