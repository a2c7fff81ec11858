//! zyntax-cuda's fatbin parser, bundle image check and the driver's image
//! rules for Python, so each exists once: `cuda_parse_fatbin`
//! (`zyntax.fatbin.parse`), `cuda_bundle_check_image`, `cuda_bundle_runs_on`
//! and `cuda_bundle_choose` (`zyntax.bundle`).

use crate::checked::Checked;
use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use zyntax_cuda::bundle::{check_image, choose, parse_fatbin, runs_on};
use zyntax_cuda::LoadedFrom;

/// The images of a fatbin as `(kind, arch, offset, size)`: kind `"ptx"` or
/// `"cubin"`, arch such as `"sm_90a"`, the payload's byte offset and padded
/// size. A malformed or truncated fatbin raises ArgumentError saying what and
/// at which byte (`zyntax.fatbin` re-raises it as FatbinFormatError).
#[pyfunction]
pub fn cuda_parse_fatbin(data: &[u8]) -> PyResult<Vec<(&'static str, String, usize, usize)>> {
    guard(|| {
        let images = parse_fatbin(data).map_err(|e| ArgumentError::new_err(e.0))?;
        Ok(images
            .into_iter()
            .map(|i| {
                let kind = if i.ptx { "ptx" } else { "cubin" };
                (kind, i.arch, i.offset, i.size)
            })
            .collect())
    })
}

/// Whether an image for `arch` runs on compute capability `cc` (`sass`: a
/// cubin, the same major and an equal or lower minor; else PTX, equal or
/// older; `a` code on its own arch only). Unknown spellings run nowhere.
#[pyfunction]
pub fn cuda_bundle_runs_on(arch: &str, cc: (Checked<u32>, Checked<u32>), sass: bool) -> bool {
    runs_on(arch, (cc.0 .0, cc.1 .0), sass)
}

/// What the driver runs from a bundle of `sass` cubins and `ptx` on `cc`:
/// `("sass", arch)` (the closest: an exact `a` build, then the highest
/// minor), `("ptx", arch)`, or None.
#[pyfunction]
#[pyo3(signature = (sass, ptx, cc))]
pub fn cuda_bundle_choose(
    sass: Vec<String>,
    ptx: Option<String>,
    cc: (Checked<u32>, Checked<u32>),
) -> Option<(&'static str, String)> {
    choose(&sass, ptx.as_deref(), (cc.0 .0, cc.1 .0)).map(|(from, arch)| match from {
        LoadedFrom::Sass => ("sass", arch),
        LoadedFrom::Ptx => ("ptx", arch),
    })
}

/// Checks that `image` is the one the manifest (its JSON text) describes:
/// size, SHA-256, and a fatbin's records against the manifest's SASS and PTX
/// archs (a cubin must be ELF). A mismatch raises CudaError (kind
/// `"invalid"`) saying what differs; `zyntax.bundle` re-raises it as
/// BundleError.
#[pyfunction]
pub fn cuda_bundle_check_image(py: Python<'_>, manifest: &str, image: &[u8]) -> PyResult<()> {
    guard(|| {
        let m: serde_json::Value = serde_json::from_str(manifest)
            .map_err(|e| ArgumentError::new_err(format!("argument 'manifest': {e}")))?;
        check_image(&m, image).map_err(|e| super::err(py, e))
    })
}
