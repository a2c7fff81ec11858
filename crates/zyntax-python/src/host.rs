//! The CPU backend for Python: `cpu_compile(module) -> CpuModule`, whose
//! functions are called with numpy arrays and scalars (`module["f"](x, 3)`)
//! and whose kernels (barriers and shared memory included) launch natively,
//! blocks in parallel (`module.launch("k", grid, block, *args)`); kernels with
//! warp collectives or tensor-core ops fall back to the reference interpreter
//! when it is compiled in.
//!
//! Arrays cross through `__array_interface__` (so the abi3 extension needs no
//! numpy headers): the dtype must equal the pointee type, the array must be
//! C-contiguous, and writeable unless the function only reads through that
//! parameter ([`written_params`]); its length is passed to the generated code
//! for bounds checks. A wrong argument raises `ArgumentError` with the
//! signature; a failed run-time check raises `TrapError` naming the function
//! and index.

use crate::checked::{self, Text, TextList};
use crate::errors::{guard, ArgumentError, CompileError, InternalError, TrapError};
use crate::hir::verify_error;
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple};
use std::ffi::{c_char, c_int, c_void};
use std::sync::Arc;
use zyntax_hir::{OptLevel, ScalarType, Type};
use zyntax_llvm::host::{
    self, HostError, HostFnKind, HostFunction, HostModule, HostOptions, Scalar,
};

fn host_error(py: Python<'_>, e: HostError) -> PyErr {
    match e {
        HostError::Verify(v) => verify_error(py, v),
        HostError::Argument(m) => ArgumentError::new_err(m),
        HostError::Runtime(r) => {
            let err = TrapError::new_err(r.message.clone());
            let v = err.value(py);
            let kind = match r.code {
                1 => "out_of_bounds",
                2 => "division_by_zero",
                4 => "unreachable",
                8 => "stack_overflow",
                16 => "divergent_barrier",
                32 => "divergent_collective",
                _ => "runtime",
            };
            let _ = v.setattr("kind", kind);
            let _ = v.setattr("function", r.function.clone());
            let _ = v.setattr("entry", r.entry.clone());
            let _ = v.setattr("index", r.index);
            let _ = v.setattr("param", r.param);
            let _ = v.setattr("length", r.len);
            err
        }
        e @ HostError::Internal { .. } => InternalError::new_err(e.to_string()),
        e @ HostError::NotFound(_) => ArgumentError::new_err(e.to_string()),
        e => CompileError::new_err(e.to_string()),
    }
}

/// numpy's `typestr` for a scalar type (little-endian host).
fn typestr(s: ScalarType) -> Option<&'static str> {
    Some(match s {
        ScalarType::Bool => "|b1",
        ScalarType::I8 => "|i1",
        ScalarType::U8 => "|u1",
        ScalarType::I16 => "<i2",
        ScalarType::U16 => "<u2",
        ScalarType::I32 => "<i4",
        ScalarType::U32 => "<u4",
        ScalarType::I64 => "<i8",
        ScalarType::U64 => "<u8",
        ScalarType::F16 => "<f2",
        ScalarType::F32 => "<f4",
        ScalarType::F64 => "<f8",
        ScalarType::BF16 => return None,
    })
}

fn dtype_name(s: ScalarType) -> &'static str {
    match s {
        ScalarType::Bool => "bool",
        ScalarType::I8 => "int8",
        ScalarType::U8 => "uint8",
        ScalarType::I16 => "int16",
        ScalarType::U16 => "uint16",
        ScalarType::I32 => "int32",
        ScalarType::U32 => "uint32",
        ScalarType::I64 => "int64",
        ScalarType::U64 => "uint64",
        ScalarType::F16 => "float16",
        ScalarType::BF16 => "bfloat16",
        ScalarType::F32 => "float32",
        ScalarType::F64 => "float64",
    }
}

fn type_error(f: &HostFunction, k: usize, msg: String) -> PyErr {
    ArgumentError::new_err(format!("{}: argument {k}: {msg}", f.signature()))
}

