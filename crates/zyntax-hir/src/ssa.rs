//! SSA construction from variables, while the function is being built.
//!
//! A front-end declares a variable ([`FunctionBuilder::declare_var`]), assigns
//! it ([`FunctionBuilder::def_var`]) and reads it ([`FunctionBuilder::use_var`])
//! in whatever block it is translating; the builder finds the value that
//! reaches the read and adds block parameters where control flow joins. The
//! algorithm is the one of Braun, Buchwald, Hack, Leißa, Mallon and Zwinkau,
//! "Simple and Efficient Construction of Static Single Assignment Form"
//! (CC 2013), the same Cranelift's frontend uses, with block parameters for phis:
//!
//! - a block is *sealed* once all its predecessors are known
//!   ([`FunctionBuilder::seal_block`]); a branch to a sealed block is an error;
//! - a read in a block without a local definition looks at its predecessors:
//!   one predecessor (sealed block) → its value; several → a new block
//!   parameter whose branch arguments are the value at the end of each
//!   predecessor; an unsealed block → a new parameter whose arguments are
//!   filled in when the block is sealed;
//! - a parameter whose incoming arguments are all one value (or itself) is
//!   *trivial*: it is removed, its uses are redirected to that value, and
//!   parameters that took it as an argument are checked again.
//!
//! **Undefined reads are errors.** A read that some path from the entry
//! reaches without a definition (or a read in a block nothing branches to) is
//! a [`BuildError`] naming the variable, the block and the source location of
//! the read, raised by `use_var`, or by `seal_block` for a read in a block
//! that was not sealed yet. HIR has no `undef` value; define the variable on
//! every path (e.g. a zero before a loop). The check runs before anything is
//! changed, so a failed read leaves the function as it was.
//!
//! The structured helpers seal what they create ([`FunctionBuilder::begin_if`]
//! seals both branches and, at `end_if`, the merge block; `begin_for` seals the
//! body and `end_for` the header and the exit), so variables work across
//! them with no carried values; [`FunctionBuilder::finish`] seals every block
//! left unsealed. Redirected uses are rewritten in [`FunctionBuilder::finish`];
//! `use_var` always returns a live value.
//!
//! ```
//! use zyntax_hir::*;
//! // sum = 0; for i in range(n): sum += i; return sum
//! let mut b = FunctionBuilder::host("tri", &[Type::I32], &[Type::I32]);
//! let n = b.param(0);
//! let sum = b.declare_named_var("sum", Type::I32);
//! let zero = b.iconst(Type::I32, 0).unwrap();
//! let one = b.iconst(Type::I32, 1).unwrap();
//! b.def_var(sum, zero).unwrap();
//! let lp = b.begin_for(zero, n, one, &[]).unwrap();
//! let s = b.use_var(sum).unwrap();
//! let s = b.add(s, lp.iv).unwrap();
//! b.def_var(sum, s).unwrap();
//! b.end_for(lp, &[]).unwrap();
//! let s = b.use_var(sum).unwrap();
//! b.ret(&[s]).unwrap();
//! let mut m = Module::new("demo");
//! m.functions.push(b.finish().unwrap());
//! assert!(verify_module(&m).is_ok());
//! ```

use crate::builder::{BuildResult, FunctionBuilder};
use crate::entities::{BlockId, InstId, ValueId};
use crate::error::{BuildError, Loc};
use crate::ir::{ValueData, ValueDef};
use crate::types::Type;
use std::collections::{HashMap, HashSet};
use std::fmt;

/// A variable of the source language, declared with
/// [`FunctionBuilder::declare_var`]; printed `var3`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Var(pub u32);

impl Var {
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

impl fmt::Display for Var {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "var{}", self.0)
    }
}

#[derive(Clone, Debug)]
struct VarInfo {
    name: Option<String>,
    ty: Type,
}

/// One incoming edge of a block: target `target` of the branch `inst` in `block`.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Pred {
    pub block: BlockId,
    pub inst: InstId,
    pub target: usize,
}

/// A parameter added to an unsealed block, whose arguments come at sealing.
#[derive(Clone, Debug)]
struct Pending {
    var: Var,
    param: ValueId,
    /// Where the read that created it was (for the error if it is undefined).
    loc: Option<Loc>,
}

#[derive(Clone, Debug, Default)]
struct BlockState {
    preds: Vec<Pred>,
    sealed: bool,
    pending: Vec<Pending>,
}

