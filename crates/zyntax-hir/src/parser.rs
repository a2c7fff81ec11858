//! The `.zir` parser (being written; see docs/zir.md for the grammar).

use crate::error::{Loc, ParseError};
use crate::ir::Module;

/// Parse a module from `.zir` text.
pub fn parse_module(text: &str) -> Result<Module, ParseError> {
    parse_module_named(text, None)
}

/// Parse a module, naming `file` in error locations.
pub fn parse_module_named(_text: &str, file: Option<&str>) -> Result<Module, ParseError> {
    Err(ParseError {
        loc: Loc {
            file: file.map(str::to_string),
            line: 1,
            col: 1,
        },
        message: "the .zir parser is not implemented yet".into(),
    })
}
