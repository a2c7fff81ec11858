//! Element types as numpy spells them (array-interface `typestr`s).

use crate::errors::ArgumentError;
use pyo3::prelude::*;
use pyo3::sync::PyOnceLock;
use pyo3::types::PyString;
use zyntax_hir::ScalarType;

/// An element type as numpy's array-interface `typestr` spells it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Dtype {
    pub(super) typestr: String,
    pub(super) itemsize: usize,
    /// The HIR scalar it corresponds to (for checking pointer arguments).
    pub(crate) elem: Option<ScalarType>,
}

impl Dtype {
    pub(super) fn parse(typestr: &str) -> PyResult<Dtype> {
        let bad = || ArgumentError::new_err(format!("unsupported dtype '{typestr}'"));
        let mut chars = typestr.chars();
        let order = chars.next().ok_or_else(bad)?;
        let kind = chars.next().ok_or_else(bad)?;
        let itemsize: usize = chars.as_str().parse().map_err(|_| bad())?;
        if order == '>' && itemsize > 1 {
            return Err(ArgumentError::new_err(format!(
                "big-endian dtype '{typestr}' cannot be used on the GPU"
            )));
        }
        if itemsize == 0 {
            return Err(bad());
        }
        use ScalarType as S;
        let elem = match (kind, itemsize) {
            ('b', 1) => Some(S::Bool),
            ('i', 1) => Some(S::I8),
            ('i', 2) => Some(S::I16),
            ('i', 4) => Some(S::I32),
            ('i', 8) => Some(S::I64),
            ('u', 1) => Some(S::U8),
            ('u', 2) => Some(S::U16),
            ('u', 4) => Some(S::U32),
            ('u', 8) => Some(S::U64),
            ('f', 2) => Some(S::F16),
            ('f', 4) => Some(S::F32),
            ('f', 8) => Some(S::F64),
            // ml_dtypes.bfloat16 and other 2-byte opaque types: unchecked.
            _ => None,
        };
        Ok(Dtype {
            typestr: typestr.to_owned(),
            itemsize,
            elem,
        })
    }

    /// DLPack (code, bits) of this dtype.
    pub(super) fn dlpack(&self) -> PyResult<(u8, u8)> {
        let bits = (self.itemsize * 8) as u8;
        let kind = self.typestr.chars().nth(1).unwrap_or('?');
        Ok(match kind {
            'i' => (0, bits),
            'u' => (1, bits),
            'f' => (2, bits),
            'V' if self.itemsize == 2 => (4, 16), // bfloat16
            'c' => (5, bits),
            'b' => (6, 8),
            _ => {
                return Err(ArgumentError::new_err(format!(
                    "dtype '{}' has no DLPack equivalent",
                    self.typestr
                )))
            }
        })
    }

    pub(super) fn from_dlpack(code: u8, bits: u8, lanes: u16) -> PyResult<Dtype> {
        if lanes != 1 {
            return Err(ArgumentError::new_err(
                "DLPack tensors with vector lanes are not supported",
            ));
        }
        let n = usize::from(bits / 8);
        let ts = match code {
            0 => format!("<i{n}"),
            1 => format!("<u{n}"),
            2 => format!("<f{n}"),
            4 if bits == 16 => "<V2".to_owned(),
            5 => format!("<c{n}"),
            6 => "|b1".to_owned(),
            _ => {
                return Err(ArgumentError::new_err(format!(
                    "unsupported DLPack dtype (code {code}, {bits} bits)"
                )))
            }
        };
        let mut d = Dtype::parse(&ts)?;
        if code == 4 {
            d.elem = Some(ScalarType::BF16);
        }
        Ok(d)
    }
}

pub(super) fn numpy(py: Python<'_>) -> PyResult<&Bound<'_, PyModule>> {
    static NP: PyOnceLock<Py<PyModule>> = PyOnceLock::new();
    NP.get_or_try_init(py, || Ok::<_, PyErr>(py.import("numpy")?.unbind()))
        .map(|m| m.bind(py))
}

/// numpy's canonical typestr of anything `numpy.dtype()` accepts.
pub(crate) fn normalize_dtype(py: Python<'_>, dtype: &Bound<'_, PyAny>) -> PyResult<Dtype> {
    if let Ok(s) = dtype.cast::<PyString>() {
        let s = s.to_str()?;
        if s == "bfloat16" || s == "bf16" {
            let mut d = Dtype::parse("<V2")?;
            d.elem = Some(ScalarType::BF16);
            return Ok(d);
        }
    }
    let d = numpy(py)?.getattr("dtype")?.call1((dtype,))?;
    let ts: String = d.getattr("str")?.extract()?;
    let mut out = Dtype::parse(&ts)?;
    if d.getattr("name")?.extract::<String>()? == "bfloat16" {
        out.elem = Some(ScalarType::BF16);
    }
    Ok(out)
}