/// A block parameter that SSA construction added (explicit parameters are never removed).
#[derive(Clone, Debug)]
struct ParamInfo {
    block: BlockId,
    /// Its arguments are on every incoming branch.
    complete: bool,
    /// SSA parameters that take this one as an argument (checked again if it is removed).
    users: Vec<ValueId>,
}

/// The SSA-construction state of a [`FunctionBuilder`].
#[derive(Clone, Debug, Default)]
pub(crate) struct SsaState {
    vars: Vec<VarInfo>,
    /// The value of a variable at the end of a block (its last definition there).
    defs: HashMap<(BlockId, Var), ValueId>,
    /// Indexed by block id, one per block of the function.
    blocks: Vec<BlockState>,
    params: HashMap<ValueId, ParamInfo>,
    /// Removed trivial parameters and the value that replaces each.
    aliases: HashMap<ValueId, ValueId>,
}

static NO_BLOCK: BlockState = BlockState {
    preds: Vec::new(),
    sealed: false,
    pending: Vec::new(),
};

impl SsaState {
    /// Called for every new block, in id order.
    pub(crate) fn add_block(&mut self) {
        self.blocks.push(BlockState::default());
    }

    pub(crate) fn seal_entry(&mut self, entry: BlockId) {
        if let Some(st) = self.blocks.get_mut(entry.index()) {
            st.sealed = true;
        }
    }

    fn block(&self, b: BlockId) -> &BlockState {
        self.blocks.get(b.index()).unwrap_or(&NO_BLOCK)
    }

    pub(crate) fn is_sealed(&self, b: BlockId) -> bool {
        self.block(b).sealed
    }

    pub(crate) fn add_pred(&mut self, to: BlockId, pred: Pred) {
        if let Some(st) = self.blocks.get_mut(to.index()) {
            st.preds.push(pred);
        }
    }

    /// Branch target `target` of `inst` now goes to `to` instead of `from`.
    pub(crate) fn move_pred(&mut self, inst: InstId, target: usize, from: BlockId, to: BlockId) {
        let mut moved = None;
        if let Some(st) = self.blocks.get_mut(from.index()) {
            if let Some(k) = st
                .preds
                .iter()
                .position(|p| p.inst == inst && p.target == target)
            {
                moved = Some(st.preds.remove(k));
            }
        }
        if let Some(p) = moved {
            self.add_pred(to, p);
        }
    }

    /// The live value that `v` stands for (itself unless it was a removed parameter).
    pub(crate) fn resolve(&self, mut v: ValueId) -> ValueId {
        // Aliases point at values that were live when they were made, so chains end;
        // the bound only guards against a bug turning into a hang.
        for _ in 0..=self.aliases.len() {
            match self.aliases.get(&v) {
                Some(next) => v = *next,
                None => break,
            }
        }
        v
    }

    pub(crate) fn has_aliases(&self) -> bool {
        !self.aliases.is_empty()
    }

    fn def(&self, b: BlockId, var: Var) -> Option<ValueId> {
        self.defs.get(&(b, var)).map(|v| self.resolve(*v))
    }
}

/// A step of a variable lookup (the lookup is a loop over these, not a
/// recursion, so that long chains of blocks cannot exhaust the stack).
enum Task {
    /// Find the value of the variable at the end of this block; push it on the results.
    Use(BlockId),
    /// The values at the end of each predecessor of `block` are on the results
    /// (in predecessor order): pass them to `param` and push what it resolves to.
    Finish { block: BlockId, param: ValueId },
}

impl FunctionBuilder {
    /// A new variable of type `ty` (the type of every value it is given).
    pub fn declare_var(&mut self, ty: Type) -> Var {
        self.declare_var_with(None, ty)
    }

    /// A new variable with a name for error messages.
    pub fn declare_named_var(&mut self, name: impl Into<String>, ty: Type) -> Var {
        self.declare_var_with(Some(name.into()), ty)
    }

    fn declare_var_with(&mut self, name: Option<String>, ty: Type) -> Var {
        let var = Var(self.ssa.vars.len() as u32);
        self.ssa.vars.push(VarInfo { name, ty });
        var
    }

    /// The declared type of `var`.
    pub fn var_type(&self, var: Var) -> BuildResult<&Type> {
        match self.ssa.vars.get(var.index()) {
            Some(info) => Ok(&info.ty),
            None => self.unknown_var(var),
        }
    }

