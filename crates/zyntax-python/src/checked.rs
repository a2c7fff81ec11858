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
