//! The reference interpreter (crate `zyntax-interp`) for Python: launch a
//! kernel or call a host/device function on byte buffers. The numpy-facing
//! wrapper is `python/zyntax/interp.py`. Runs release the GIL.

use crate::checked::{self, Flag, Text};
use crate::errors::{guard, ArgumentError, BuildError, InternalError, TrapError, ZyntaxError};
use crate::hir::{module_arg, verify_error};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyBytes, PyDict, PyFloat, PyInt, PyList, PyTuple};
use zyntax_hir::tensormap::{Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc};
use zyntax_hir::ScalarType;
use zyntax_hir::Type;
use zyntax_interp::tma::InterpTensorMap;
use zyntax_interp::{Arg, InterpError, Interpreter, Options};

fn interp_error(py: Python<'_>, e: InterpError) -> PyErr {
    match e {
        InterpError::Verify(v) => verify_error(py, v),
        InterpError::Launch(m) => {
            crate::errors::LaunchError::new_err(format!("invalid launch: {m}"))
        }
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

/// Converts argument `k`: `("buffer", index)`, `("buffer", index,
/// byte_offset)`, `None` (null pointer), bool, int or float.
fn to_arg(k: usize, obj: &Bound<'_, PyAny>) -> PyResult<Arg> {
    let name = format!("args[{k}]");
    if obj.is_none() {
        return Ok(Arg::Null);
    }
    if let Ok(b) = obj.cast::<PyBool>() {
        return Ok(Arg::Bool(b.is_true()));
    }
    if obj.cast::<PyInt>().is_ok() {
        // Range-checked against the parameter's type by the interpreter.
        return Ok(Arg::Int(obj.extract::<i128>().map_err(|_| {
            ArgumentError::new_err(format!(
                "argument '{name}': {obj} does not fit a 64-bit integer"
            ))
        })?));
    }
    if obj.cast::<PyFloat>().is_ok() {
        return Ok(Arg::Float(obj.extract()?));
    }
    if let Ok(t) = obj.cast::<PyTuple>() {
        if t.len() == 2 && t.get_item(0)?.str()?.to_str().ok() == Some("tensormap") {
            let index = checked::arg::<usize>(&t.get_item(1)?, &format!("{name}[1]"))?;
            return Ok(Arg::TensorMap(index));
        }
        let shape = || {
            ArgumentError::new_err(format!(
                "argument '{name}': expected ('buffer', index[, byte_offset]), got {obj}"
            ))
        };
        if !(2..=3).contains(&t.len()) || t.get_item(0)?.str()?.to_str().ok() != Some("buffer") {
            return Err(shape());
        }
        let index = checked::arg::<usize>(&t.get_item(1)?, &format!("{name}[1]"))?;
        return Ok(match t.len() {
            2 => Arg::Buffer(index),
            _ => Arg::BufferAt(
                index,
                checked::arg::<u64>(&t.get_item(2)?, &format!("{name}[2]"))?,
            ),
        });
    }
    // numpy scalars: integers via __index__, then floats.
    if let Ok(i) = obj.extract::<i128>() {
        return Ok(Arg::Int(i));
    }
    if let Ok(f) = obj.extract::<f64>() {
        return Ok(Arg::Float(f));
    }
    Err(ArgumentError::new_err(format!(
        "argument '{name}': cannot pass {} to the interpreter",
        crate::types::type_name(obj)
    )))
}

fn options(checks: bool, fuel: Option<&Bound<'_, PyAny>>) -> PyResult<Options> {
    let mut o = Options {
        checks,
        ..Options::default()
    };
    if let Some(f) = fuel.filter(|f| !f.is_none()) {
        o.fuel = checked::arg::<u64>(f, "fuel")?;
    }
    Ok(o)
}

fn args_in(args: &Bound<'_, PyList>) -> PyResult<Vec<Arg>> {
    args.iter()
        .enumerate()
        .map(|(k, a)| to_arg(k, &a))
        .collect()
}

fn buffers_in(buffers: &Bound<'_, PyList>) -> PyResult<Vec<Vec<u8>>> {
    buffers
        .iter()
        .enumerate()
        .map(|(k, b)| {
            if !b.is_instance_of::<PyBytes>() && !b.is_instance_of::<pyo3::types::PyByteArray>() {
                return Err(ArgumentError::new_err(format!(
                    "argument 'buffers[{k}]': expected bytes, got {}",
                    crate::types::type_name(&b)
                )));
            }
            b.extract::<Vec<u8>>()
        })
        .collect()
}

fn buffers_out<'py>(py: Python<'py>, bufs: &[Vec<u8>]) -> PyResult<Bound<'py, PyList>> {
    PyList::new(py, bufs.iter().map(|b| PyBytes::new(py, b)))
}

/// A tensor map description from Python: `(buffer, dtype, dims, strides,
/// box, element_strides, swizzle, oob_fill)`, dimensions innermost first.
type TmapTuple = (
    usize,
    Text,
    Vec<u64>,
    Vec<u64>,
    Vec<u32>,
    Vec<u32>,
    Text,
    Text,
);