    fn unknown_var<T>(&self, var: Var) -> BuildResult<T> {
        self.fail(format!(
            "unknown variable {var} ({} variables declared)",
            self.ssa.vars.len()
        ))
    }

    fn fail<T>(&self, message: String) -> BuildResult<T> {
        Err(BuildError {
            function: self.func.name.clone(),
            message,
        })
    }

    /// `` `name` (var3) `` or `var3`, for messages.
    fn var_label(&self, var: Var) -> String {
        match self.ssa.vars.get(var.index()).and_then(|v| v.name.as_ref()) {
            Some(name) => format!("`{name}` ({var})"),
            None => var.to_string(),
        }
    }

    /// Assign `value` to `var` in the current block (from here to the end of the block).
    pub fn def_var(&mut self, var: Var, value: ValueId) -> BuildResult<()> {
        let want = self.var_type(var)?.clone();
        let got = self.value_type(value)?;
        if *got != want {
            return self.fail(format!(
                "variable {} is {want} but {value} is {got}",
                self.var_label(var)
            ));
        }
        let Some(block) = self.current else {
            return self.fail(format!(
                "no current block to define variable {} in",
                self.var_label(var)
            ));
        };
        if self.is_terminated() {
            // Its successors already read the block's final values.
            return self.fail(format!(
                "{block} already ends in a terminator; cannot define variable {} there",
                self.var_label(var)
            ));
        }
        self.ssa.defs.insert((block, var), value);
        Ok(())
    }

    /// The value of `var` in the current block.
    pub fn use_var(&mut self, var: Var) -> BuildResult<ValueId> {
        self.var_type(var)?;
        let Some(block) = self.current else {
            return self.fail(format!(
                "no current block to use variable {} in",
                self.var_label(var)
            ));
        };
        if let Some(v) = self.ssa.def(block, var) {
            return Ok(v);
        }
        if let Some(bad) = self.undefined_on_path(var, &[block]) {
            return Err(self.undefined_error(var, block, bad, self.loc.as_ref()));
        }
        self.lookup(var, block)
    }

    /// Whether all predecessors of `block` have been declared (see [`Self::seal_block`]).
    pub fn is_sealed(&self, block: BlockId) -> bool {
        self.ssa.is_sealed(block)
    }

    /// Declare that every branch to `block` has been added: reads of variables
    /// in it that waited for its predecessors are resolved now, and a later
    /// branch to it is an error. Sealing a sealed block does nothing.
    pub fn seal_block(&mut self, block: BlockId) -> BuildResult<()> {
        if !self.func.has_block(block) {
            return self.fail(format!("unknown block {block}"));
        }
        if self.ssa.is_sealed(block) {
            return Ok(());
        }
        let st = self.ssa.block(block);
        let preds: Vec<Pred> = st.preds.clone();
        let pred_blocks: Vec<BlockId> = preds.iter().map(|p| p.block).collect();
        // Check every pending read before changing anything.
        for pending in &st.pending {
            let bad = if pred_blocks.is_empty() {
                Some(block)
            } else {
                self.undefined_on_path(pending.var, &pred_blocks)
            };
            if let Some(bad) = bad {
                return Err(self.undefined_error(pending.var, block, bad, pending.loc.as_ref()));
            }
        }
        let Some(st) = self.ssa.blocks.get_mut(block.index()) else {
            return self.fail(format!("internal: no SSA state for {block}"));
        };
        st.sealed = true;
        let pending = std::mem::take(&mut st.pending);
        for p in pending {
            let mut values = Vec::with_capacity(preds.len());
            for pred in &pred_blocks {
                values.push(self.lookup(p.var, *pred)?);
            }
            self.pass_to_param(block, p.param, &preds, &values)?;
            self.remove_if_trivial(p.param);
        }
        Ok(())
    }

    /// Seal every block not sealed yet (when the whole function is built;
    /// [`Self::finish`] does it).
    pub fn seal_all_blocks(&mut self) -> BuildResult<()> {
        for n in 0..self.func.blocks.len() {
            self.seal_block(BlockId::from_index(n))?;
        }
        Ok(())
    }