/// For each parameter of `f`: whether the function may write through it (or
/// let it escape, so that something else may). Conservative: a pointer
/// parameter counts as read-only only when every use of every pointer derived
/// from it (by pointer arithmetic, casts, selects and block arguments) is a
/// load. Read-only numpy arrays are accepted for the other parameters.
pub fn written_params(f: &zyntax_hir::Function) -> Vec<bool> {
    use zyntax_hir::{Op, OpClass};
    f.params()
        .iter()
        .map(|&p| {
            let mut derived = std::collections::HashSet::from([p]);
            let mut grew = true;
            while grew {
                grew = false;
                for inst in &f.insts {
                    if !inst.args.iter().any(|a| derived.contains(a)) {
                        continue;
                    }
                    match inst.op {
                        Op::Load | Op::LoadCached(_) | Op::LoadAcquire(_) | Op::MmaLoad { .. } => {}
                        Op::Jump | Op::Branch => {
                            for t in &inst.targets {
                                for (a, bp) in t.args.iter().zip(&f.block(t.block).params) {
                                    if derived.contains(a) {
                                        grew |= derived.insert(*bp);
                                    }
                                }
                            }
                        }
                        _ if inst.op.class() == OpClass::Scalar
                            || (inst.op.class() == OpClass::Memory
                                && inst
                                    .results
                                    .iter()
                                    .all(|r| matches!(f.value_type(*r), Type::Ptr(..)))
                                && !inst.results.is_empty()) =>
                        {
                            for r in &inst.results {
                                grew |= derived.insert(*r);
                            }
                        }
                        // A store, atomic, MMA store, cp.async, call or return.
                        _ => return true,
                    }
                }
            }
            false
        })
        .collect()
}

/// numpy's `PyArrayInterface` (the C struct behind `__array_struct__`).
#[repr(C)]
struct ArrayInterface {
    two: c_int,
    nd: c_int,
    typekind: c_char,
    itemsize: c_int,
    flags: c_int,
    shape: *const isize,
    strides: *const isize,
    data: *mut c_void,
    descr: *mut pyo3::ffi::PyObject,
}
const NPY_C_CONTIGUOUS: c_int = 0x1;
const NPY_NOTSWAPPED: c_int = 0x200;
const NPY_WRITEABLE: c_int = 0x400;

/// (typekind, itemsize) of a scalar type in numpy's array interface.
fn kind_size(s: ScalarType) -> (u8, c_int) {
    let k = if s.is_bool() {
        b'b'
    } else if s.is_float() {
        b'f'
    } else if s.is_signed() {
        b'i'
    } else {
        b'u'
    };
    (k, s.size_bytes() as c_int)
}

/// Fast path for numpy arrays: `__array_struct__` is a capsule around a C
/// struct, far cheaper than building the `__array_interface__` dict. `None`
/// when the object has none (then the dict path runs).
fn array_struct(
    py: Python<'_>,
    f: &HostFunction,
    k: usize,
    t: &Type,
    obj: &Bound<'_, PyAny>,
    written: bool,
) -> Option<PyResult<(u64, u64)>> {
    let (es, per) = host::pointee_elem(t)?;
    let cap = obj.getattr(intern!(py, "__array_struct__")).ok()?;
    // SAFETY: a capsule pointer is valid while `cap` lives; numpy names it NULL.
    let p = unsafe { pyo3::ffi::PyCapsule_GetPointer(cap.as_ptr(), std::ptr::null()) }
        as *const ArrayInterface;
    if p.is_null() {
        let _ = PyErr::take(py);
        return None;
    }
    // SAFETY: numpy keeps the struct alive as long as the capsule.
    let ai = unsafe { &*p };
    if ai.two != 2 {
        return None;
    }
    let (kind, size) = kind_size(es);
    if ai.typekind as u8 != kind || ai.itemsize != size || ai.flags & NPY_NOTSWAPPED == 0 {
        let got = ScalarType::ALL
            .iter()
            .find(|s| kind_size(**s) == (ai.typekind as u8, ai.itemsize))
            .map_or_else(
                || format!("{}{}", ai.typekind as u8 as char, ai.itemsize),
                |s| dtype_name(*s).to_string(),
            );
        return Some(Err(type_error(
            f,
            k,
            format!(
                "array of dtype {got} does not match {t} (need {})",
                dtype_name(es)
            ),
        )));
    }
    if ai.flags & NPY_WRITEABLE == 0 && written {
        return Some(Err(read_only(f, k)));
    }
    let nd = usize::try_from(ai.nd).unwrap_or(0);
    // SAFETY: shape has nd entries.
    let shape = if nd == 0 || ai.shape.is_null() {
        &[][..]
    } else {
        unsafe { std::slice::from_raw_parts(ai.shape, nd) }
    };
    let count: usize = shape
        .iter()
        .map(|d| usize::try_from(*d).unwrap_or(0))
        .product();
    if ai.flags & NPY_C_CONTIGUOUS == 0 && count > 1 {
        return Some(Err(type_error(
            f,
            k,
            "array must be C-contiguous (use numpy.ascontiguousarray)".into(),
        )));
    }
    Some(Ok((ai.data as u64, count as u64 / per.max(1))))
}

