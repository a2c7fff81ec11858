//! Reading a launch's arguments in one native call (issue 25): a `@zyntax.kernel`
//! specialisation takes each array as (pointer, extents, strides in elements);
//! an [`ArgPlan`] describes what one call signature looks like (per argument: a
//! DeviceArray or a tensor of a given dtype, rank, contiguity and device, or a
//! scalar of a given kind) and reads a call's arguments against it. A call that
//! does not match is a *miss* (`None` / `False`), never an error and never a
//! launch: the caller's slow path then dispatches, validates and explains.
//!
//! Tensors are read through their methods (`data_ptr()`, `shape`, `stride()`,
//! `dtype`, `get_device()`: PyTorch's, or a stand-in class's with the same
//! names), never through `__cuda_array_interface__` dicts; an exact
//! `torch.Tensor` through libtorch's C functions where `_plans` turned them
//! on (`torch_c.rs`: all but `dtype`). Nothing is keyed by
//! an address: every call reads the pointer afresh, so a freed tensor whose
//! address another tensor reuses is just another call.
//!
//! [`ArgLauncher`] joins a plan to a prepared launch (`Kernel.prepare`): one
//! native call reads the arguments, picks the stream (the launcher's, else
//! PyTorch's current stream for calls with tensors, read through a raw-stream
//! function given once) and launches.

use super::kernels::{convert_arg, keep_captured, launch_slots, CudaLauncher};
use super::{DeviceArray, Dtype, OrPy};
use crate::errors::{guard, ArgumentError, LaunchError as PyLaunchError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyFloat, PyInt, PyList, PyTuple, PyType};
use zyntax_cuda as zc;
use zyntax_hir::ScalarType;

/// What one argument of a call signature must be.
enum Slot {
    /// A `DeviceArray` of this typestr and rank; `contiguous`: its last
    /// stride is one element (or its last extent 1), as the key says.
    DeviceArray {
        typestr: String,
        ndim: usize,
        contiguous: bool,
    },
    /// An instance of `ty` (torch.Tensor) whose `dtype` is the object
    /// `dtype` (PyTorch's dtypes are singletons), on CUDA device `device`.
    Tensor {
        ty: Py<PyType>,
        dtype: Py<PyAny>,
        /// `dtype`'s ScalarType code as libtorch's C functions read it
        /// (-1 until a tensor of `dtype` was read that way): one
        /// comparison instead of fetching the `dtype` attribute.
        code: std::sync::atomic::AtomicI32,
        ndim: usize,
        contiguous: bool,
        device: i64,
        elem: Option<ScalarType>,
    },
    /// A Python `int` in the i32 range, or outside it (an i64 parameter).
    Int32,
    Int64,
    Float,
    Bool,
    /// An object of exactly this type (a numpy scalar), converted as the
    /// slow path converts it.
    Exact(Py<PyType>),
}

/// One flattened kernel argument.
enum Flat {
    Ptr {
        ptr: u64,
        device: u32,
        elem: Option<ScalarType>,
    },
    Int(i64),
    Float(f64),
    Bool(bool),
    /// The call's argument `i` itself (a DeviceArray or a numpy scalar).
    Arg(usize),
}

/// The arguments of one call signature (see the module documentation).
#[pyclass(frozen, name = "ArgPlan", module = "zyntax.cuda")]
pub struct ArgPlan {
    slots: Vec<Slot>,
    /// Kernel parameters the arguments flatten to.
    flat_len: usize,
    /// Whether some argument is a tensor (the launch then goes to PyTorch's
    /// current stream unless the launcher has its own).
    tensors: bool,
}

fn bad(msg: impl Into<String>) -> PyErr {
    ArgumentError::new_err(format!("ArgPlan: {}", msg.into()))
}

