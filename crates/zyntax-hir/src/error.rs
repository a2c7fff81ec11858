//! Source locations and the errors of this crate.

use crate::entities::{BlockId, InstId};
use serde::{Deserialize, Serialize};
use std::fmt;

/// A source location (1-based line and column) in a `.zir` file or the
/// Python source that built an instruction.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Loc {
    pub file: Option<String>,
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Loc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.file {
            Some(file) => write!(f, "{file}:{}:{}", self.line, self.col),
            None => write!(f, "{}:{}", self.line, self.col),
        }
    }
}

/// One problem the verifier found, with where it is.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// The function, or empty for a module-level problem.
    pub function: String,
    pub block: Option<BlockId>,
    pub inst: Option<InstId>,
    /// The instruction as printed in `.zir`, for context.
    pub inst_text: Option<String>,
    pub loc: Option<Loc>,
    pub message: String,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(loc) = &self.loc {
            write!(f, "{loc}: ")?;
        }
        // An empty function name marks a module-level problem (e.g. the PTX version).
        if self.function.is_empty() {
            f.write_str("in module")?;
        } else {
            write!(f, "in @{}", self.function)?;
        }
        if let Some(b) = self.block {
            write!(f, ", {b}")?;
        }
        if let Some(text) = &self.inst_text {
            write!(f, ", `{text}`")?;
        } else if let Some(i) = self.inst {
            write!(f, ", {i}")?;
        }
        write!(f, ": {}", self.message)
    }
}

/// The verifier rejected a module; every problem found is listed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct VerifyError {
    pub diagnostics: Vec<Diagnostic>,
}

impl fmt::Display for VerifyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.diagnostics.len();
        write!(
            f,
            "verification failed with {n} error{}",
            if n == 1 { "" } else { "s" }
        )?;
        for d in &self.diagnostics {
            write!(f, "\n  {d}")?;
        }
        Ok(())
    }
}

/// Malformed `.zir` text.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{loc}: {message}")]
pub struct ParseError {
    pub loc: Loc,
    pub message: String,
}

/// Misuse of the builder (e.g. adding an instruction after a terminator).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("in @{function}: {message}")]
pub struct BuildError {
    pub function: String,
    pub message: String,
}