fn read_only(f: &HostFunction, k: usize) -> PyErr {
    type_error(
        f,
        k,
        "array is read-only, but the function may write through this parameter \
         (pass a writeable copy, e.g. numpy.array(a))"
            .into(),
    )
}

/// One pointer argument: (address, element count in pointee units).
/// `written`: the function may write through it (see [`written_params`]).
fn array_arg(
    py: Python<'_>,
    f: &HostFunction,
    k: usize,
    t: &Type,
    obj: &Bound<'_, PyAny>,
    written: bool,
) -> PyResult<(u64, u64)> {
    let Some((es, per)) = host::pointee_elem(t) else {
        return Err(type_error(f, k, format!("cannot pass an array for {t}")));
    };
    if let Some(r) = array_struct(py, f, k, t, obj, written) {
        return r;
    }
    let want = dtype_name(es);
    let Ok(ai) = obj.getattr(intern!(py, "__array_interface__")) else {
        return Err(type_error(
            f,
            k,
            format!(
                "expected a numpy array of {want} for {t}, got {}",
                obj.get_type().name()?
            ),
        ));
    };
    let ai = ai
        .cast_into::<PyDict>()
        .map_err(|_| type_error(f, k, "__array_interface__ is not a dict".into()))?;
    let ts: String = ai
        .get_item("typestr")?
        .ok_or_else(|| type_error(f, k, "no typestr".into()))?
        .extract()?;
    if Some(ts.as_str()) != typestr(es) {
        return Err(type_error(
            f,
            k,
            format!(
                "array of dtype {} does not match {t} (need {want})",
                ScalarType::ALL
                    .iter()
                    .find(|s| typestr(**s) == Some(ts.as_str()))
                    .map_or(ts.as_str(), |s| dtype_name(*s))
            ),
        ));
    }
    let (addr, readonly): (usize, bool) = ai
        .get_item("data")?
        .ok_or_else(|| type_error(f, k, "no data".into()))?
        .extract()?;
    if readonly && written {
        return Err(read_only(f, k));
    }
    let shape: Vec<usize> = ai
        .get_item("shape")?
        .ok_or_else(|| type_error(f, k, "no shape".into()))?
        .extract()?;
    let count: usize = shape.iter().product();
    if let Some(st) = ai.get_item("strides")? {
        if !st.is_none() {
            let strides: Vec<isize> = st.extract()?;
            let mut expect = es.size_bytes() as isize;
            for (d, s) in shape.iter().zip(strides.iter()).rev() {
                if *d > 1 && *s != expect {
                    return Err(type_error(
                        f,
                        k,
                        "array must be C-contiguous (use numpy.ascontiguousarray)".into(),
                    ));
                }
                expect *= *d as isize;
            }
        }
    }
    if addr == 0 && count > 0 {
        return Err(type_error(f, k, "array has no data".into()));
    }
    Ok((addr as u64, count as u64 / per.max(1)))
}