fn slot_of(e: &Bound<'_, PyAny>) -> PyResult<Slot> {
    let t = e
        .cast::<PyTuple>()
        .map_err(|_| bad("each slot is a tuple"))?;
    let kind: String = t
        .get_item(0)
        .and_then(|k| k.extract())
        .map_err(|_| bad("a slot starts with its kind (a str)"))?;
    let want = |n: usize| -> PyResult<()> {
        if t.len() != n {
            return Err(bad(format!(
                "slot '{kind}' has {n} fields, got {}",
                t.len()
            )));
        }
        Ok(())
    };
    let field = |i: usize, what: &str| -> PyResult<Bound<'_, PyAny>> {
        t.get_item(i)
            .map_err(|_| bad(format!("slot '{kind}': missing {what}")))
    };
    let ndim = |i: usize| -> PyResult<usize> {
        let n: usize = field(i, "ndim")?
            .extract()
            .map_err(|_| bad(format!("slot '{kind}': ndim must be 1 to 3")))?;
        if !(1..=3).contains(&n) {
            return Err(bad(format!("slot '{kind}': ndim must be 1 to 3, got {n}")));
        }
        Ok(n)
    };
    let flag = |i: usize| -> PyResult<bool> {
        field(i, "contiguous")?
            .cast::<PyBool>()
            .map(|b| b.is_true())
            .map_err(|_| bad(format!("slot '{kind}': contiguous must be a bool")))
    };
    let ty = |i: usize| -> PyResult<Py<PyType>> {
        Ok(field(i, "type")?
            .cast::<PyType>()
            .map_err(|_| bad(format!("slot '{kind}': expected a type")))?
            .clone()
            .unbind())
    };
    Ok(match kind.as_str() {
        "array" => {
            want(4)?;
            Slot::DeviceArray {
                typestr: field(1, "typestr")?
                    .extract()
                    .map_err(|_| bad("slot 'array': typestr must be a str"))?,
                ndim: ndim(2)?,
                contiguous: flag(3)?,
            }
        }
        "tensor" => {
            want(7)?;
            let typestr: Option<String> = field(6, "typestr")?
                .extract()
                .map_err(|_| bad("slot 'tensor': typestr must be a str or None"))?;
            Slot::Tensor {
                ty: ty(1)?,
                dtype: field(2, "dtype")?.unbind(),
                code: std::sync::atomic::AtomicI32::new(-1),
                ndim: ndim(3)?,
                contiguous: flag(4)?,
                device: field(5, "device")?
                    .extract()
                    .map_err(|_| bad("slot 'tensor': device must be an int"))?,
                elem: typestr
                    .and_then(|s| Dtype::parse(&s).ok())
                    .and_then(|d| d.elem),
            }
        }
        "i32" | "i64" | "f32" | "bool" => {
            want(1)?;
            match kind.as_str() {
                "i32" => Slot::Int32,
                "i64" => Slot::Int64,
                "f32" => Slot::Float,
                _ => Slot::Bool,
            }
        }
        "exact" => {
            want(2)?;
            Slot::Exact(ty(1)?)
        }
        other => return Err(bad(format!("unknown slot kind '{other}'"))),
    })
}

/// Whether the last axis is contiguous (stride one element, or extent 1).
#[inline]
fn last_contiguous(shape_last: i64, stride_last: i64) -> bool {
    stride_last == 1 || shape_last == 1
}