    /// A block reachable backwards from `starts` with no definition of `var`
    /// and no predecessors (the entry, or a block nothing branches to), if
    /// there is one: the read would be undefined on that path. Unsealed
    /// blocks are checked when they are sealed.
    fn undefined_on_path(&self, var: Var, starts: &[BlockId]) -> Option<BlockId> {
        let mut seen = HashSet::new();
        let mut stack = starts.to_vec();
        while let Some(b) = stack.pop() {
            if !seen.insert(b) || self.ssa.defs.contains_key(&(b, var)) {
                continue;
            }
            let st = self.ssa.block(b);
            if !st.sealed {
                continue;
            }
            if st.preds.is_empty() {
                return Some(b);
            }
            stack.extend(st.preds.iter().map(|p| p.block));
        }
        None
    }

    fn undefined_error(
        &self,
        var: Var,
        used_in: BlockId,
        bad: BlockId,
        loc: Option<&Loc>,
    ) -> BuildError {
        let at = loc.map(|l| format!(" at {l}")).unwrap_or_default();
        let why = if Some(bad) == self.func.entry() {
            format!("the entry {bad} reaches it without one")
        } else if bad == used_in {
            format!("nothing branches to {bad} (unreachable code)")
        } else {
            format!("{bad}, which nothing branches to, reaches it without one")
        };
        BuildError {
            function: self.func.name.clone(),
            message: format!(
                "variable {} ({}) is used{at} in {used_in} before any definition on some path to it: {why}; \
                 define it on every path (e.g. before the loop or the if)",
                self.var_label(var),
                self.ssa.vars[var.index()].ty,
            ),
        }
    }

    /// The value of `var` at the end of `from`, adding block parameters where
    /// paths join. The caller has checked that the read is defined.
    fn lookup(&mut self, var: Var, from: BlockId) -> BuildResult<ValueId> {
        let ty = self.var_type(var)?.clone();
        let mut tasks = vec![Task::Use(from)];
        let mut results: Vec<ValueId> = Vec::new();
        while let Some(task) = tasks.pop() {
            match task {
                Task::Use(start) => {
                    // Walk up through sealed single-predecessor blocks.
                    let mut chain = Vec::new();
                    let mut cur = start;
                    let (value, ready) = loop {
                        if let Some(v) = self.ssa.def(cur, var) {
                            break (v, true);
                        }
                        let st = self.ssa.block(cur);
                        if !st.sealed {
                            let p = self.add_ssa_param(cur, &ty);
                            let loc = self.loc.clone();
                            if let Some(st) = self.ssa.blocks.get_mut(cur.index()) {
                                st.pending.push(Pending { var, param: p, loc });
                            }
                            break (p, true);
                        }
                        match st.preds.as_slice() {
                            [] => {
                                return self.fail(format!(
                                    "internal: variable {} has no definition reaching {cur}",
                                    self.var_label(var)
                                ))
                            }
                            // A single-predecessor cycle (unreachable) falls through to a parameter.
                            [only] if chain.len() <= self.func.blocks.len() => {
                                chain.push(cur);
                                cur = only.block;
                            }
                            preds => {
                                let preds: Vec<BlockId> = preds.iter().map(|p| p.block).collect();
                                let p = self.add_ssa_param(cur, &ty);
                                tasks.push(Task::Finish {
                                    block: cur,
                                    param: p,
                                });
                                tasks.extend(preds.into_iter().rev().map(Task::Use));
                                break (p, false);
                            }
                        }
                    };
                    self.ssa.defs.insert((cur, var), value);
                    for b in chain {
                        self.ssa.defs.insert((b, var), value);
                    }
                    if ready {
                        results.push(value);
                    }
                }
                Task::Finish { block, param } => {
                    let preds = self.ssa.block(block).preds.clone();
                    let Some(at) = results.len().checked_sub(preds.len()) else {
                        return self.fail("internal: SSA lookup lost its results".into());
                    };
                    let values = results.split_off(at);
                    self.pass_to_param(block, param, &preds, &values)?;
                    results.push(self.remove_if_trivial(param));
                }
            }
        }
        match results.as_slice() {
            [v] => Ok(self.ssa.resolve(*v)),
            _ => self.fail("internal: SSA lookup ended with no single value".into()),
        }
    }