fn scalar_arg(f: &HostFunction, k: usize, s: ScalarType, obj: &Bound<'_, PyAny>) -> PyResult<u64> {
    // Fast paths for exact Python bool/int/float; numpy scalars take the general path below.
    if obj.is_exact_instance_of::<PyFloat>() && s.is_float() {
        let v = obj.extract::<f64>()?;
        return host::scalar_slot(s, Scalar::Float(v)).map_err(|m| type_error(f, k, m));
    }
    if obj.is_exact_instance_of::<PyInt>() && s.is_int() {
        let v = match obj.extract::<i64>() {
            Ok(x) => Scalar::Int(x),
            Err(_) => Scalar::UInt(
                obj.extract::<u64>()
                    .map_err(|_| type_error(f, k, format!("{obj} does not fit {s}")))?,
            ),
        };
        return host::scalar_slot(s, v).map_err(|m| type_error(f, k, m));
    }
    let v = if s.is_bool() {
        let name = obj.get_type().name()?;
        // numpy's bool scalar type is `numpy.bool` (numpy 2) or `numpy.bool_`.
        let np_bool = matches!(name.to_cow()?.as_ref(), "bool" | "bool_");
        if obj.cast::<PyBool>().is_err() && !np_bool {
            return Err(type_error(
                f,
                k,
                format!("expected bool, got {}", obj.get_type().name()?),
            ));
        }
        Scalar::Bool(obj.is_truthy()?)
    } else if s.is_int() {
        if obj.cast::<PyBool>().is_ok()
            || obj.cast::<PyFloat>().is_ok()
            || obj.hasattr("__index__").ok() != Some(true)
        {
            return Err(type_error(
                f,
                k,
                format!(
                    "expected an integer for {s}, got {}",
                    obj.get_type().name()?
                ),
            ));
        }
        match obj.extract::<i64>() {
            Ok(x) => Scalar::Int(x),
            Err(_) => Scalar::UInt(
                obj.extract::<u64>()
                    .map_err(|_| type_error(f, k, format!("{obj} does not fit {s}")))?,
            ),
        }
    } else {
        if obj.cast::<PyBool>().is_ok() {
            return Err(type_error(
                f,
                k,
                format!("expected a float for {s}, got bool"),
            ));
        }
        Scalar::Float(obj.extract::<f64>().map_err(|_| {
            type_error(
                f,
                k,
                format!(
                    "expected a float for {s}, got {}",
                    obj.get_type()
                        .name()
                        .map(|n| n.to_string())
                        .unwrap_or_default()
                ),
            )
        })?)
    };
    host::scalar_slot(s, v).map_err(|m| type_error(f, k, m))
}

fn pack_into(
    py: Python<'_>,
    f: &HostFunction,
    written: &[bool],
    args: &Bound<'_, PyTuple>,
    slots: &mut [u64],
    lens: &mut [u64],
) -> PyResult<()> {
    for (k, (obj, t)) in args.iter().zip(&f.params).enumerate() {
        match t {
            Type::Ptr(..) => {
                let w = written.get(k).copied().unwrap_or(true);
                let (a, n) = array_arg(py, f, k, t, &obj, w)?;
                slots[k] = a;
                lens[k] = n;
            }
            Type::Scalar(s) => slots[k] = scalar_arg(f, k, *s, &obj)?,
            other => {
                return Err(type_error(
                    f,
                    k,
                    format!("{other} parameters cannot be passed from Python"),
                ))
            }
        }
    }
    Ok(())
}

fn pack(
    py: Python<'_>,
    f: &HostFunction,
    written: &[bool],
    args: &Bound<'_, PyTuple>,
) -> PyResult<(Vec<u64>, Vec<u64>)> {
    if args.len() != f.params.len() {
        return Err(ArgumentError::new_err(format!(
            "{} takes {} argument(s), got {}",
            f.signature(),
            f.params.len(),
            args.len()
        )));
    }
    let mut slots = vec![0u64; args.len()];
    let mut lens = vec![0u64; args.len()];
    pack_into(py, f, written, args, &mut slots, &mut lens)?;
    Ok((slots, lens))
}

/// Python value(s) of the result slots: None, one scalar, or a tuple.
fn results(py: Python<'_>, f: &HostFunction, rets: &[u64]) -> PyResult<Py<PyAny>> {
    match f.returns.len() {
        0 => Ok(py.None()),
        1 => to_py(py, host::slot_scalar(&f.returns[0], rets[0])),
        _ => {
            let items: Vec<Py<PyAny>> = f
                .returns
                .iter()
                .zip(rets)
                .map(|(t, b)| to_py(py, host::slot_scalar(t, *b)))
                .collect::<PyResult<_>>()?;
            Ok(PyTuple::new(py, items)?.into_any().unbind())
        }
    }
}

fn to_py(py: Python<'_>, v: Scalar) -> PyResult<Py<PyAny>> {
    Ok(match v {
        Scalar::Bool(b) => PyBool::new(py, b).to_owned().into_any().unbind(),
        Scalar::Int(x) => x.into_pyobject(py)?.into_any().unbind(),
        Scalar::UInt(x) => x.into_pyobject(py)?.into_any().unbind(),
        Scalar::Float(x) => x.into_pyobject(py)?.into_any().unbind(),
    })
}