impl ArgPlan {
    /// Reads `args` against the plan into `out`; `false` on a miss (then
    /// `out` is to be ignored). Errors only for a Python exception raised by
    /// a tensor's own methods.
    fn read_into(&self, args: &Bound<'_, PyTuple>, out: &mut Vec<Flat>) -> PyResult<bool> {
        if args.len() != self.slots.len() {
            return Ok(false);
        }
        let py = args.py();
        for (i, (slot, a)) in self.slots.iter().zip(args.iter()).enumerate() {
            match slot {
                Slot::DeviceArray {
                    typestr,
                    ndim,
                    contiguous,
                } => {
                    let Ok(d) = a.cast_exact::<DeviceArray>() else {
                        return Ok(false);
                    };
                    let d = d.get();
                    if d.shape.len() != *ndim || d.dtype.typestr != *typestr {
                        return Ok(false);
                    }
                    let item = d.dtype.itemsize as isize;
                    let last = ndim - 1;
                    let stride = |k: usize| -> i64 {
                        match &d.strides {
                            Some(s) => (s[k] / item) as i64,
                            None => d.shape[k + 1..]
                                .iter()
                                .map(|&x| x.max(1))
                                .product::<usize>() as i64,
                        }
                    };
                    if last_contiguous(d.shape[last] as i64, stride(last)) != *contiguous {
                        return Ok(false);
                    }
                    out.push(Flat::Arg(i));
                    out.extend(d.shape.iter().map(|&x| Flat::Int(x as i64)));
                    out.extend((0..*ndim).map(|k| Flat::Int(stride(k))));
                }
                Slot::Tensor {
                    ty,
                    dtype,
                    code,
                    ndim,
                    contiguous,
                    device,
                    elem,
                } => {
                    use std::sync::atomic::Ordering::Relaxed;
                    let exact = a.get_type().is(ty.bind(py));
                    if !exact && !a.is_instance(ty.bind(py))? {
                        return Ok(false);
                    }
                    if let Some(tc) = super::torch_c::enabled().filter(|_| exact) {
                        // Dtype, device, shape, strides and address in C
                        // (torch_c.rs: ~0.1 µs against ~0.45 through four
                        // method calls).
                        let Some(m) = tc.read(&a) else {
                            return Ok(false);
                        };
                        // A code not seen with this dtype yet: the dtype
                        // object decides (PyTorch's dtypes and codes are
                        // one to one, so a code once matched stays valid).
                        if m.dtype != code.load(Relaxed) {
                            if !a.getattr(intern!(py, "dtype"))?.is(dtype.bind(py)) {
                                return Ok(false);
                            }
                            code.store(m.dtype, Relaxed);
                        }
                        if m.device_type != super::torch_c::CUDA
                            || i64::from(m.device) != *device
                            || m.shape.len() != *ndim
                            || *ndim == 0
                            || last_contiguous(m.shape[ndim - 1], m.strides[ndim - 1])
                                != *contiguous
                        {
                            return Ok(false);
                        }
                        out.push(Flat::Ptr {
                            ptr: m.ptr,
                            device: m.device as u32,
                            elem: *elem,
                        });
                        out.extend(m.shape.iter().map(|&x| Flat::Int(x)));
                        out.extend(m.strides.iter().map(|&x| Flat::Int(x)));
                        continue;
                    }
                    if !a.getattr(intern!(py, "dtype"))?.is(dtype.bind(py)) {
                        return Ok(false);
                    }
                    let dev: i64 = a.call_method0(intern!(py, "get_device"))?.extract()?;
                    if dev != *device || dev < 0 {
                        return Ok(false);
                    }
                    let shape = a.getattr(intern!(py, "shape"))?;
                    let strides = a.call_method0(intern!(py, "stride"))?;
                    let (Ok(shape), Ok(strides)) =
                        (shape.cast::<PyTuple>(), strides.cast::<PyTuple>())
                    else {
                        return Ok(false);
                    };
                    if shape.len() != *ndim || strides.len() != *ndim {
                        return Ok(false);
                    }
                    let mut ext = [0i64; 3];
                    let mut st = [0i64; 3];
                    for (k, (e, s)) in ext.iter_mut().zip(st.iter_mut()).take(*ndim).enumerate() {
                        *e = shape.get_item(k)?.extract()?;
                        *s = strides.get_item(k)?.extract()?;
                    }
                    if last_contiguous(ext[ndim - 1], st[ndim - 1]) != *contiguous {
                        return Ok(false);
                    }
                    let ptr: u64 = a.call_method0(intern!(py, "data_ptr"))?.extract()?;
                    out.push(Flat::Ptr {
                        ptr,
                        device: dev as u32,
                        elem: *elem,
                    });
                    out.extend(ext[..*ndim].iter().map(|&x| Flat::Int(x)));
                    out.extend(st[..*ndim].iter().map(|&x| Flat::Int(x)));
                }
                Slot::Int32 | Slot::Int64 => {
                    if !a.is_exact_instance_of::<PyInt>() {
                        return Ok(false);
                    }
                    let Ok(v) = a.extract::<i64>() else {
                        return Ok(false);
                    };
                    let small = i32::try_from(v).is_ok();
                    if small != matches!(slot, Slot::Int32) {
                        return Ok(false);
                    }
                    out.push(Flat::Int(v));
                }
                Slot::Float => {
                    let Ok(f) = a.cast_exact::<PyFloat>() else {
                        return Ok(false);
                    };
                    out.push(Flat::Float(f.value()));
                }
                Slot::Bool => {
                    let Ok(b) = a.cast_exact::<PyBool>() else {
                        return Ok(false);
                    };
                    out.push(Flat::Bool(b.is_true()));
                }
                Slot::Exact(t) => {
                    if !a.get_type().is(t.bind(py)) {
                        return Ok(false);
                    }
                    out.push(Flat::Arg(i));
                }
            }
        }
        Ok(true)
    }
}

