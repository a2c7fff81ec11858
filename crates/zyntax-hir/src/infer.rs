//! Result types from the instruction table: what an op gives for operands
//! of given types, read from its row (the signature's results with the
//! operands' type variables substituted, the scalar family's "same type as
//! the operand", or a fixed scalar result such as `u32`), with the row's
//! operand rules checked on the way. Front-ends that build by mnemonic
//! (`FunctionBuilder.inst` in the Python bindings, used by `@zyntax.kernel`)
//! and [`FunctionBuilder::push_inferred`] use it, so no front-end keeps its
//! own copy of a row's type rule.

use crate::builder::{BuildResult, FunctionBuilder};
use crate::entities::ValueId;
use crate::error::BuildError;
use crate::op::Op;
use crate::table::{self, Operands};
use crate::types::{ScalarType, Type};

/// The result types of `op` on operands of types `args`: `Err` with the
/// table's message when an operand breaks the row's rule, `Ok(None)` when
/// the row does not determine them (a fragment, a cast's target, a call).
pub fn result_types(op: &Op, args: &[Type]) -> Result<Option<Vec<Type>>, String> {
    let d = op.def();
    let mn = op.mnemonic();
    let refs: Vec<&Type> = args.iter().collect();
    let names = d.operands.unwrap_or(&[]);
    if let Some(n) = d.operands.map(<[_]>::len) {
        if n != args.len() {
            return Err(format!("`{mn}` takes {n} operand(s), got {}", args.len()));
        }
    }
    let from_sig = match table::sig_of(d) {
        Some(sig) => crate::sig::infer(sig, &mn, names, &refs)?,
        None => None,
    };
    // The scalar families (`add`, `popc`, ...): the row's `types` say which
    // scalars they take (the verifier's message), the result is the operand's type.
    if d.types != Operands::Other {
        if let Some(s) = args.first().and_then(Type::as_scalar) {
            if !d.types.accepts(s) {
                let want = match args.len() {
                    1 => d.types.singular(),
                    _ => d.types.plural(),
                };
                return Err(format!("`{mn}` takes {want}, got {s}"));
            }
        }
        if from_sig.is_none() && d.results == Some(1) {
            return Ok(args.first().map(|t| vec![t.clone()]));
        }
    }
    if from_sig.is_some() {
        return Ok(from_sig);
    }
    Ok(match d.results {
        Some(0) => Some(Vec::new()),
        // A row whose result rule is one scalar type (`lane_id`: "u32").
        Some(1) => ScalarType::from_name(d.result).map(|s| vec![Type::Scalar(s)]),
        _ => None,
    })
}

impl FunctionBuilder {
    /// Appends `op` with the result types its table row gives for `args`
    /// ([`result_types`]); an error when the row rejects an operand or does
    /// not determine the results.
    pub fn push_inferred(&mut self, op: Op, args: &[ValueId]) -> BuildResult<Vec<ValueId>> {
        let tys = args
            .iter()
            .map(|&a| self.value_type(a).cloned())
            .collect::<BuildResult<Vec<Type>>>()?;
        match result_types(&op, &tys) {
            Ok(Some(results)) => self.push(op, args, &results, Vec::new()),
            Ok(None) => Err(self.build_error(format!(
                "`{}`: its row does not determine the result types; give them",
                op.mnemonic()
            ))),
            Err(message) => Err(self.build_error(message)),
        }
    }

    fn build_error(&self, message: String) -> BuildError {
        BuildError {
            function: self.func().name.clone(),
            message,
        }
    }
}