/// A module compiled to native code for this CPU.
#[pyclass(frozen, name = "CpuModule", module = "zyntax")]
pub struct CpuModule {
    m: Arc<HostModule>,
    #[allow(dead_code)] // used by the interpreter fallback
    source: zyntax_hir::Module,
    /// [`written_params`] of each function of `m`, in its order.
    written: Arc<Vec<Vec<bool>>>,
}

/// One compiled host function; calling it runs the native code.
#[pyclass(frozen, name = "CpuFunction", module = "zyntax")]
pub struct CpuFunction {
    m: Arc<HostModule>,
    idx: usize,
    written: Arc<Vec<Vec<bool>>>,
}

impl CpuFunction {
    fn f(&self) -> &HostFunction {
        &self.m.functions[self.idx]
    }

    fn written(&self) -> &[bool] {
        self.written.get(self.idx).map_or(&[], Vec::as_slice)
    }
}

#[pymethods]
impl CpuFunction {
    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        let f = self.f();
        let n = f.params.len();
        // Stack buffers for the common case: a Python call should not allocate.
        const SMALL: usize = 12;
        if n > SMALL || f.returns.len() > SMALL {
            let (slots, lens) = pack(py, f, self.written(), args)?;
            let mut rets = vec![0u64; f.returns.len().max(1)];
            // SAFETY: pack checked every argument against the signature and measured every array.
            guard(|| Ok(unsafe { self.m.call_slots_into(self.idx, &slots, &lens, &mut rets) }))?
                .map_err(|e| host_error(py, e))?;
            return results(py, f, &rets);
        }
        if args.len() != n {
            return Err(ArgumentError::new_err(format!(
                "{} takes {} argument(s), got {}",
                f.signature(),
                n,
                args.len()
            )));
        }
        let (mut slots, mut lens, mut rets) = ([0u64; SMALL], [0u64; SMALL], [0u64; SMALL]);
        pack_into(py, f, self.written(), args, &mut slots[..n], &mut lens[..n])?;
        // SAFETY: pack_into checked every argument against the signature and measured every array.
        guard(|| {
            Ok(unsafe {
                self.m
                    .call_slots_into(self.idx, &slots[..n], &lens[..n], &mut rets)
            })
        })?
        .map_err(|e| host_error(py, e))?;
        results(py, f, &rets)
    }

    #[getter]
    fn name(&self) -> String {
        self.f().name.clone()
    }

    #[getter]
    fn signature(&self) -> String {
        self.f().signature()
    }

    /// Native latency per call from the crate's Rust harness: `n` samples of
    /// `batch` calls each (after a warm-up), timed with the cycle counter;
    /// returns `{"median_ns", "p99_ns", "min_ns", "mean_ns", "n", "batch"}` per call.
    #[pyo3(signature = (*args, n=None, batch=None))]
    fn time<'py>(
        &self,
        py: Python<'py>,
        args: &Bound<'py, PyTuple>,
        n: Option<&Bound<'py, PyAny>>,
        batch: Option<&Bound<'py, PyAny>>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let n = n.map_or(Ok(100_000), |v| checked::arg::<u32>(v, "n"))? as usize;
        let batch = batch.map_or(Ok(16), |v| checked::arg::<u32>(v, "batch"))? as usize;
        if batch == 0 {
            return Err(ArgumentError::new_err(
                "argument 'batch': must be at least 1",
            ));
        }
        let f = self.f();
        let (slots, lens) = pack(py, f, self.written(), args)?;
        let s = guard(|| {
            Ok(host::bench::time_slots(
                &self.m,
                &f.name,
                &slots,
                &lens,
                n.max(1),
                batch,
            ))
        })?
        .map_err(|e| host_error(py, e))?;
        let (med, p99) = host::bench::median_p99(&s);
        let d = PyDict::new(py);
        d.set_item("median_ns", med)?;
        d.set_item("p99_ns", p99)?;
        d.set_item("min_ns", s.first().copied().unwrap_or(0.0))?;
        d.set_item("mean_ns", s.iter().sum::<f64>() / s.len().max(1) as f64)?;
        d.set_item("n", s.len())?;
        d.set_item("batch", batch)?;
        Ok(d)
    }

    /// Address of the native entry (lowered ABI, see docs/cpu.md).
    #[getter]
    fn address(&self) -> usize {
        self.f().address()
    }

    fn __repr__(&self) -> String {
        format!("<CpuFunction {}>", self.f().signature())
    }
}

