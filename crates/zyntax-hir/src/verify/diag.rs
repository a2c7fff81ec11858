//! Diagnostics: the per-function checking context and how it reports
//! problems against the function, a block or an instruction.

use crate::entities::{BlockId, InstId, ValueId};
use crate::error::{Diagnostic, Loc};
use crate::ir::{Function, Module};
use crate::printer::print_inst;
use crate::types::Type;

pub(super) fn fn_diag(f: &Function, message: String) -> Diagnostic {
    Diagnostic {
        function: f.name.clone(),
        block: None,
        inst: None,
        inst_text: None,
        loc: f.loc.clone(),
        message,
    }
}

pub(super) struct Ctx<'a> {
    pub(super) m: &'a Module,
    pub(super) f: &'a Function,
    pub(super) diags: &'a mut Vec<Diagnostic>,
    /// Where each value is defined: (block, position); params at 0, inst k at k+1.
    pub(super) def_site: Vec<Option<(BlockId, usize)>>,
    /// Position of each block in the layout, if placed.
    pub(super) layout_pos: Vec<Option<usize>>,
}

impl Ctx<'_> {
    pub(super) fn func_err(&mut self, message: impl Into<String>) {
        let d = fn_diag(self.f, message.into());
        self.diags.push(d);
    }
    pub(super) fn block_err(&mut self, b: BlockId, message: impl Into<String>) {
        let loc = self.block_loc(b);
        self.diags.push(Diagnostic {
            function: self.f.name.clone(),
            block: Some(b),
            inst: None,
            inst_text: None,
            loc,
            message: message.into(),
        });
    }
    pub(super) fn inst_err(&mut self, b: BlockId, i: InstId, message: impl Into<String>) {
        let loc = self.f.insts.get(i.index()).and_then(|d| d.loc.clone());
        self.diags.push(Diagnostic {
            function: self.f.name.clone(),
            block: Some(b),
            inst: Some(i),
            inst_text: Some(print_inst(self.f, i)),
            loc: loc.or_else(|| self.f.loc.clone()),
            message: message.into(),
        });
    }
    /// A block's location: that of its first instruction, else the function's.
    pub(super) fn block_loc(&self, b: BlockId) -> Option<Loc> {
        self.f
            .blocks
            .get(b.index())
            .and_then(|bd| bd.insts.first())
            .and_then(|i| self.f.insts.get(i.index()))
            .and_then(|d| d.loc.clone())
            .or_else(|| self.f.loc.clone())
    }
    pub(super) fn ty(&self, v: ValueId) -> Option<&Type> {
        self.f.values.get(v.index()).map(|d| &d.ty)
    }
}