#[pymethods]
impl ArgPlan {
    /// `slots`: one tuple per argument: `("array", typestr, ndim, contiguous)`
    /// (a DeviceArray), `("tensor", type, dtype, ndim, contiguous, device,
    /// typestr | None)`, `("i32",)`, `("i64",)`, `("f32",)`, `("bool",)`,
    /// `("exact", type)`.
    #[new]
    fn new(slots: &Bound<'_, PyAny>) -> PyResult<ArgPlan> {
        guard(|| {
            let list = slots
                .cast::<PyList>()
                .map_err(|_| bad("slots must be a list of tuples"))?;
            let slots: Vec<Slot> = list.iter().map(|e| slot_of(&e)).collect::<PyResult<_>>()?;
            let flat_len = slots
                .iter()
                .map(|s| match s {
                    Slot::DeviceArray { ndim, .. } | Slot::Tensor { ndim, .. } => 1 + 2 * ndim,
                    _ => 1,
                })
                .sum();
            let tensors = slots.iter().any(|s| matches!(s, Slot::Tensor { .. }));
            Ok(ArgPlan {
                slots,
                flat_len,
                tensors,
            })
        })
    }

    /// The kernel parameters `args` flatten to (tensors as their address, an
    /// int; DeviceArrays and numpy scalars as themselves), or None when
    /// `args` do not match the plan.
    fn read<'py>(&self, args: &Bound<'py, PyTuple>) -> PyResult<Option<Bound<'py, PyList>>> {
        guard(|| {
            let py = args.py();
            let mut flat = Vec::with_capacity(self.flat_len);
            if !self.read_into(args, &mut flat)? {
                return Ok(None);
            }
            let items: Vec<Bound<'py, PyAny>> = flat
                .iter()
                .map(|f| -> PyResult<Bound<'py, PyAny>> {
                    Ok(match f {
                        Flat::Ptr { ptr, .. } => ptr.into_pyobject(py)?.into_any(),
                        Flat::Int(v) => v.into_pyobject(py)?.into_any(),
                        Flat::Float(v) => v.into_pyobject(py)?.into_any(),
                        Flat::Bool(v) => PyBool::new(py, *v).to_owned().into_any(),
                        Flat::Arg(i) => args.get_item(*i)?,
                    })
                })
                .collect::<PyResult<_>>()?;
            Ok(Some(PyList::new(py, items)?))
        })
    }

    /// Kernel parameters a matching call flattens to.
    #[getter]
    fn flat_len(&self) -> usize {
        self.flat_len
    }
}

/// A prepared launch joined to an [`ArgPlan`]: `launcher(args)` reads
/// `args` (a tuple) and launches, returning True, or returns False on a miss
/// without launching.
#[pyclass(frozen, name = "ArgLauncher", module = "zyntax.cuda")]
pub struct ArgLauncher {
    launcher: Py<CudaLauncher>,
    plan: Py<ArgPlan>,
    /// `torch._C._cuda_getCurrentRawStream` (or any callable device -> raw
    /// stream handle): the stream of calls with tensors when the launcher
    /// has none of its own.
    stream_fn: Option<Py<PyAny>>,
}

#[pymethods]
impl ArgLauncher {
    #[new]
    #[pyo3(signature = (launcher, plan, stream_fn=None))]
    fn new(
        launcher: &Bound<'_, PyAny>,
        plan: &Bound<'_, PyAny>,
        stream_fn: Option<Bound<'_, PyAny>>,
    ) -> PyResult<ArgLauncher> {
        let launcher = launcher.cast::<CudaLauncher>().map_err(|_| {
            ArgumentError::new_err("argument 'launcher': expected a zyntax.cuda.Launcher")
        })?;
        let plan = plan.cast::<ArgPlan>().map_err(|_| {
            ArgumentError::new_err("argument 'plan': expected a zyntax.cuda.ArgPlan")
        })?;
        let want = launcher.get().kernel.get().inner.params().len();
        let have = plan.get().flat_len;
        if want != have {
            return Err(ArgumentError::new_err(format!(
                "argument 'plan': its arguments flatten to {have} parameter(s), the kernel has {want}"
            )));
        }
        if let Some(f) = &stream_fn {
            if !f.is_callable() {
                return Err(ArgumentError::new_err(
                    "argument 'stream_fn': expected a callable",
                ));
            }
        }
        Ok(ArgLauncher {
            launcher: launcher.clone().unbind(),
            plan: plan.clone().unbind(),
            stream_fn: stream_fn.map(Bound::unbind),
        })
    }

    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        guard(|| self.launch(py, args))
    }
}