fn kind_name(k: &HostFnKind) -> &'static str {
    match k {
        HostFnKind::Host => "host",
        HostFnKind::CpuKernel => "cpu_kernel",
        HostFnKind::InterpKernel(_) => "interp_kernel",
        HostFnKind::Device => "device",
    }
}

#[pymethods]
impl CpuModule {
    /// The callable for host function `name`.
    fn __getitem__(&self, name: Text) -> PyResult<CpuFunction> {
        let name = name.0;
        let idx = self
            .m
            .functions
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| {
                let hosts: Vec<String> = self
                    .m
                    .functions
                    .iter()
                    .filter(|f| f.kind == HostFnKind::Host)
                    .map(|f| format!("@{}", f.name))
                    .collect();
                ArgumentError::new_err(format!(
                    "no function @{name} (host functions: {})",
                    if hosts.is_empty() {
                        "none".into()
                    } else {
                        hosts.join(", ")
                    }
                ))
            })?;
        if self.m.functions[idx].kind != HostFnKind::Host {
            return Err(ArgumentError::new_err(format!(
                "@{name} is a {} function; launch kernels with CpuModule.launch",
                kind_name(&self.m.functions[idx].kind)
            )));
        }
        Ok(CpuFunction {
            m: self.m.clone(),
            idx,
            written: self.written.clone(),
        })
    }

    /// Call host function `name` with numpy arrays and scalars.
    #[pyo3(signature = (name, *args))]
    fn call(&self, py: Python<'_>, name: Text, args: &Bound<'_, PyTuple>) -> PyResult<Py<PyAny>> {
        self.__getitem__(name)?.__call__(py, args)
    }

    /// Launch kernel `name` over `grid` blocks of `block` threads. CPU kernels
    /// run blocks in parallel on all cores (`ZYNTAX_CPU_THREADS` workers if
    /// set) and barriers region by region; kernels with warp ops or MMA run on
    /// the reference interpreter. Returns `"cpu"` or `"interp"`.
    #[pyo3(signature = (name, grid, block, *args, shared_bytes=None))]
    fn launch(
        &self,
        py: Python<'_>,
        name: Text,
        grid: &Bound<'_, PyAny>,
        block: &Bound<'_, PyAny>,
        args: &Bound<'_, PyTuple>,
        shared_bytes: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<&'static str> {
        let shared_bytes =
            shared_bytes.map_or(Ok(0), |v| checked::arg::<u32>(v, "shared_bytes"))? as usize;
        let idx = self
            .m
            .functions
            .iter()
            .position(|f| f.name == name.0)
            .ok_or_else(|| ArgumentError::new_err(format!("no function @{}", name.0)))?;
        let f = &self.m.functions[idx];
        let written = self.written.get(idx).map_or(&[][..], Vec::as_slice);
        let (g, b) = (
            checked::dim3(grid, "grid", 1)?,
            checked::dim3(block, "block", 1)?,
        );
        match &f.kind {
            HostFnKind::CpuKernel => {
                let (slots, lens) = pack(py, f, written, args)?;
                let m = self.m.clone();
                let n = f.name.clone();
                // SAFETY: pack checked the arguments; the arrays stay alive (borrowed by `args`) during the launch.
                let r = py.detach(|| {
                    guard(|| Ok(unsafe { m.launch_slots(&n, g, b, &slots, &lens, shared_bytes) }))
                })?;
                r.map_err(|e| host_error(py, e))?;
                Ok("cpu")
            }
            HostFnKind::InterpKernel(why) => {
                self.interp_launch(py, f, written, g, b, args, shared_bytes, why)
            }
            _ => Err(ArgumentError::new_err(format!(
                "{} is not a kernel",
                f.signature()
            ))),
        }
    }

    /// Every function: name, kind (`host`, `cpu_kernel`, `interp_kernel`,
    /// `device`), signature, bounds checks emitted / left unchecked, and for
    /// interpreter kernels the ops that keep them off the CPU.
    #[getter]
    fn functions<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyList>> {
        let out = PyList::empty(py);
        for f in &self.m.functions {
            let d = PyDict::new(py);
            d.set_item("name", &f.name)?;
            d.set_item("kind", kind_name(&f.kind))?;
            d.set_item("signature", f.signature())?;
            d.set_item("checks", f.checks)?;
            d.set_item("unchecked", f.unchecked)?;
            if let HostFnKind::InterpKernel(w) = &f.kind {
                d.set_item("interp_reason", w.clone())?;
            }
            out.append(d)?;
        }
        Ok(out)
    }

    /// The optimizer's report as JSON text (see `report_text` for prose).
    #[getter]
    fn report_json(&self) -> String {
        self.m.report.to_json()
    }

    #[getter]
    fn report_text(&self) -> String {
        self.m.report.to_string()
    }

    /// Optimized LLVM IR.
    #[getter]
    fn llvm_ir(&self) -> String {
        self.m.llvm_ir.clone()
    }

    /// `{"triple", "cpu", "features"}` the code was compiled for.
    #[getter]
    fn target<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let d = PyDict::new(py);
        d.set_item("triple", &self.m.target.triple)?;
        d.set_item("cpu", &self.m.target.cpu)?;
        d.set_item("features", &self.m.target.features)?;
        Ok(d)
    }
}

