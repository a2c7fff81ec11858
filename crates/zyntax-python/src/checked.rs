//! Checked integer arguments: the one place where a Python `int` becomes a
//! Rust integer at the boundary.
//!
//! PyO3's own conversions raise `OverflowError` for a negative or too large
//! value and `TypeError` for a float; both escape `except zyntax.ZyntaxError`.
//! A parameter typed [`Checked<T>`] instead raises [`ArgumentError`] saying
//! the accepted range and the value it got; PyO3 adds a note naming the
//! parameter (`while processing 'count'`), and [`arg`] puts the name into the
//! message for code that converts a `PyAny` itself.

use crate::errors::ArgumentError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyInt};
use std::fmt::Display;

/// A Python `int` (never a `bool` or `float`) that fits `T`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Checked<T>(pub T);

/// The Rust integer types a [`Checked`] can hold.
pub trait CheckedInt: Sized + Copy + Display + TryFrom<i128> {
    const MIN: i128;
    const MAX: i128;
}

macro_rules! checked_int {
    ($($t:ty),*) => {$(
        impl CheckedInt for $t {
            const MIN: i128 = <$t>::MIN as i128;
            const MAX: i128 = <$t>::MAX as i128;
        }
    )*};
}
checked_int!(u8, u16, u32, u64, usize, i8, i16, i32, i64);

fn convert<T: CheckedInt>(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<T> {
    if obj.is_instance_of::<PyBool>() || !obj.is_instance_of::<PyInt>() {
        let ty = obj
            .get_type()
            .name()
            .map(|n| n.to_string())
            .unwrap_or_else(|_| "?".into());
        return Err(ArgumentError::new_err(format!(
            "{what}expected an integer in [{}, {}], got {ty}",
            T::MIN,
            T::MAX
        )));
    }
    // i128 holds every u64 and i64; a larger int fails here and is reported
    // as out of range below.
    let wide: Option<i128> = obj.extract::<i128>().ok();
    match wide.and_then(|v| T::try_from(v).ok()) {
        Some(v) => Ok(v),
        None => {
            let shown = obj
                .str()
                .map(|s| s.to_string())
                .unwrap_or_else(|_| "?".into());
            Err(ArgumentError::new_err(format!(
                "{what}expected an integer in [{}, {}], got {shown}",
                T::MIN,
                T::MAX
            )))
        }
    }
}

impl<'a, 'py, T: CheckedInt> FromPyObject<'a, 'py> for Checked<T> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        convert(&obj, "").map(Checked)
    }
}

/// Converts `obj` for the parameter `name`, naming it in the error.
pub fn arg<T: CheckedInt>(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<T> {
    convert(obj, &format!("argument '{name}': "))
}

/// As [`arg`], also taking integer-like objects (numpy integers, through
/// `__index__`), never a `bool` or `float`.
#[cfg(feature = "cuda")]
pub fn index<T: CheckedInt>(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<T> {
    if integer_like(obj) && !obj.is_instance_of::<PyInt>() {
        return arg(&obj.call_method0("__index__")?, name);
    }
    arg(obj, name)
}

/// A Python `str` that is valid Unicode text (no lone surrogates, which
/// cannot become UTF-8): PyO3's `&str`/`String` would raise
/// `UnicodeEncodeError`, this raises [`ArgumentError`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Text(pub String);

impl Text {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

// So a `Text` parameter reads like the `&str` it replaces.
impl std::ops::Deref for Text {
    type Target = str;
    fn deref(&self) -> &str {
        &self.0
    }
}

impl Display for Text {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for Text {
    fn from(s: &str) -> Self {
        Text(s.to_owned())
    }
}

fn text_of(obj: &Bound<'_, PyAny>, what: &str) -> PyResult<String> {
    let Ok(s) = obj.cast::<pyo3::types::PyString>() else {
        return Err(ArgumentError::new_err(format!(
            "{what}expected a str, got {}",
            crate::types::type_name(obj)
        )));
    };
    s.to_str().map(str::to_owned).map_err(|_| {
        // Where the bad character is, so the user can find it.
        let at = s
            .to_string_lossy()
            .char_indices()
            .find(|(_, c)| *c == char::REPLACEMENT_CHARACTER)
            .map_or(0, |(i, _)| i);
        ArgumentError::new_err(format!(
            "{what}text is not valid Unicode (a lone surrogate near character {at}); \
             zyntax reads UTF-8 text only"
        ))
    })
}

impl<'a, 'py> FromPyObject<'a, 'py> for Text {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        text_of(&obj, "").map(Text)
    }
}

/// Converts `obj` (a `str`) for the parameter `name`, naming it in the error.
#[allow(dead_code)] // for bindings that convert a `PyAny` themselves
pub fn text(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<String> {
    text_of(obj, &format!("argument '{name}': "))
}

/// A grid or block shape: an `int` or a sequence of 1 to 3 `int`s, each in
/// `[min, 2**32 - 1]` (never a `str`, `float` or `bool`), padded with 1s.
/// (The CUDA runtime passes `min = 0`: its launch check reports a zero
/// dimension against the device's limits.)
pub fn dim3(obj: &Bound<'_, PyAny>, name: &str, min: u32) -> PyResult<[u32; 3]> {
    let bad = |why: String| ArgumentError::new_err(format!("argument '{name}': {why}"));
    let one = |v: &Bound<'_, PyAny>| -> PyResult<u32> {
        // numpy integers are not `int` subclasses; `__index__` makes them one.
        let v = if integer_like(v) && !v.is_instance_of::<PyInt>() {
            v.call_method0("__index__")?
        } else {
            v.clone()
        };
        match convert::<u32>(&v, &format!("argument '{name}': ")) {
            Ok(x) if x >= min => Ok(x),
            // Out of range: say the range that is accepted.
            _ if v.is_instance_of::<PyInt>() => Err(bad(format!(
                "each dimension must be an integer in [{min}, {}], got {}",
                u32::MAX,
                v.str().map(|s| s.to_string()).unwrap_or_default()
            ))),
            other => other,
        }
    };
    if integer_like(obj) {
        return Ok([one(obj)?, 1, 1]);
    }
    let is_seq =
        obj.is_instance_of::<pyo3::types::PyTuple>() || obj.is_instance_of::<pyo3::types::PyList>();
    if !is_seq {
        return Err(bad(format!(
            "expected an int or a tuple of 1 to 3 ints, got {}",
            crate::types::type_name(obj)
        )));
    }
    let items: Vec<Bound<'_, PyAny>> = obj.try_iter()?.collect::<PyResult<_>>()?;
    if items.is_empty() || items.len() > 3 {
        return Err(bad(format!(
            "expected 1 to 3 dimensions, got {}",
            items.len()
        )));
    }
    let mut d = [1u32; 3];
    for (slot, v) in d.iter_mut().zip(&items) {
        *slot = one(v)?;
    }
    Ok(d)
}

/// An `int` or an integer-like object (numpy integers), never a `bool`.
fn integer_like(obj: &Bound<'_, PyAny>) -> bool {
    !obj.is_instance_of::<PyBool>()
        && (obj.is_instance_of::<PyInt>()
            || (!obj.is_instance_of::<pyo3::types::PyFloat>()
                && obj.hasattr("__index__").unwrap_or(false)))
}

/// `obj` as an instance of the Python class `T` (e.g. `zyntax.hir.Module`),
/// else an [`ArgumentError`] naming the parameter (PyO3's own check raises
/// `TypeError`).
pub fn instance<'py, T: pyo3::PyTypeCheck>(
    obj: &Bound<'py, PyAny>,
    name: &str,
    class: &str,
) -> PyResult<Bound<'py, T>> {
    obj.cast::<T>().cloned().map_err(|_| {
        ArgumentError::new_err(format!(
            "argument '{name}': expected a {class}, got {}",
            crate::types::type_name(obj)
        ))
    })
}

/// A flag: a Python `bool` (or numpy's `bool_`), never an `int`, `str` or
/// array (PyO3's `bool` raises `TypeError`; this raises [`ArgumentError`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flag(pub bool);

fn is_numpy_bool(obj: &Bound<'_, PyAny>) -> bool {
    let ty = obj.get_type();
    let module = ty.module().map(|m| m.to_string()).unwrap_or_default();
    let name = ty.name().map(|n| n.to_string()).unwrap_or_default();
    module == "numpy" && (name == "bool_" || name == "bool")
}

impl<'a, 'py> FromPyObject<'a, 'py> for Flag {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(b) = obj.cast::<PyBool>() {
            return Ok(Flag(b.is_true()));
        }
        if is_numpy_bool(&obj) {
            return obj.is_truthy().map(Flag);
        }
        Err(ArgumentError::new_err(format!(
            "expected a bool (True or False), got {}",
            crate::types::type_name(&obj)
        )))
    }
}