impl ArgLauncher {
    fn launch(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        {
            let plan = self.plan.get();
            let mut flat = Vec::with_capacity(plan.flat_len);
            if !plan.read_into(args, &mut flat)? {
                return Ok(false);
            }
            let l = self.launcher.get();
            let k = &l.kernel.get().inner;
            let own = l._stream.as_ref().map(|s| &s.get().inner);
            let mut stream = l.stream_raw as zc::CUstream;
            if own.is_none() && plan.tensors {
                if let Some(f) = &self.stream_fn {
                    let dev = k.device().ordinal();
                    // libtorch's C function where it is on (torch_c.rs), else `f`.
                    let h = match super::torch_c::current_stream(dev as i64) {
                        Some(h) => h as usize,
                        None => f.bind(py).call1((dev,))?.extract()?,
                    };
                    stream = h as zc::CUstream;
                }
            }
            let mut keep = Vec::new();
            let r = launch_slots(k, &l.cfg, &l.opts, stream, |slots| {
                for (i, f) in flat.iter().enumerate() {
                    let enc = |arg: zc::KernelArg<'_>, slots: &mut [u64]| {
                        k.encode_arg(i, arg, slots)
                            .map_err(|e| PyLaunchError::new_err(e.to_string()))
                    };
                    match f {
                        Flat::Ptr { ptr, device, elem } => enc(
                            zc::KernelArg::Ptr {
                                ptr: *ptr,
                                device: Some(*device),
                                elem: *elem,
                            },
                            slots,
                        )?,
                        Flat::Int(v) => enc(zc::KernelArg::Int(i128::from(*v)), slots)?,
                        Flat::Float(v) => enc(zc::KernelArg::Float(*v), slots)?,
                        Flat::Bool(v) => enc(zc::KernelArg::Bool(*v), slots)?,
                        Flat::Arg(j) => {
                            let a = args.get_item(*j)?;
                            let arg = convert_arg(py, k, i, &k.params()[i], &a, &mut keep)?;
                            enc(arg, slots)?
                        }
                    }
                }
                Ok(())
            })?;
            if let Some(s) = own.filter(|s| r.is_ok() && s.capture_active()) {
                keep_captured(s, args.iter(), keep);
            }
            r.py(py)?;
            Ok(true)
        }
    }
}

/// The launcher of one `@zyntax.kernel` configuration (`k[grid, block]`) as
/// one native call: `d(*args)` tries its guards, the last one that matched
/// first (an [`ArgLauncher`] natively, any other callable `g(args) -> bool`
/// through Python), and calls `slow(args)` when none matches (the full
/// dispatch, which may `add` a guard for the arguments' signature). Saves
/// the Python frame a launcher closure costs on every launch.
#[pyclass(frozen, name = "ArgDispatch", module = "zyntax.cuda")]
pub struct ArgDispatch {
    guards: std::sync::Mutex<Vec<Py<PyAny>>>,
    slow: Py<PyAny>,
}

impl ArgDispatch {
    fn guard_at(&self, py: Python<'_>, i: usize) -> Option<Py<PyAny>> {
        let g = self.guards.lock().unwrap_or_else(|e| e.into_inner());
        g.get(i).map(|x| x.clone_ref(py))
    }

    fn try_guard(py: Python<'_>, g: &Py<PyAny>, args: &Bound<'_, PyTuple>) -> PyResult<bool> {
        let g = g.bind(py);
        if let Ok(l) = g.cast::<ArgLauncher>() {
            return l.get().launch(py, args);
        }
        g.call1((args,))?.is_truthy()
    }
}

#[pymethods]
impl ArgDispatch {
    #[new]
    fn new(slow: Bound<'_, PyAny>) -> PyResult<ArgDispatch> {
        if !slow.is_callable() {
            return Err(ArgumentError::new_err(
                "argument 'slow': expected a callable",
            ));
        }
        Ok(ArgDispatch {
            guards: std::sync::Mutex::new(Vec::new()),
            slow: slow.unbind(),
        })
    }