impl CpuModule {
    #[cfg(feature = "interp")]
    #[allow(clippy::too_many_arguments)]
    fn interp_launch(
        &self,
        py: Python<'_>,
        f: &HostFunction,
        written: &[bool],
        g: [u32; 3],
        b: [u32; 3],
        args: &Bound<'_, PyTuple>,
        shared_bytes: usize,
        _why: &[String],
    ) -> PyResult<&'static str> {
        use zyntax_interp::{Arg, Interpreter};
        let (slots, lens) = pack(py, f, written, args)?;
        // Copy arrays into interpreter buffers and back: the interpreter owns its memory model.
        let mut bufs: Vec<Vec<u8>> = Vec::new();
        let mut iargs = Vec::new();
        let mut ptrs = Vec::new();
        for (k, t) in f.params.iter().enumerate() {
            match t {
                Type::Ptr(..) => {
                    let (es, per) = host::pointee_elem(t).unwrap_or((ScalarType::U8, 1));
                    let bytes = (lens[k] * per * es.size_bytes()) as usize;
                    // SAFETY: array_arg validated this address for `bytes` bytes of the array.
                    let src = unsafe { std::slice::from_raw_parts(slots[k] as *const u8, bytes) };
                    iargs.push(Arg::Buffer(bufs.len()));
                    // Only parameters the kernel may write are copied back (read-only
                    // arrays are accepted for the others).
                    if written.get(k).copied().unwrap_or(true) {
                        ptrs.push((bufs.len(), slots[k], bytes));
                    }
                    bufs.push(src.to_vec());
                }
                Type::Scalar(s) => {
                    let v = host::slot_scalar(t, slots[k]);
                    iargs.push(match v {
                        Scalar::Bool(x) => Arg::Bool(x),
                        Scalar::Int(x) => Arg::Int(x.into()),
                        Scalar::UInt(x) => Arg::Int(x.into()),
                        Scalar::Float(x) => {
                            let _ = s;
                            Arg::Float(x)
                        }
                    });
                }
                _ => return Err(type_error(f, k, "unsupported parameter".into())),
            }
        }
        let interp =
            Interpreter::new(&self.source).map_err(|e| CompileError::new_err(e.to_string()))?;
        interp
            .launch(&f.name, g, b, shared_bytes as u64, &iargs, &mut bufs)
            .map_err(|e| TrapError::new_err(format!("interpreter: {e}")))?;
        for (i, addr, bytes) in ptrs {
            // SAFETY: as above; the buffer has the same length.
            unsafe { std::ptr::copy_nonoverlapping(bufs[i].as_ptr(), addr as *mut u8, bytes) };
        }
        Ok("interp")
    }

    #[cfg(not(feature = "interp"))]
    #[allow(clippy::too_many_arguments)]
    fn interp_launch(
        &self,
        _py: Python<'_>,
        f: &HostFunction,
        _written: &[bool],
        _g: [u32; 3],
        _b: [u32; 3],
        _args: &Bound<'_, PyTuple>,
        _s: usize,
        why: &[String],
    ) -> PyResult<&'static str> {
        Err(CompileError::new_err(format!(
            "@{} uses {} and cannot run on the CPU backend; this build has no interpreter",
            f.name,
            why.join(", ")
        )))
    }
}