fn tensor_map_desc(t: &TmapTuple) -> PyResult<TensorMapDesc> {
    let (_, dtype, dims, strides, bx, es, swizzle, oob) = t;
    let bad = |what: &str, v: &str| {
        ArgumentError::new_err(format!("TensorMap argument '{what}': unknown value {v:?}"))
    };
    Ok(TensorMapDesc {
        dtype: ScalarType::from_name(dtype.as_str()).ok_or_else(|| bad("dtype", dtype.as_str()))?,
        dims: dims.clone(),
        strides: strides.clone(),
        box_dims: bx.clone(),
        elem_strides: es.clone(),
        swizzle: Swizzle::from_name(swizzle.as_str())
            .ok_or_else(|| bad("swizzle", swizzle.as_str()))?,
        interleave: Interleave::None,
        oob_fill: OobFill::from_name(oob.as_str()).ok_or_else(|| bad("oob_fill", oob.as_str()))?,
        l2_promotion: L2Promotion::None,
    })
}

/// Checks a tensor map description (see [`tensor_map_desc`]) as
/// `cuTensorMapEncodeTiled` would, for a tensor at byte `address`; raises
/// `ArgumentError` naming the bad field.
#[pyfunction]
pub fn interp_tensor_map_check(desc: TmapTuple, address: u64) -> PyResult<()> {
    guard(|| {
        tensor_map_desc(&desc)?
            .validate(address)
            .map_err(|e| ArgumentError::new_err(e.to_string()))
    })
}

/// Launches kernel `name` over `grid` x `block` threads on copies of
/// `buffers` (bytes). Returns `(buffers_after, stats)`; buffers are returned
/// after a trap too, as the exception's `buffers` attribute.
#[pyfunction]
#[pyo3(signature = (module, name, grid, block, args, buffers, *, shared_bytes=None, checks=Flag(true), fuel=None, tensor_maps=None, cluster=None, globals=None),
    text_signature = "(module, name, grid, block, args, buffers, *, shared_bytes=None, checks=True, fuel=None, tensor_maps=None, cluster=None, globals=None)")]
#[allow(clippy::too_many_arguments)]
pub fn interp_launch<'py>(
    py: Python<'py>,
    module: &Bound<'py, PyAny>,
    name: Text,
    grid: &Bound<'py, PyAny>,
    block: &Bound<'py, PyAny>,
    args: &Bound<'py, PyList>,
    buffers: &Bound<'py, PyList>,
    shared_bytes: Option<&Bound<'py, PyAny>>,
    checks: Flag,
    fuel: Option<&Bound<'py, PyAny>>,
    tensor_maps: Option<Vec<TmapTuple>>,
    cluster: Option<&Bound<'py, PyAny>>,
    globals: Option<Vec<(String, Vec<u8>)>>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyDict>)> {
    let maps = tensor_maps
        .unwrap_or_default()
        .iter()
        .map(|t| {
            Ok(InterpTensorMap {
                buffer: t.0,
                offset: 0,
                desc: tensor_map_desc(t)?,
            })
        })
        .collect::<PyResult<Vec<_>>>()?;
    let m = module_arg(module)?;
    let launch_opts = zyntax_interp::LaunchOptions {
        cluster: cluster
            .map(|c| checked::dim3(c, "cluster", 1))
            .transpose()?,
    };
    let (name, grid, block) = (
        name.0,
        checked::dim3(grid, "grid", 1)?,
        checked::dim3(block, "block", 1)?,
    );
    let shared_bytes = match shared_bytes {
        Some(s) => checked::arg::<u32>(s, "shared_bytes")?.into(),
        None => 0,
    };
    let args = args_in(args)?;
    let mut bufs = buffers_in(buffers)?;
    let opts = options(checks.0, fuel)?;
    // Module globals: set from the given bytes before the run, read back after it.
    let globals = globals.unwrap_or_default();
    let mut globals_after: Vec<Vec<u8>> = Vec::new();
    let res = guard(|| {
        Ok(py.detach(|| {
            Interpreter::with_options(&m, opts).and_then(|mut it| {
                it.tensor_maps = maps;
                for (g, bytes) in &globals {
                    it.set_global_bytes(g, bytes)?;
                }
                let stats = it.launch_with(
                    &name,
                    grid,
                    block,
                    shared_bytes,
                    &args,
                    &mut bufs,
                    &launch_opts,
                )?;
                for (g, _) in &globals {
                    globals_after.push(it.global_bytes(g)?);
                }
                Ok(stats)
            })
        }))
    })?;
    let out = buffers_out(py, &bufs)?;
    match res {
        Ok(stats) => {
            let d = PyDict::new(py);
            d.set_item("instructions", stats.instructions)?;
            d.set_item("warp_steps", stats.warp_steps)?;
            if !globals.is_empty() {
                let g = PyDict::new(py);
                for ((n, _), b) in globals.iter().zip(&globals_after) {
                    g.set_item(n, PyBytes::new(py, b))?;
                }
                d.set_item("globals", g)?;
            }
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
#[pyo3(signature = (module, name, args, buffers, *, checks=Flag(true), fuel=None),
    text_signature = "(module, name, args, buffers, *, checks=True, fuel=None)")]
pub fn interp_call<'py>(
    py: Python<'py>,
    module: &Bound<'py, PyAny>,
    name: Text,
    args: &Bound<'py, PyList>,
    buffers: &Bound<'py, PyList>,
    checks: Flag,
    fuel: Option<&Bound<'py, PyAny>>,
) -> PyResult<(Bound<'py, PyList>, Bound<'py, PyList>)> {
    let m = module_arg(module)?;
    let name = name.0;
    let args = args_in(args)?;
    let mut bufs = buffers_in(buffers)?;
    let opts = options(checks.0, fuel)?;
    let res = guard(|| {
        Ok(py.detach(|| {
            Interpreter::with_options(&m, opts).and_then(|it| it.call(&name, &args, &mut bufs))
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