    #[pyo3(signature = (*args))]
    fn __call__(&self, py: Python<'_>, args: &Bound<'_, PyTuple>) -> PyResult<()> {
        guard(|| {
            let mut i = 0;
            while let Some(g) = self.guard_at(py, i) {
                if Self::try_guard(py, &g, args)? {
                    if i > 0 {
                        self.add(py, g.bind(py).clone());
                    }
                    return Ok(());
                }
                i += 1;
            }
            self.slow.bind(py).call1((args,))?;
            Ok(())
        })
    }

    /// Makes `g` the first guard tried (adding it when it is new).
    fn add(&self, py: Python<'_>, g: Bound<'_, PyAny>) {
        let mut gs = self.guards.lock().unwrap_or_else(|e| e.into_inner());
        gs.retain(|x| !x.bind(py).is(&g));
        gs.insert(0, g.unbind());
    }

    /// The guards, the first tried first.
    #[getter]
    fn guards(&self, py: Python<'_>) -> Vec<Py<PyAny>> {
        let gs = self.guards.lock().unwrap_or_else(|e| e.into_inner());
        gs.iter().map(|x| x.clone_ref(py)).collect()
    }
}

/// Launchers kept per cacheable configuration (see [`KernelLaunchers`]).
const LAUNCHERS: usize = 64;

/// The base of `zyntax.frontend.kernel.Kernel`: `k[grid, block]` answered
/// natively (the `mp_subscript` slot: no Python frame) from the launchers
/// made before, per configuration. A configuration is cacheable when it is a
/// tuple of 2 to 4 exact ints or tuples of exact ints (so `1.0`, `True` or a
/// stream object never find the launcher of `1`: they take the full path,
/// which checks them); any other, and a first use, calls the subclass's
/// `_launcher_for(config)` and keeps a cacheable configuration's result.
#[pyclass(frozen, subclass, name = "KernelLaunchers", module = "zyntax.cuda")]
pub struct KernelLaunchers {
    map: std::sync::Mutex<std::collections::HashMap<Vec<i64>, Py<PyAny>>>,
}

/// The key of a cacheable configuration (see [`KernelLaunchers`]), or None.
fn config_key(config: &Bound<'_, PyAny>) -> Option<Vec<i64>> {
    let t = config.cast_exact::<PyTuple>().ok()?;
    if !(2..=4).contains(&t.len()) {
        return None;
    }
    let mut key = Vec::with_capacity(8);
    for x in t.iter() {
        if x.is_exact_instance_of::<PyInt>() {
            key.extend([0, x.extract::<i64>().ok()?]);
        } else {
            let inner = x.cast_exact::<PyTuple>().ok()?;
            key.extend([1, inner.len() as i64]);
            for y in inner.iter() {
                if !y.is_exact_instance_of::<PyInt>() {
                    return None;
                }
                key.push(y.extract::<i64>().ok()?);
            }
        }
    }
    Some(key)
}

#[pymethods]
impl KernelLaunchers {
    /// Takes (and ignores) the subclass's constructor arguments.
    #[new]
    #[pyo3(signature = (*_args, **_kwargs))]
    fn new(_args: &Bound<'_, PyTuple>, _kwargs: Option<&Bound<'_, pyo3::types::PyDict>>) -> Self {
        KernelLaunchers {
            map: std::sync::Mutex::new(std::collections::HashMap::new()),
        }
    }

    fn __getitem__(slf: &Bound<'_, Self>, config: &Bound<'_, PyAny>) -> PyResult<Py<PyAny>> {
        let py = slf.py();
        let key = config_key(config);
        if let Some(k) = &key {
            let map = slf.get().map.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(l) = map.get(k) {
                return Ok(l.clone_ref(py));
            }
        }
        let launcher = slf.call_method1(intern!(py, "_launcher_for"), (config,))?;
        if let Some(k) = key {
            let mut map = slf.get().map.lock().unwrap_or_else(|e| e.into_inner());
            // Dropped after the lock is released (a finaliser may call back).
            let old = if map.len() >= LAUNCHERS {
                std::mem::take(&mut *map)
            } else {
                Default::default()
            };
            map.insert(k, launcher.clone().unbind());
            drop(map);
            drop(old);
        }
        Ok(launcher.unbind())
    }

    /// The launchers kept, by configuration (tests and diagnostics).
    #[getter]
    fn cached_launchers(&self) -> usize {
        self.map.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
