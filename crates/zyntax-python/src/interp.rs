//! The reference interpreter (crate `zyntax-interp`) for Python: launch a
//! kernel or call a host/device function on byte buffers. The numpy-facing
//! wrapper is `python/zyntax/interp.py`. Runs release the GIL.

use crate::errors::{guard, BuildError, InternalError, LaunchError, TrapError, ZyntaxError};
use crate::hir::{verify_error, HirModule};
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyTuple};
use zyntax_hir::Type;
use zyntax_interp::{Arg, InterpError, Interpreter, Options};

fn interp_error(py: Python<'_>, e: InterpError) -> PyErr {
    match e {
        InterpError::Verify(v) => verify_error(py, v),
        InterpError::Launch(m) => LaunchError::new_err(format!("invalid launch: {m}")),
        InterpError::Trap(t) => {
            let err = TrapError::new_err(t.to_string());
            let v = err.value(py);
            let _ = v.setattr("kind", t.kind.name());
            let _ = v.setattr("function", t.function.clone());
            let _ = v.setattr("kernel", t.kernel.clone());
            let _ = v.setattr("inst", t.inst.clone());
            let _ = v.setattr("thread", t.thread);
            let _ = v.setattr("block", t.block);
            err
        }
        e @ InterpError::FuelExhausted { .. } => {
            let err = TrapError::new_err(e.to_string());
            let _ = err.value(py).setattr("kind", "fuel exhausted");
            err
        }
        InterpError::Unsupported(m) => {
            ZyntaxError::new_err(format!("unsupported by the interpreter: {m}"))
        }
        InterpError::Internal(m) => {
            InternalError::new_err(format!("internal interpreter error: {m}"))
        }
    }
}

/// Converts one Python argument: `("buffer", index)`, `("buffer", index,
/// byte_offset)`, `None` (null pointer), bool, int or float.
fn to_arg(obj: &Bound<'_, PyAny>) -> PyResult<Arg> {
    if obj.is_none() {
        return Ok(Arg::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Arg::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        return Ok(Arg::Int(obj.extract().map_err(|_| {
            LaunchError::new_err(format!("integer argument {obj} is too large"))
        })?));
    }
    if obj.cast::<PyFloat>().is_ok() {
        return Ok(Arg::Float(obj.extract()?));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        let tag: String = t.get_item(0)?.extract()?;
        if tag == "buffer" {
            let index: usize = t.get_item(1)?.extract()?;
            return Ok(match t.len() {
                2 => Arg::Buffer(index),
                3 => Arg::BufferAt(index, t.get_item(2)?.extract()?),
                _ => return Err(PyTypeError::new_err("expected ('buffer', index[, offset])")),
            });
        }
    }
    // numpy scalars: integers via __index__, then floats.
    if let Ok(i) = obj.extract::<i128>() {
        return Ok(Arg::Int(i));
    }
    if let Ok(f) = obj.extract::<f64>() {
        return Ok(Arg::Float(f));
    }
    Err(PyTypeError::new_err(format!(
        "cannot pass {} to the interpreter",
        crate::types::type_name(obj)
    )))
}

fn options(checks: bool, fuel: Option<u64>) -> Options {
    let mut o = Options {
        checks,
        ..Options::default()
    };
    if let Some(f) = fuel {
        o.fuel = f;
    }
    o
}

fn buffers_in(buffers: &Bound<'_, PyList>) -> PyResult<Vec<Vec<u8>>> {
    buffers
        .iter()
        .map(|b| {
            b.extract::<Vec<u8>>()
                .map_err(|_| PyTypeError::new_err("buffers must be bytes-like objects"))
        })
        .collect()
}

fn buffers_out<'py>(py: Python<'py>, bufs: &[Vec<u8>]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, bufs.iter().map(|b| PyBytes::new(py, b)))
}

