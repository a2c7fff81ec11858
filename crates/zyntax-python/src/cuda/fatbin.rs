//! `cuda_parse_fatbin`: zyntax-cuda's fatbin parser for Python
//! (`zyntax.fatbin.parse`), so there is one parser of the container format.

use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use zyntax_cuda::bundle::parse_fatbin;

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