    /// A new parameter of `block` for a variable of type `ty`.
    fn add_ssa_param(&mut self, block: BlockId, ty: &Type) -> ValueId {
        let v = ValueId::from_index(self.func.values.len());
        let params = &mut self.func.blocks[block.index()].params;
        self.func.values.push(ValueData {
            ty: ty.clone(),
            def: ValueDef::Param(block, params.len() as u32),
        });
        params.push(v);
        self.ssa.params.insert(
            v,
            ParamInfo {
                block,
                complete: false,
                users: Vec::new(),
            },
        );
        v
    }

    /// Append `values[i]` (the variable at the end of `preds[i]`) to the
    /// arguments of each incoming branch, for `param`.
    fn pass_to_param(
        &mut self,
        block: BlockId,
        param: ValueId,
        preds: &[Pred],
        values: &[ValueId],
    ) -> BuildResult<()> {
        let Some(k) = self.func.blocks[block.index()]
            .params
            .iter()
            .position(|v| *v == param)
        else {
            return self.fail(format!("internal: {param} is not a parameter of {block}"));
        };
        for (pred, value) in preds.iter().zip(values) {
            let Some(t) = self
                .func
                .insts
                .get_mut(pred.inst.index())
                .and_then(|i| i.targets.get_mut(pred.target))
            else {
                return self.fail(format!("internal: lost the branch from {}", pred.block));
            };
            if t.args.len() != k {
                let n = t.args.len();
                return self.fail(format!(
                    "the branch from {} to {block} passes {n} arguments, but {block} had {k} \
                     parameters before those added for variables",
                    pred.block
                ));
            }
            t.args.push(*value);
            if let Some(info) = self.ssa.params.get_mut(value) {
                info.users.push(param);
            }
        }
        if let Some(info) = self.ssa.params.get_mut(&param) {
            info.complete = true;
        }
        Ok(())
    }

    /// Remove `param` if all its arguments are one value (or itself), then
    /// the parameters that took it as an argument if they became trivial;
    /// returns what `param` now stands for.
    fn remove_if_trivial(&mut self, param: ValueId) -> ValueId {
        let mut work = vec![param];
        while let Some(q) = work.pop() {
            let Some(info) = self.ssa.params.get(&q) else {
                continue; // removed already
            };
            if !info.complete {
                continue;
            }
            let block = info.block;
            let Some(k) = self.func.blocks[block.index()]
                .params
                .iter()
                .position(|v| *v == q)
            else {
                continue;
            };
            let preds = self.ssa.block(block).preds.clone();
            let Some(same) = self.single_incoming(q, k, &preds) else {
                continue;
            };
            let params = &mut self.func.blocks[block.index()].params;
            params.remove(k);
            for (n, v) in params.iter().enumerate().skip(k) {
                self.func.values[v.index()].def = ValueDef::Param(block, n as u32);
            }
            for pred in &preds {
                if let Some(t) = self.func.insts[pred.inst.index()]
                    .targets
                    .get_mut(pred.target)
                {
                    if k < t.args.len() {
                        t.args.remove(k);
                    }
                }
            }
            self.ssa.aliases.insert(q, same);
            let users = self
                .ssa
                .params
                .remove(&q)
                .map(|i| i.users)
                .unwrap_or_default();
            // Whoever took q as an argument now takes `same`.
            if let Some(info) = self.ssa.params.get_mut(&same) {
                info.users.extend(users.iter().copied());
            }
            work.extend(users);
        }
        self.ssa.resolve(param)
    }

    /// The one value other than `q` itself that every incoming branch passes
    /// to parameter `k` (= `q`), if there is exactly one.
    fn single_incoming(&self, q: ValueId, k: usize, preds: &[Pred]) -> Option<ValueId> {
        let mut same = None;
        for pred in preds {
            let arg = self
                .func
                .insts
                .get(pred.inst.index())?
                .targets
                .get(pred.target)?
                .args
                .get(k)?;
            let arg = self.ssa.resolve(*arg);
            if arg == q || Some(arg) == same {
                continue;
            }
            if same.is_some() {
                return None;
            }
            same = Some(arg);
        }
        same
    }

    /// Rewrite every use of a removed parameter to its replacement.
    pub(crate) fn resolve_aliases(&mut self) {
        if !self.ssa.has_aliases() {
            return;
        }
        let ssa = &self.ssa;
        for inst in &mut self.func.insts {
            for a in &mut inst.args {
                *a = ssa.resolve(*a);
            }
            for t in &mut inst.targets {
                for a in &mut t.args {
                    *a = ssa.resolve(*a);
                }
            }
        }
    }
}