/// Launches kernel `name` over `grid` x `block` threads on copies of
/// `buffers` (bytes). Returns `(buffers_after, stats)`; buffers are returned
/// after a trap too, as the exception's `buffers` attribute.
#[pyfunction]
#[pyo3(signature = (module, name, grid, block, args, buffers, *, shared_bytes=0, checks=true, fuel=None))]
#[allow(clippy::too_many_arguments)]
pub fn interp_launch<'py>(
    py: Python<'py>,
    module: &Bound<'py, HirModule>,
    name: &str,
    grid: [u32; 3],
    block: [u32; 3],
    args: &Bound<'py, PyList>,
    buffers: &Bound<'py, PyList>,
    shared_bytes: u64,
    checks: bool,
    fuel: Option<u64>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
    let m = module.get().hir()?;
    let args = args
        .iter()
        .map(|a| to_arg(&a))
        .collect::<PyResult<Vec<_>>>()?;
    let mut bufs = buffers_in(buffers)?;
    let opts = options(checks, fuel);
    let res = guard(|| {
        Ok(py.detach(|| {
            Interpreter::with_options(&m, opts)
                .and_then(|it| it.launch(name, grid, block, shared_bytes, &args, &mut bufs))
        }))
    })?;
    let out = buffers_out(py, &bufs)?;
    match res {
        Ok(stats) => {
            let d = PyDict::new(py);
            d.set_item("instructions", stats.instructions)?;
            d.set_item("warp_steps", stats.warp_steps)?;
            Ok((out, d))
        }
        Err(e) => {
            let err = interp_error(py, e);
            let _ = err.value(py).setattr("buffers", out);
            Err(err)
        }
    }
}

fn value_to_py(py: Python<'_>, v: &zyntax_interp::Value) -> PyResult<Py<PyAny>> {
    match &v.ty {
        Type::Scalar(s) if s.is_bool() => Ok(PyBool::new(py, v.as_i128().unwrap_or(0) != 0)
            .to_owned()
            .into_any()
            .unbind()),
        Type::Scalar(s) if s.is_float() => Ok(v
            .as_f64()
            .ok_or_else(|| InternalError::new_err("float result without bits"))?
            .into_pyobject(py)?
            .into_any()
            .unbind()),
        Type::Scalar(_) => Ok(v
            .as_i128()
            .ok_or_else(|| InternalError::new_err("integer result without bits"))?
            .into_pyobject(py)?
            .into_any()
            .unbind()),
        Type::Ptr(..) => match v.as_buffer_ptr() {
            Some((i, off)) => Ok(("buffer", i, off).into_pyobject(py)?.into_any().unbind()),
            None => Ok(py.None()),
        },
        other => Err(BuildError::new_err(format!(
            "results of type {other} cannot be returned to Python"
        ))),
    }
}

/// Calls host or device function `name` as one thread. Returns
/// `(results, buffers_after)`.
#[pyfunction]
#[pyo3(signature = (module, name, args, buffers, *, checks=true, fuel=None))]
pub fn interp_call<'py>(
    py: Python<'py>,
    module: &Bound<'py, HirModule>,
    name: &str,
    args: &Bound<'py, PyList>,
    buffers: &Bound<'py, PyList>,
    checks: bool,
    fuel: Option<u64>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let m = module.get().hir()?;
    let args = args
        .iter()
        .map(|a| to_arg(&a))
        .collect::<PyResult<Vec<_>>>()?;
    let mut bufs = buffers_in(buffers)?;
    let opts = options(checks, fuel);
    let res = guard(|| {
        Ok(py.detach(|| {
            Interpreter::with_options(&m, opts).and_then(|it| it.call(name, &args, &mut bufs))
        }))
    })?;
    let out = buffers_out(py, &bufs)?;
    match res {
        Ok(vals) => {
            let list = PyList::empty(py);
            for v in &vals {
                list.append(value_to_py(py, v)?)?;
            }
            Ok((list, out))
        }
        Err(e) => {
            let err = interp_error(py, e);
            let _ = err.value(py).setattr("buffers", out);
            Err(err)
        }
    }
}
