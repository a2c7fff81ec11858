//! `FunctionBuilder.inst`: one instruction by its `.zir` mnemonic, for
//! front-ends that translate another language (`@zyntax.kernel`'s
//! translator). The op comes from the instruction table's row for the
//! mnemonic (`zyntax_hir::table::find_mnemonic`, as the `.zir` parser reads
//! it), the immediates of the row's operand template by name, so a front-end
//! needs no method per op and no text round trip. The row's operand and
//! result counts and its type signature (`zyntax_hir::sig`) are checked here,
//! as the verifier checks them, so a front-end gets the table's message for
//! the instruction it just built (the verifier's hand-written rules still run
//! at `verify`).
//!
//! Also `finish(prune=True)`'s reachability filter. The `#[pymethods]` of
//! `FunctionBuilder` (one block, in `hir.rs`) forward here.

use super::{FunctionBuilder, PyValue};
use crate::errors::{ArgumentError, BuildError};
use crate::types::{to_type, to_types, type_name};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyString};
use zyntax_hir::imm::{Imm, ImmKind};
use zyntax_hir::{BlockId, Function, Type, ValueId};

impl FunctionBuilder {
    pub(super) fn emit_inst(
        &self,
        py: Python<'_>,
        mnemonic: &str,
        args: &Bound<'_, PyAny>,
        results: Option<&Bound<'_, PyAny>>,
        imm: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Vec<PyValue>> {
        // `const`, `jump` and `br` have no row the parser reads (they have their
        // own methods): "unknown instruction" here too.
        let (d, mut values) =
            zyntax_hir::table::find_mnemonic(mnemonic).map_err(BuildError::new_err)?;
        let mut ids: Vec<ValueId> = Vec::new();
        let mut arg_tys: Vec<Type> = Vec::new();
        for a in args.try_iter()? {
            let (v, t) = self.sh.value(&a?, &format!("an operand of `{mnemonic}`"))?;
            ids.push(v);
            arg_tys.push(t);
        }
        let given = results.map(to_types).transpose()?;
        for (k, v) in imm.into_iter().flat_map(|d| d.iter()) {
            let k: String = k.extract()?;
            let Some((_, def)) = d.imms.as_ref().and_then(|x| x.def(&k)) else {
                return Err(ArgumentError::new_err(format!(
                    "`{mnemonic}` has no immediate `{k}`"
                )));
            };
            values.push((def.name, to_imm(&v, def.kind, def.what)?));
        }
        let frag = match given.as_deref() {
            Some([Type::Frag(f)]) => Some(*f),
            _ => None,
        };
        let op = d.build(values, frag).ok_or_else(|| {
            ArgumentError::new_err(format!("`{mnemonic}`: missing or malformed immediates"))
        })?;
        // The row's counts and type signature, as the verifier checks them:
        // a front-end gets the table's message at the instruction it built.
        let mn = op.mnemonic();
        let typed = |m: String| BuildError::new_err(format!("in @{}: {m}", self.sh.name));
        // No result types given: the row's rule for these operands (which
        // checks them), as the Rust builder's `push_inferred`.
        let Some(tys) = given else {
            let tys = zyntax_hir::infer::result_types(&op, &arg_tys)
                .map_err(typed)?
                .ok_or_else(|| {
                    ArgumentError::new_err(format!(
                        "`{mn}`: its row does not determine the result types; give results="
                    ))
                })?;
            return self.sh.run_n(py, |fb| fb.push(op, &ids, &tys, Vec::new()));
        };
        if let Some((na, nr)) = d.arity() {
            if ids.len() != na || tys.len() != nr {
                return Err(typed(format!(
                    "`{mn}` takes {na} operand(s) and gives {nr} result(s), got {} and {}",
                    ids.len(),
                    tys.len()
                )));
            }
        }
        if let Some(sig) = zyntax_hir::table::sig_of(d) {
            let a: Vec<&Type> = arg_tys.iter().collect();
            let r: Vec<&Type> = tys.iter().collect();
            zyntax_hir::sig::check(sig, &mn, d.operands.unwrap_or(&[]), &a, &r).map_err(typed)?;
        }
        self.sh.run_n(py, |fb| fb.push(op, &ids, &tys, Vec::new()))
    }
}

#[pymethods]
impl FunctionBuilder {
    /// What each operand of the instruction `mnemonic` asks for, from its
    /// row's signature, for front-ends that turn literals into operands: a
    /// type's `.zir` spelling (`"u32"`), a type variable that several operands
    /// share (`"T"`), or `""`. `None` when the row declares no signature
    /// (the scalar families: every operand is `"T"`).
    #[staticmethod]
    fn operand_types(mnemonic: &str) -> PyResult<Option<Vec<String>>> {
        let (d, _) = zyntax_hir::table::find_mnemonic(mnemonic).map_err(BuildError::new_err)?;
        Ok(zyntax_hir::table::sig_of(d).map(zyntax_hir::sig::operand_wants))
    }
}

/// A Python immediate as the row declares it.
fn to_imm(v: &Bound<'_, PyAny>, kind: ImmKind, what: &str) -> PyResult<Imm> {
    let bad = || ArgumentError::new_err(format!("{what}: unexpected {}", type_name(v)));
    Ok(match kind {
        ImmKind::Int(max) => {
            let n: u64 = v.extract().map_err(|_| bad())?;
            if n > max {
                return Err(ArgumentError::new_err(format!(
                    "{what} must be at most {max}, got {n}"
                )));
            }
            Imm::Int(n)
        }
        ImmKind::Bool => Imm::Bool(v.cast::<PyBool>().map_err(|_| bad())?.is_true()),
        ImmKind::Type => Imm::Type(to_type(v)?),
        ImmKind::Global => {
            let s = v.cast::<PyString>().map_err(|_| bad())?.to_cow()?;
            Imm::Global(s.trim_start_matches('@').to_string())
        }
        ImmKind::Enum(names) => {
            let s = v.cast::<PyString>().map_err(|_| bad())?.to_cow()?;
            let i = names.iter().position(|n| *n == s).ok_or_else(|| {
                ArgumentError::new_err(format!(
                    "{what}: expected one of {}, got {s:?}",
                    names.join(", ")
                ))
            })?;
            Imm::Enum(i)
        }
        ImmKind::ResultFrag => return Err(bad()),
    })
}

/// Drops the blocks that no path from the entry reaches (what a translator
/// emitted after a `return`, or a join that every branch left), then numbers
/// the rest canonically again.
pub(super) fn prune_unreachable(f: &mut Function) {
    let Some(entry) = f.entry() else { return };
    let mut seen = vec![false; f.blocks.len()];
    let mut work: Vec<BlockId> = vec![entry];
    seen[entry.index()] = true;
    while let Some(b) = work.pop() {
        for i in &f.blocks[b.index()].insts {
            for t in &f.insts[i.index()].targets {
                if !seen[t.block.index()] {
                    seen[t.block.index()] = true;
                    work.push(t.block);
                }
            }
        }
    }
    if f.layout.iter().all(|b| seen[b.index()]) {
        return;
    }
    f.layout.retain(|b| seen[b.index()]);
    f.canonicalize();
}
