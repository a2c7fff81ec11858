//! The format version of `.zir` text and of the JSON form.
//!
//! Both forms carry [`FORMAT_VERSION`]: `.zir` as the module header attribute
//! `version(N)`, JSON as the field `"format_version": N`. Text without one is
//! version 1 (the format before versions were written). A reader accepts every
//! version from 1 to [`FORMAT_VERSION`]; a newer one is refused with a message
//! saying so, and a parse error in an older file names every change since its
//! version that can make an old file fail to load ([`FORMAT_HISTORY`]). The
//! policy is in `docs/embedding.md`.

use crate::error::ParseError;

/// The version this build writes.
pub const FORMAT_VERSION: u32 = 2;

/// One format change: what version `version` changed, and whether files of
/// the version before it still load unchanged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FormatChange {
    pub version: u32,
    pub summary: &'static str,
    pub old_files_load: bool,
}

/// Every change since version 1, oldest first. Add an entry (and bump
/// [`FORMAT_VERSION`]) with any change to the `.zir` grammar or the JSON shape.
pub const FORMAT_HISTORY: &[FormatChange] = &[FormatChange {
    version: 2,
    summary: "the module header carries the format version (`.zir`: `version(2)` after the \
              module name; JSON: `\"format_version\": 2`)",
    old_files_load: true,
}];

/// The version a file without a version marker has.
pub const UNVERSIONED: u32 = 1;

/// Whether this build reads `version`; the error says why not.
pub fn check(version: u32) -> Result<(), String> {
    if version == 0 {
        Err("format version 0 does not exist (versions start at 1)".to_string())
    } else if version > FORMAT_VERSION {
        Err(format!(
            "format version {version} is newer than this zyntax reads (1 to {FORMAT_VERSION}); \
             upgrade zyntax or write the file with an older one"
        ))
    } else {
        Ok(())
    }
}

/// The changes after `version` that can make a file of that version fail to load.
fn breaking_since(history: &[FormatChange], version: u32) -> Vec<&FormatChange> {
    history
        .iter()
        .filter(|c| c.version > version && !c.old_files_load)
        .collect()
}

/// The version `.zir` text declares in its header (`version(N)` on the
/// `module` line), [`UNVERSIONED`] without one, `None` if unreadable.
pub fn zir_version(text: &str) -> Option<u32> {
    // The first line that is not blank or a `;` comment.
    let header = text
        .lines()
        .map(|l| l.split(';').next().unwrap_or("").trim())
        .find(|l| !l.is_empty())?;
    match header.split_once("version(") {
        None => Some(UNVERSIONED),
        Some((_, rest)) => rest.split_once(')')?.0.trim().parse().ok(),
    }
}

/// A parse error of `text`, with the breaking changes since the file's
/// (older) version appended, so that the reader learns what changed.
pub(crate) fn explain(e: ParseError, text: &str) -> ParseError {
    explain_with(FORMAT_HISTORY, e, text)
}

fn explain_with(history: &[FormatChange], mut e: ParseError, text: &str) -> ParseError {
    let Some(v) = zir_version(text).filter(|v| *v < FORMAT_VERSION) else {
        return e;
    };
    let changes = breaking_since(history, v);
    if !changes.is_empty() {
        let list: Vec<String> = changes
            .iter()
            .map(|c| format!("version {}: {}", c.version, c.summary))
            .collect();
        e.message = format!(
            "{} (this file is `.zir` format version {v}; changed since: {})",
            e.message,
            list.join("; ")
        );
    }
    e
}

/// JSON: the module's fields after `"format_version"`.
pub(crate) fn to_json(m: &crate::Module) -> Result<String, serde_json::Error> {
    #[derive(serde::Serialize)]
    struct Versioned<'a> {
        format_version: u32,
        #[serde(flatten)]
        module: &'a crate::Module,
    }
    serde_json::to_string(&Versioned {
        format_version: FORMAT_VERSION,
        module: m,
    })
}

/// JSON of any readable version (no `"format_version"`: version 1).
pub(crate) fn from_json(text: &str) -> Result<crate::Module, serde_json::Error> {
    use serde::de::Error;
    let mut value: serde_json::Value = serde_json::from_str(text)?;
    let version = match value
        .as_object_mut()
        .and_then(|o| o.remove("format_version"))
    {
        None => UNVERSIONED,
        Some(v) => v
            .as_u64()
            .and_then(|v| u32::try_from(v).ok())
            .ok_or_else(|| {
                serde_json::Error::custom(format!("`format_version` {v} is not a version number"))
            })?,
    };
    check(version).map_err(serde_json::Error::custom)?;
    serde_json::from_value(value).map_err(|e| {
        let changes = breaking_since(FORMAT_HISTORY, version);
        if changes.is_empty() {
            e
        } else {
            let list: Vec<String> = changes
                .iter()
                .map(|c| format!("version {}: {}", c.version, c.summary))
                .collect();
            serde_json::Error::custom(format!(
                "{e} (this is JSON format version {version}; changed since: {})",
                list.join("; ")
            ))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_versions() {
        assert_eq!(zir_version("module \"m\"\n"), Some(1));
        assert_eq!(
            zir_version("; a comment: version(9)\nmodule \"m\" version(2)\n"),
            Some(2)
        );
        assert_eq!(
            zir_version("\nmodule \"m\" version(2) targets(sm_80)\n"),
            Some(2)
        );
        assert_eq!(zir_version("module \"m\" version(x)\n"), None);
    }

    #[test]
    fn newer_and_zero_versions_are_refused() {
        assert!(check(FORMAT_VERSION).is_ok() && check(1).is_ok());
        assert!(check(FORMAT_VERSION + 1)
            .unwrap_err()
            .contains("newer than this zyntax"));
        assert!(check(0).unwrap_err().contains("start at 1"));
    }

    /// A breaking change is named in the error of a file older than it; a
    /// compatible one, and a file of the current version, get no note.
    #[test]
    fn parse_errors_of_old_files_list_breaking_changes() {
        let history = [
            FormatChange {
                version: 2,
                summary: "compatible",
                old_files_load: true,
            },
            FormatChange {
                version: 2,
                summary: "`frob` is now `frobnicate`",
                old_files_load: false,
            },
        ];
        let err = || ParseError {
            loc: crate::Loc {
                file: None,
                line: 3,
                col: 5,
            },
            message: "unknown op `frob`".to_string(),
        };
        let old = explain_with(&history, err(), "module \"m\"\n");
        assert_eq!(
            old.message,
            "unknown op `frob` (this file is `.zir` format version 1; changed since: \
             version 2: `frob` is now `frobnicate`)"
        );
        let current = explain_with(&history, err(), "module \"m\" version(2)\n");
        assert_eq!(current.message, "unknown op `frob`");
        assert_eq!(
            explain_with(&history[..1], err(), "module \"m\"\n").message,
            "unknown op `frob`"
        );
    }
}