/// A list (or tuple) of `str`, e.g. `targets=["sm_80"]`. A lone `str` is
/// refused by name: PyO3's `Vec<String>` raises `TypeError` ("Can't extract
/// `str` to `Vec`"), and iterating it would take each character as a name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TextList(pub Vec<String>);

impl<'a, 'py> FromPyObject<'a, 'py> for TextList {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(s) = obj.cast::<pyo3::types::PyString>() {
            let shown = s.repr().map(|r| r.to_string()).unwrap_or_default();
            return Err(ArgumentError::new_err(format!(
                "expected a list of str, got the str {shown}: a single name still goes \
                 in a list, e.g. [{shown}]"
            )));
        }
        let items: Vec<Bound<'py, PyAny>> = if let Ok(l) = obj.cast::<pyo3::types::PyList>() {
            l.iter().collect()
        } else if let Ok(t) = obj.cast::<pyo3::types::PyTuple>() {
            t.iter().collect()
        } else {
            return Err(ArgumentError::new_err(format!(
                "expected a list of str, got {}",
                crate::types::type_name(&obj)
            )));
        };
        items
            .iter()
            .enumerate()
            .map(|(k, item)| text_of(item, &format!("item {k}: ")))
            .collect::<PyResult<_>>()
            .map(TextList)
    }
}

/// An instance of the Python class `T` (a `zyntax` class such as
/// `zyntax.hir.Block` or `zyntax.cuda.Stream`): PyO3's own check raises
/// `TypeError`, this raises [`ArgumentError`] naming the class expected.
/// Reads like the `&Bound<T>` it replaces.
pub struct Is<'py, T>(pub Bound<'py, T>);

impl<'py, T> std::ops::Deref for Is<'py, T> {
    type Target = Bound<'py, T>;
    fn deref(&self) -> &Bound<'py, T> {
        &self.0
    }
}

impl<'a, 'py, T: pyo3::PyTypeInfo> FromPyObject<'a, 'py> for Is<'py, T> {
    type Error = PyErr;

    fn extract(obj: Borrowed<'a, 'py, PyAny>) -> PyResult<Self> {
        if let Ok(v) = obj.cast::<T>() {
            return Ok(Is(v.to_owned()));
        }
        let ty = T::type_object(obj.py());
        let class = match (ty.module(), ty.qualname()) {
            (Ok(m), Ok(n)) => format!("{m}.{n}"),
            _ => "?".into(),
        };
        Err(ArgumentError::new_err(format!(
            "expected a {class}, got {}",
            crate::types::type_name(&obj)
        )))
    }
}