/// Compile a module's host functions and kernels to native
/// code for this CPU. `cpu`/`features` override the detected host CPU;
/// `opt_level` replaces every function's level.
#[pyfunction]
#[pyo3(signature = (module, *, cpu=None, features=None, opt_level=None, interp_kernels=None))]
pub fn cpu_compile(
    py: Python<'_>,
    module: &Bound<'_, PyAny>,
    cpu: Option<Text>,
    features: Option<Text>,
    opt_level: Option<Text>,
    interp_kernels: Option<TextList>,
) -> PyResult<CpuModule> {
    let m = crate::hir::module_arg(module)?;
    let (cpu, features) = (cpu.map(|t| t.0), features.map(|t| t.0));
    let opt_level = match opt_level {
        Some(l) => Some(crate::types::enum_name(
            "opt level",
            &l.0,
            OptLevel::ALL,
            OptLevel::from_name,
            OptLevel::name,
        )?),
        None => None,
    };
    let opts = HostOptions {
        cpu,
        features,
        opt_level,
        force_interp: interp_kernels.unwrap_or_default().0,
        ..HostOptions::default()
    };
    let r = py.detach(|| guard(|| Ok(host::jit(&m, &opts))))?;
    let hm = r.map_err(|e| host_error(py, e))?;
    let written = hm
        .functions
        .iter()
        .map(|f| {
            // A function missing from the source (never expected) counts as written.
            m.function(&f.name)
                .map_or_else(|| vec![true; f.params.len()], written_params)
        })
        .collect();
    Ok(CpuModule {
        m: Arc::new(hm),
        source: m,
        written: Arc::new(written),
    })
}

/// The host CPU as LLVM detects it: `{"triple", "cpu", "features"}`.
#[pyfunction]
pub fn cpu_target(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let t = host::CpuTarget::detect();
    let d = PyDict::new(py);
    d.set_item("triple", t.triple)?;
    d.set_item("cpu", t.cpu)?;
    d.set_item("features", t.features)?;
    Ok(d)
}

/// Ahead-of-time compilation for the CPU: `kind` is `"obj"`, `"so"`, `"asm"`
/// or `"llvm"`; returns `(bytes, report_text, symbols)`. Exported functions use
/// the ABI in docs/cpu.md (parameters, one length per array, an error record).
#[pyfunction]
#[pyo3(
    signature = (module, kind=Text("obj".into()), *, cpu=None, features=None, opt_level=None),
    text_signature = "(module, kind='obj', *, cpu=None, features=None, opt_level=None)"
)]
pub fn cpu_emit<'py>(
    py: Python<'py>,
    module: &Bound<'py, PyAny>,
    kind: Text,
    cpu: Option<Text>,
    features: Option<Text>,
    opt_level: Option<Text>,
) -> PyResult<(Bound<'py, pyo3::types::PyBytes>, String, Vec<String>)> {
    let m = crate::hir::module_arg(module)?;
    let (cpu, features) = (cpu.map(|t| t.0), features.map(|t| t.0));
    let what = match kind.0.as_str() {
        "obj" => host::Emit::Object,
        "so" => host::Emit::SharedLib,
        "asm" => host::Emit::Asm,
        "llvm" => host::Emit::LlvmIr,
        other => {
            return Err(ArgumentError::new_err(format!(
            "argument 'kind': unknown output kind '{other}' (expected one of: obj, so, asm, llvm)"
        )))
        }
    };
    let opt_level = match opt_level {
        Some(l) => Some(crate::types::enum_name(
            "opt level",
            &l.0,
            OptLevel::ALL,
            OptLevel::from_name,
            OptLevel::name,
        )?),
        None => None,
    };
    let opts = HostOptions {
        cpu,
        features,
        opt_level,
        force_interp: Vec::new(),
        ..HostOptions::default()
    };
    let r = py.detach(|| guard(|| Ok(host::emit(&m, &opts, what))))?;
    let art = r.map_err(|e| host_error(py, e))?;
    Ok((
        pyo3::types::PyBytes::new(py, &art.bytes),
        art.report.to_string(),
        art.symbols,
    ))
}
