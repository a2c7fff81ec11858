//! The Python source location of the code that called into the builder.

use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use zyntax_hir::Loc;

/// This extension module, kept at import (`remember_module`): its file's
/// directory is the `zyntax` package's, found without importing the package.
static NATIVE: PyOnceLock<Py<PyModule>> = PyOnceLock::new();

/// Directory of the installed `zyntax` package: frames in it are the façade,
/// not the user's code, and are skipped.
static PACKAGE_DIR: PyOnceLock<String> = PyOnceLock::new();

/// Keeps `m` (`zyntax._native`, from its module init) for [`package_dir`].
pub fn remember_module(m: &Bound<'_, PyModule>) {
    let _ = NATIVE.set(m.py(), m.clone().unbind());
}

fn package_dir(py: Python<'_>) -> &str {
    PACKAGE_DIR
        .get_or_init(py, || {
            // `__file__` is set once the import has finished, before any builder call.
            NATIVE
                .get(py)
                .and_then(|m| m.bind(py).getattr("__file__").ok())
                .and_then(|f| f.extract::<String>().ok())
                .and_then(|f| {
                    std::path::Path::new(&f)
                        .parent()
                        .map(|p| p.to_string_lossy().into_owned())
                })
                .unwrap_or_default()
        })
        .as_str()
}

/// The innermost Python frame outside the zyntax package, as a `Loc`
/// (1-based line and column). `None` when there is no such frame.
pub fn caller_loc(py: Python<'_>) -> Option<Loc> {
    caller_loc_inner(py).ok().flatten()
}

fn caller_loc_inner(py: Python<'_>) -> PyResult<Option<Loc>> {
    let pkg = package_dir(py);
    let sys = py.import("sys")?;
    let mut frame = sys.call_method1("_getframe", (0,))?;
    // Bounded walk: a deep recursion in the user's code must not make this slow.
    for _ in 0..64 {
        if frame.is_none() {
            return Ok(None);
        }
        let code = frame.getattr("f_code")?;
        let file: String = code.getattr("co_filename")?.extract()?;
        let internal = !pkg.is_empty() && std::path::Path::new(&file).starts_with(pkg);
        if !internal {
            let line: Option<u32> = frame.getattr("f_lineno")?.extract()?;
            let col = column(&frame, &code).unwrap_or(1);
            return Ok(Some(Loc {
                file: Some(file),
                line: line.unwrap_or(0),
                col,
            }));
        }
        frame = frame.getattr("f_back")?;
    }
    Ok(None)
}

/// 1-based column of the frame's current instruction, from `co_positions()`
/// (Python 3.11+); `None` where unavailable.
fn column(frame: &Bound<'_, PyAny>, code: &Bound<'_, PyAny>) -> Option<u32> {
    let lasti: usize = frame.getattr("f_lasti").ok()?.extract().ok()?;
    let positions = code.call_method0("co_positions").ok()?;
    let entry = positions.try_iter().ok()?.nth(lasti / 2)?.ok()?;
    let col: Option<u32> = entry.get_item(2).ok()?.extract().ok()?;
    col.map(|c| c + 1)
}
