//! Call plans of the `zyntax.kernels` functions replayed in one native call
//! (issue 25; `python/zyntax/kernels/_plans.py` records them).
//!
//! A [`CallPlans`] belongs to one entry function (`softmax`, `layer_norm`,
//! ...). `plans.lookup(args, kwargs)` computes the call's key here, from the
//! arguments themselves, and on a hit replays the plan: it allocates the
//! outputs, re-checks a given `out` for overlap on this call's addresses and
//! launches the recorded kernels with this call's addresses, returning what
//! the function would return. On a miss it returns the `miss` object given
//! at construction and the Python side runs the function as written,
//! recording it; `plans.key(args, kwargs)` then gives the [`CallKey`] under
//! which `plans.insert` stores the recording's plan.
//!
//! The key (the same as the Python recording's, `_plans.call_key`): the
//! number of positional arguments, the keyword names in call order, and per
//! value: a torch tensor (exactly the type given, `torch.Tensor`) by dtype
//! (identity: PyTorch's dtypes are singletons), shape, strides, device and
//! the address's 16-byte alignment; a `DeviceArray` by typestr, shape,
//! strides, device and alignment; `None`, bools, ints, floats (bit
//! pattern), strings and tuples of them by value; a `zyntax.cuda.Stream` by
//! identity (the stored key keeps it alive); and, when a torch tensor is
//! among the values, PyTorch's current stream on its device (a raw handle
//! from `stream_fn`). Addresses are never part of the key: each call reads
//! them afresh, so a freed tensor's address reused by another tensor is
//! just another call. A value of any other kind (a CPU tensor, a numpy
//! array, another library's tensor) gives no key: the full path, every call.
//!
//! Tensors are read through their methods with interned names (`dtype`,
//! `get_device()`, `data_ptr()`, `shape`, `stride()`); the stand-in classes
//! of the CPU tests have the same names.

use super::kernels::{convert_arg, keep_captured, launch_slots, CudaLauncher};
use super::{CudaStream, DeviceArray, OrPy};
use crate::errors::{guard, ArgumentError, LaunchError as PyLaunchError};
use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyString, PyTuple, PyType};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::sync::{Arc, Mutex, OnceLock};
use zyntax_cuda as zc;

/// Plans kept per function (the map is cleared when it is full, as the
/// Python cache was).
const CAPACITY: usize = 256;

/// The multiply-rotate hash of rustc's `FxHasher`: a key is a few hundred
/// bytes of shapes and strides hashed on every call, where SipHash's
/// resistance to chosen collisions buys nothing (the keys are the
/// program's own calls) and costs a good part of a microsecond.
#[derive(Default)]
struct FxHasher(u64);

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut w = [0u8; 8];
            w[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(w));
        }
    }
    fn write_u64(&mut self, v: u64) {
        self.0 = (self.0.rotate_left(5) ^ v).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
    fn write_u8(&mut self, v: u8) {
        self.write_u64(u64::from(v));
    }
    fn write_u32(&mut self, v: u32) {
        self.write_u64(u64::from(v));
    }
    fn write_i64(&mut self, v: i64) {
        self.write_u64(v as u64);
    }
    fn write_usize(&mut self, v: usize) {
        self.write_u64(v as u64);
    }
    fn finish(&self) -> u64 {
        self.0
    }
}

type PlanMap = HashMap<Key, Arc<Plan>, BuildHasherDefault<FxHasher>>;

/// One part of a call's key (see the module documentation).
#[derive(Hash, PartialEq, Eq)]
enum Item {
    Args(usize),
    Name(String),
    Tensor {
        dtype: usize,
        device: i64,
        shape: Vec<i64>,
        strides: Vec<i64>,
        align: u8,
    },
    Array {
        typestr: String,
        device: u32,
        shape: Vec<usize>,
        strides: Option<Vec<isize>>,
        align: u8,
    },
    None,
    Bool(bool),
    Int(i64),
    Float(u64),
    Str(String),
    /// A `zyntax.cuda.Stream` by identity.
    Stream(usize),
    Tuple(Vec<Item>),
    TorchStream(u64),
    /// A torch tensor read through libtorch's C functions (`torch_c`):
    /// its dtype by PyTorch's ScalarType code.
    TensorC {
        dtype: i32,
        device: i32,
        shape: Vec<i64>,
        strides: Vec<i64>,
        align: u8,
    },
}

/// A call's key; `keep` holds the objects compared by identity (dtypes,
/// streams) so that no other object takes their address while the key lives.
struct Key {
    items: Vec<Item>,
    keep: Vec<Py<PyAny>>,
}

impl Hash for Key {
    fn hash<H: Hasher>(&self, state: &mut H) {
        self.items.hash(state);
    }
}
impl PartialEq for Key {
    fn eq(&self, other: &Key) -> bool {
        self.items == other.items
    }
}
impl Eq for Key {}

/// How a plan makes one new output, from the call's object at index `like`.
enum Alloc {
    /// `like.new_empty(shape)` (with `dtype=` when given), then its `data_ptr()`.
    Torch {
        like: usize,
        shape: Py<PyTuple>,
        kwargs: Option<Py<PyDict>>,
    },
    /// `f(like)` (`torch.empty_like` of a C-contiguous tensor: ~0.8 µs
    /// cheaper than `new_empty`), then its `data_ptr()`.
    Like { like: usize, f: Py<PyAny> },
    /// `f(like)` returns `(output, address)`.
    Call { like: usize, f: Py<PyAny> },
    /// `f(*args, **kwargs)`, prepared once (`torch.empty(shape, dtype=,
    /// device=)`: no tensor to read the device and dtype from), then its
    /// `data_ptr()`.
    Args {
        f: Py<PyAny>,
        args: Py<PyTuple>,
        kwargs: Option<Py<PyDict>>,
    },
    /// `at::empty_strided` through libtorch's C functions (`torch_c`): the
    /// recorded output's shape, strides, dtype code and CUDA device.
    Aten {
        shape: Vec<i64>,
        strides: Vec<i64>,
        dtype: i32,
        device: i32,
    },
}

/// A launch parameter that is the same on every call, converted once.
enum Const {
    Int(i128),
    Float(f64),
    Bool(bool),
    /// Converted on each call as the launcher would (rare kinds).
    Obj(Py<PyAny>),
}

enum Param {
    Const(Const, Py<PyAny>),
    /// The address of value (or new output) `j`.
    Addr(usize),
    /// `f(address of j)`: the tensor map of that memory (cached by `f`, and
    /// by address in [`MapCache`]: a map is a pure function of the address
    /// and the plan's geometry).
    Map(usize, Py<PyAny>, MapCache),
}

/// The last tensor maps of one `Param::Map`, by address (a replay whose
/// address was seen recently skips the Python call of `f`; rotating over a
/// few input sets, or an output the caching allocator hands back, hits).
#[derive(Default)]
struct MapCache(std::sync::Mutex<Vec<(u64, Py<PyAny>)>>);

/// Maps kept per `Param::Map`.
const MAP_CACHE: usize = 8;

impl MapCache {
    fn get<'py>(&self, py: Python<'py>, addr: u64, f: &Py<PyAny>) -> PyResult<Bound<'py, PyAny>> {
        {
            let c = self.0.lock().unwrap_or_else(|e| e.into_inner());
            if let Some((_, m)) = c.iter().find(|(a, _)| *a == addr) {
                return Ok(m.bind(py).clone());
            }
        }
        let m = f.bind(py).call1((addr,))?;
        let mut c = self.0.lock().unwrap_or_else(|e| e.into_inner());
        let old = (c.len() >= MAP_CACHE).then(|| c.remove(0));
        c.push((addr, m.clone().unbind()));
        drop(c);
        drop(old); // released after the lock (a decref may run Python code)
        Ok(m)
    }
}

enum Launcher {
    Native(Py<CudaLauncher>),
    /// Any callable taking the parameters (the CPU tests' stand-ins).
    Py(Py<PyAny>),
}

struct Launch {
    launcher: Launcher,
    params: Vec<Param>,
}

/// (start, end, name): bytes from a tensor's address.
type Extent = (i128, i128, String);

struct Overlap {
    /// Value indices, the written `out` first.
    srcs: Vec<usize>,
    /// One per source.
    extents: Vec<Extent>,
}

struct Plan {
    allocs: Vec<Alloc>,
    overlaps: Vec<Overlap>,
    launches: Vec<Launch>,
    result: Vec<Option<usize>>,
    tuple_result: bool,
}

/// The key of one call that missed (see [`CallPlans`]).
#[pyclass(frozen, name = "CallKey", module = "zyntax.cuda")]
pub struct CallKey {
    key: Mutex<Option<Key>>,
    addresses: Vec<Option<u64>>,
}

#[pymethods]
impl CallKey {
    /// The address of each value (None for scalars), in call order.
    #[getter]
    fn addresses(&self) -> Vec<Option<u64>> {
        self.addresses.clone()
    }
}

/// The plans of one entry function (see the module documentation). Once
/// `set_slow` gave it the function's slow path, the table is the entry
/// function itself: calling it replays a plan or runs the slow path, in one
/// native call (no Python frame on a hit). Its `__dict__` takes the
/// function's name, documentation and `__wrapped__` (`functools.update_wrapper`).
#[pyclass(frozen, dict, name = "CallPlans", module = "zyntax.cuda")]
pub struct CallPlans {
    miss: Py<PyAny>,
    /// () -> (tensor type, stream function) once torch is imported, else None.
    torch_fn: Py<PyAny>,
    torch: OnceLock<(Py<PyType>, Py<PyAny>)>,
    plans: Mutex<PlanMap>,
    /// (`slow(*args, **kwargs)`, `local`): what a call that misses runs, and
    /// the thread-local object whose `rec` is not None while this thread
    /// records a call (every call then runs `slow`: it belongs to the recording).
    slow: OnceLock<(Py<PyAny>, Py<PyAny>)>,
}

pub(crate) fn bad(msg: impl Into<String>) -> PyErr {
    ArgumentError::new_err(format!("CallPlans: {}", msg.into()))
}

/// The key of a scalar, a stream or a tuple of them; None for anything else.
fn scalar_item(a: &Bound<'_, PyAny>, keep: &mut Vec<Py<PyAny>>) -> Option<Item> {
    if a.is_none() {
        return Some(Item::None);
    }
    if let Ok(b) = a.cast_exact::<PyBool>() {
        return Some(Item::Bool(b.is_true()));
    }
    if a.is_exact_instance_of::<PyInt>() {
        // An int beyond i64 has no key (the full path).
        return a.extract::<i64>().ok().map(Item::Int);
    }
    if let Ok(f) = a.cast_exact::<PyFloat>() {
        return Some(Item::Float(f.value().to_bits())); // exact: -0.0 is not 0.0
    }
    if let Ok(s) = a.cast_exact::<PyString>() {
        return s.to_str().ok().map(|s| Item::Str(s.to_owned()));
    }
    if let Ok(t) = a.cast_exact::<PyTuple>() {
        let items: Option<Vec<Item>> = t.iter().map(|x| scalar_item(&x, keep)).collect();
        return items.map(Item::Tuple);
    }
    if a.cast_exact::<CudaStream>().is_ok() {
        keep.push(a.clone().unbind());
        return Some(Item::Stream(a.as_ptr() as usize));
    }
    None
}

fn int_tuple(t: &Bound<'_, PyAny>) -> PyResult<Option<Vec<i64>>> {
    let Ok(t) = t.cast::<PyTuple>() else {
        return Ok(None);
    };
    t.iter()
        .map(|x| x.extract::<i64>())
        .collect::<PyResult<Vec<i64>>>()
        .map(Some)
}

/// What reading a call's values gave.
struct Read<'py> {
    key: Key,
    values: Vec<Bound<'py, PyAny>>,
    addresses: Vec<Option<u64>>,
}

impl CallPlans {
    fn torch_types(&self, py: Python<'_>) -> PyResult<Option<&(Py<PyType>, Py<PyAny>)>> {
        if let Some(t) = self.torch.get() {
            return Ok(Some(t));
        }
        let got = self.torch_fn.bind(py).call0()?;
        if got.is_none() {
            return Ok(None);
        }
        let (ty, f): (Bound<'_, PyType>, Bound<'_, PyAny>) = got.extract()?;
        let _ = self.torch.set((ty.unbind(), f.unbind()));
        Ok(self.torch.get())
    }

    /// Adds value `a`'s key and address; false when it has no key.
    fn value<'py>(
        &self,
        a: Bound<'py, PyAny>,
        r: &mut Read<'py>,
        torch_device: &mut i64,
    ) -> PyResult<bool> {
        let py = a.py();
        if let Ok(d) = a.cast_exact::<DeviceArray>() {
            let d = d.get();
            r.key.items.push(Item::Array {
                typestr: d.dtype.typestr.clone(),
                device: d.device.ordinal(),
                shape: d.shape.clone(),
                strides: d.strides.clone(),
                align: (d.ptr & 15) as u8,
            });
            r.addresses.push(Some(d.ptr));
            r.values.push(a);
            return Ok(true);
        }
        if let Some(item) = scalar_item(&a, &mut r.key.keep) {
            r.key.items.push(item);
            r.addresses.push(None);
            r.values.push(a);
            return Ok(true);
        }
        let Some((ty, _)) = self.torch_types(py)? else {
            return Ok(false);
        };
        if !a.get_type().is(ty.bind(py)) {
            return Ok(false);
        }
        if let Some(tc) = super::torch_c::enabled() {
            // The same key read in C (~0.1 µs against ~1 µs of methods).
            let Some(m) = tc.read(&a) else {
                return Ok(false);
            };
            if m.device_type != super::torch_c::CUDA {
                return Ok(false); // a CPU tensor: the full path refuses it by name
            }
            r.key.items.push(Item::TensorC {
                dtype: m.dtype,
                device: m.device,
                shape: m.shape,
                strides: m.strides,
                align: (m.ptr & 15) as u8,
            });
            r.addresses.push(Some(m.ptr));
            r.values.push(a);
            if *torch_device < 0 {
                *torch_device = i64::from(m.device);
            }
            return Ok(true);
        }
        let dev: i64 = a.call_method0(intern!(py, "get_device"))?.extract()?;
        if dev < 0 {
            return Ok(false); // a CPU tensor: the full path refuses it by name
        }
        let dtype = a.getattr(intern!(py, "dtype"))?;
        let ptr: u64 = a.call_method0(intern!(py, "data_ptr"))?.extract()?;
        let (Some(shape), Some(strides)) = (
            int_tuple(&a.getattr(intern!(py, "shape"))?)?,
            int_tuple(&a.call_method0(intern!(py, "stride"))?)?,
        ) else {
            return Ok(false);
        };
        r.key.items.push(Item::Tensor {
            dtype: dtype.as_ptr() as usize,
            device: dev,
            shape,
            strides,
            align: (ptr & 15) as u8,
        });
        r.key.keep.push(dtype.unbind());
        r.addresses.push(Some(ptr));
        r.values.push(a);
        if *torch_device < 0 {
            *torch_device = dev;
        }
        Ok(true)
    }

    /// The key of a call, or None when a value has none.
    fn read<'py>(
        &self,
        args: &Bound<'py, PyTuple>,
        kwargs: Option<&Bound<'py, PyDict>>,
    ) -> PyResult<Option<Read<'py>>> {
        let py = args.py();
        let n = args.len() + kwargs.map_or(0, |k| k.len());
        let mut r = Read {
            key: Key {
                items: Vec::with_capacity(n + 4),
                keep: Vec::new(),
            },
            values: Vec::with_capacity(n),
            addresses: Vec::with_capacity(n),
        };
        r.key.items.push(Item::Args(args.len()));
        let mut torch_device = -1i64;
        for a in args.iter() {
            if !self.value(a, &mut r, &mut torch_device)? {
                return Ok(None);
            }
        }
        if let Some(kw) = kwargs {
            for (k, v) in kw.iter() {
                let Some(name) = k
                    .cast::<PyString>()
                    .ok()
                    .and_then(|s| s.to_str().ok().map(str::to_owned))
                else {
                    return Ok(None);
                };
                r.key.items.push(Item::Name(name));
                if !self.value(v, &mut r, &mut torch_device)? {
                    return Ok(None);
                }
            }
        }
        if torch_device >= 0 {
            // libtorch's C function where it is on (torch_c.rs), else the
            // raw-stream function of `torch_types`.
            let h = match super::torch_c::current_stream(torch_device) {
                Some(h) => h,
                None => {
                    let (_, f) = self.torch_types(py)?.expect("torch types are known");
                    f.bind(py).call1((torch_device,))?.extract()?
                }
            };
            r.key.items.push(Item::TorchStream(h));
        }
        Ok(Some(r))
    }

    fn replay<'py>(&self, py: Python<'py>, plan: &Plan, r: Read<'py>) -> PyResult<Py<PyAny>> {
        let mut objs = r.values;
        let mut addr: Vec<u64> = r.addresses.iter().map(|a| a.unwrap_or(0)).collect();
        for a in &plan.allocs {
            let (o, p) = match a {
                Alloc::Torch {
                    like,
                    shape,
                    kwargs,
                } => {
                    let o = objs[*like].call_method(
                        intern!(py, "new_empty"),
                        (shape.bind(py),),
                        kwargs.as_ref().map(|k| k.bind(py)),
                    )?;
                    let p: u64 = o.call_method0(intern!(py, "data_ptr"))?.extract()?;
                    (o, p)
                }
                Alloc::Like { like, f } => {
                    let o = f.bind(py).call1((&objs[*like],))?;
                    let p: u64 = o.call_method0(intern!(py, "data_ptr"))?.extract()?;
                    (o, p)
                }
                Alloc::Call { like, f } => {
                    let got = f.bind(py).call1((&objs[*like],))?;
                    let (o, p): (Bound<'py, PyAny>, u64) = got.extract()?;
                    (o, p)
                }
                Alloc::Args { f, args, kwargs } => {
                    let o = f
                        .bind(py)
                        .call(args.bind(py), kwargs.as_ref().map(|k| k.bind(py)))?;
                    let p: u64 = o.call_method0(intern!(py, "data_ptr"))?.extract()?;
                    (o, p)
                }
                Alloc::Aten {
                    shape,
                    strides,
                    dtype,
                    device,
                } => match super::torch_c::loaded() {
                    // Loaded and checked when the plan was stored ("aten" is
                    // refused while off); turning them off later leaves them valid.
                    Some(tc) => {
                        tc.empty(py, shape, strides, *dtype, super::torch_c::CUDA, *device)?
                    }
                    None => return Err(bad("alloc 'aten': libtorch's C functions are not loaded")),
                },
            };
            objs.push(o);
            addr.push(p);
        }
        for ov in &plan.overlaps {
            let base = i128::from(addr[ov.srcs[0]]);
            let (o0, o1, _) = &ov.extents[0];
            for (j, (r0, r1, name)) in ov.srcs[1..].iter().zip(&ov.extents[1..]) {
                let p = i128::from(addr[*j]);
                if base + o0 < p + r1 && p + r0 < base + o1 {
                    return Err(ArgumentError::new_err(format!(
                        "argument 'out': overlaps argument '{name}' in memory"
                    )));
                }
            }
        }
        for l in &plan.launches {
            match &l.launcher {
                Launcher::Native(launcher) => launch_native(py, launcher.get(), &l.params, &addr)?,
                Launcher::Py(f) => {
                    let vals: Vec<Bound<'py, PyAny>> = l
                        .params
                        .iter()
                        .map(|p| -> PyResult<Bound<'py, PyAny>> {
                            Ok(match p {
                                Param::Const(_, o) => o.bind(py).clone(),
                                Param::Addr(j) => addr[*j].into_pyobject(py)?.into_any(),
                                Param::Map(j, f, _) => f.bind(py).call1((addr[*j],))?,
                            })
                        })
                        .collect::<PyResult<_>>()?;
                    f.bind(py).call1(PyTuple::new(py, vals)?)?;
                }
            }
        }
        let got: Vec<Bound<'py, PyAny>> = plan
            .result
            .iter()
            .map(|j| match j {
                Some(j) => objs[*j].clone(),
                None => py.None().into_bound(py),
            })
            .collect();
        if plan.tuple_result {
            Ok(PyTuple::new(py, got)?.into_any().unbind())
        } else {
            Ok(got[0].clone().unbind())
        }
    }
}

/// Encodes a plan's parameters straight into the launch (what
/// `launcher(*params)` does, without building the Python objects).
fn launch_native(py: Python<'_>, l: &CudaLauncher, params: &[Param], addr: &[u64]) -> PyResult<()> {
    let k = &l.kernel.get().inner;
    let own = l._stream.as_ref().map(|s| &s.get().inner);
    let mut maps: Vec<Bound<'_, PyAny>> = Vec::new();
    for p in params {
        if let Param::Map(j, f, cache) = p {
            maps.push(cache.get(py, addr[*j], f)?);
        }
    }
    let mut keep = Vec::new();
    let r = launch_slots(k, &l.cfg, &l.opts, l.stream_raw as zc::CUstream, |slots| {
        let mut m = 0;
        for (i, p) in params.iter().enumerate() {
            let arg = match p {
                Param::Const(Const::Int(v), _) => zc::KernelArg::Int(*v),
                Param::Const(Const::Float(v), _) => zc::KernelArg::Float(*v),
                Param::Const(Const::Bool(v), _) => zc::KernelArg::Bool(*v),
                Param::Const(Const::Obj(o), _) => {
                    convert_arg(py, k, i, &k.params()[i], o.bind(py), &mut keep)?
                }
                Param::Addr(j) => zc::KernelArg::Int(i128::from(addr[*j])),
                Param::Map(..) => {
                    m += 1;
                    convert_arg(py, k, i, &k.params()[i], &maps[m - 1], &mut keep)?
                }
            };
            k.encode_arg(i, arg, slots)
                .map_err(|e| PyLaunchError::new_err(e.to_string()))?;
        }
        Ok(())
    })?;
    if let Some(s) = own.filter(|s| r.is_ok() && s.capture_active()) {
        // The maps (and anything else converted) move into the graph.
        keep_captured(s, maps.into_iter(), keep);
    }
    r.py(py)
}

/// A constant launch parameter converted once for parameter `i` of `k`
/// (anything else, a value the conversion refuses included, is converted
/// on each call, where a refusal raises as the launcher's would).
fn constant(py: Python<'_>, k: &zc::Kernel, i: usize, v: &Bound<'_, PyAny>) -> Const {
    let mut keep = Vec::new();
    match convert_arg(py, k, i, &k.params()[i], v, &mut keep) {
        Ok(zc::KernelArg::Int(x)) => Const::Int(x),
        Ok(zc::KernelArg::Float(x)) => Const::Float(x),
        Ok(zc::KernelArg::Bool(x)) => Const::Bool(x),
        _ => Const::Obj(v.clone().unbind()),
    }
}

fn index(v: &Bound<'_, PyAny>, n: usize, what: &str) -> PyResult<usize> {
    let j: usize = v
        .extract()
        .map_err(|_| bad(format!("{what}: expected an index")))?;
    if j >= n {
        return Err(bad(format!("{what}: index {j} out of range (< {n})")));
    }
    Ok(j)
}

#[pymethods]
impl CallPlans {
    /// `miss`: what `lookup` returns on a miss. `torch_fn()`: None until
    /// torch is imported, then `(torch.Tensor, raw stream function)`.
    #[new]
    fn new(miss: Bound<'_, PyAny>, torch_fn: Bound<'_, PyAny>) -> PyResult<CallPlans> {
        if !torch_fn.is_callable() {
            return Err(bad("torch_fn must be callable"));
        }
        Ok(CallPlans {
            miss: miss.unbind(),
            torch_fn: torch_fn.unbind(),
            torch: OnceLock::new(),
            plans: Mutex::new(PlanMap::default()),
            slow: OnceLock::new(),
        })
    }

    /// Makes the table callable (see [`CallPlans`]); once.
    fn set_slow(&self, slow: Bound<'_, PyAny>, local: Bound<'_, PyAny>) -> PyResult<()> {
        if !slow.is_callable() {
            return Err(bad("slow must be callable"));
        }
        self.slow
            .set((slow.unbind(), local.unbind()))
            .map_err(|_| bad("the slow path is set already"))
    }

    /// The entry function: the plan's result, or the slow path's.
    #[pyo3(signature = (*args, **kwargs))]
    fn __call__(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        let Some((slow, local)) = self.slow.get() else {
            return Err(bad("not callable before set_slow"));
        };
        let slow = slow.bind(py);
        if local.bind(py).getattr(intern!(py, "rec"))?.is_none() {
            let got = self.lookup(py, args, kwargs)?;
            if got.as_ptr() != self.miss.as_ptr() {
                return Ok(got);
            }
        }
        Ok(slow.call(args, kwargs)?.unbind())
    }

    fn __repr__(slf: &Bound<'_, Self>) -> PyResult<String> {
        let py = slf.py();
        Ok(match slf.getattr(intern!(py, "__wrapped__")) {
            Ok(f) => format!("<planned {}>", f.repr()?),
            Err(_) => "<zyntax.cuda.CallPlans>".to_owned(),
        })
    }

    /// The result of replaying this call's plan, or `miss`.
    #[pyo3(signature = (args, kwargs=None))]
    fn lookup(
        &self,
        py: Python<'_>,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Py<PyAny>> {
        guard(|| {
            let Some(r) = self.read(args, kwargs)? else {
                return Ok(self.miss.clone_ref(py));
            };
            let plan = {
                let plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
                plans.get(&r.key).cloned()
            };
            match plan {
                Some(p) => self.replay(py, &p, r),
                None => Ok(self.miss.clone_ref(py)),
            }
        })
    }

    /// This call's key, or None when a value has none.
    #[pyo3(signature = (args, kwargs=None))]
    fn key(
        &self,
        args: &Bound<'_, PyTuple>,
        kwargs: Option<&Bound<'_, PyDict>>,
    ) -> PyResult<Option<CallKey>> {
        guard(|| {
            Ok(self.read(args, kwargs)?.map(|r| CallKey {
                key: Mutex::new(Some(r.key)),
                addresses: r.addresses,
            }))
        })
    }

    /// Stores a plan under `key` (consumed). `n`: the call's values;
    /// `allocs`: `("torch", like, shape, dtype | None)`, `("like", like, f)`,
    /// `("call", like, f)`, `("args", like, f, args, kwargs | None)` or
    /// `("aten", like, (shape, strides, dtype code, device))` (only while
    /// libtorch's C functions are on: `torch_c`); `overlaps`: `(sources, [(start, end, name), ...])`; `launches`:
    /// `(launcher, [("const", v) | ("ptr", j) | ("map", j, f), ...])`;
    /// `result`: an index or None per result; `tuple_result`: whether the
    /// function returns a tuple. Indices count the values, then the outputs.
    #[allow(clippy::too_many_arguments)]
    fn insert(
        &self,
        py: Python<'_>,
        key: &Bound<'_, CallKey>,
        n: usize,
        allocs: &Bound<'_, PyList>,
        overlaps: &Bound<'_, PyList>,
        launches: &Bound<'_, PyList>,
        result: &Bound<'_, PyList>,
        tuple_result: bool,
    ) -> PyResult<()> {
        guard(|| {
            let mut allocs_ = Vec::new();
            for (i, a) in allocs.iter().enumerate() {
                let have = n + i;
                let t = a
                    .cast::<PyTuple>()
                    .map_err(|_| bad("an alloc is a tuple"))?;
                let kind: String = t.get_item(0)?.extract()?;
                let like = index(&t.get_item(1)?, have, "alloc")?;
                allocs_.push(match kind.as_str() {
                    "torch" => {
                        let shape = t
                            .get_item(2)?
                            .cast_into::<PyTuple>()
                            .map_err(|_| bad("alloc 'torch': shape must be a tuple"))?;
                        let dtype = t.get_item(3)?;
                        let kwargs = if dtype.is_none() {
                            None
                        } else {
                            let d = PyDict::new(py);
                            d.set_item("dtype", dtype)?;
                            Some(d.unbind())
                        };
                        Alloc::Torch {
                            like,
                            shape: shape.unbind(),
                            kwargs,
                        }
                    }
                    "like" => Alloc::Like {
                        like,
                        f: t.get_item(2)?.unbind(),
                    },
                    "call" => Alloc::Call {
                        like,
                        f: t.get_item(2)?.unbind(),
                    },
                    "args" => {
                        let args = t
                            .get_item(3)?
                            .cast_into::<PyTuple>()
                            .map_err(|_| bad("alloc 'args': args must be a tuple"))?;
                        let kwargs = t.get_item(4)?;
                        let kwargs = if kwargs.is_none() {
                            None
                        } else {
                            Some(
                                kwargs
                                    .cast_into::<PyDict>()
                                    .map_err(|_| bad("alloc 'args': kwargs must be a dict"))?
                                    .unbind(),
                            )
                        };
                        Alloc::Args {
                            f: t.get_item(2)?.unbind(),
                            args: args.unbind(),
                            kwargs,
                        }
                    }
                    "aten" => {
                        if super::torch_c::enabled().is_none() {
                            return Err(bad("alloc 'aten': libtorch's C functions are off"));
                        }
                        let (shape, strides, dtype, device): (Vec<i64>, Vec<i64>, i32, i32) =
                            t.get_item(2)?.extract()?;
                        if shape.len() != strides.len() {
                            return Err(bad("alloc 'aten': shape and strides differ in length"));
                        }
                        Alloc::Aten {
                            shape,
                            strides,
                            dtype,
                            device,
                        }
                    }
                    other => return Err(bad(format!("unknown alloc kind '{other}'"))),
                });
            }
            let total = n + allocs_.len();
            let mut overlaps_ = Vec::new();
            for o in overlaps.iter() {
                let (srcs, extents): (Vec<Bound<'_, PyAny>>, Vec<Extent>) = o.extract()?;
                let srcs = srcs
                    .iter()
                    .map(|s| index(s, total, "overlap"))
                    .collect::<PyResult<Vec<_>>>()?;
                if srcs.len() != extents.len() || srcs.is_empty() {
                    return Err(bad("an overlap has one extent per source"));
                }
                overlaps_.push(Overlap { srcs, extents });
            }
            let mut launches_ = Vec::new();
            for l in launches.iter() {
                let (launcher, params): (Bound<'_, PyAny>, Vec<Bound<'_, PyTuple>>) =
                    l.extract()?;
                let native = launcher.cast::<CudaLauncher>().ok().cloned();
                if let Some(c) = &native {
                    let want = c.get().kernel.get().inner.params().len();
                    if want != params.len() {
                        return Err(bad(format!(
                            "a launch has {} parameter(s), its kernel {want}",
                            params.len()
                        )));
                    }
                }
                let mut ps = Vec::new();
                for (i, p) in params.iter().enumerate() {
                    let kind: String = p.get_item(0)?.extract()?;
                    ps.push(match kind.as_str() {
                        "const" => {
                            let v = p.get_item(1)?;
                            let c = match &native {
                                Some(c) => constant(py, &c.get().kernel.get().inner, i, &v),
                                None => Const::Obj(v.clone().unbind()),
                            };
                            Param::Const(c, v.unbind())
                        }
                        "ptr" => Param::Addr(index(&p.get_item(1)?, total, "ptr")?),
                        "map" => Param::Map(
                            index(&p.get_item(1)?, total, "map")?,
                            p.get_item(2)?.unbind(),
                            MapCache::default(),
                        ),
                        other => return Err(bad(format!("unknown parameter kind '{other}'"))),
                    });
                }
                launches_.push(Launch {
                    launcher: match native {
                        Some(c) => Launcher::Native(c.unbind()),
                        None => Launcher::Py(launcher.unbind()),
                    },
                    params: ps,
                });
            }
            let result = result
                .iter()
                .map(|r| {
                    if r.is_none() {
                        Ok(None)
                    } else {
                        index(&r, total, "result").map(Some)
                    }
                })
                .collect::<PyResult<Vec<_>>>()?;
            if result.is_empty() || (!tuple_result && result.len() != 1) {
                return Err(bad("one result, or a tuple of results"));
            }
            let Some(key) = key
                .get()
                .key
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .take()
            else {
                return Err(bad("this key was used already"));
            };
            let plan = Plan {
                allocs: allocs_,
                overlaps: overlaps_,
                launches: launches_,
                result,
                tuple_result,
            };
            let mut plans = self.plans.lock().unwrap_or_else(|e| e.into_inner());
            // Dropped after the lock is released (a finaliser may call back).
            let old = if plans.len() >= CAPACITY {
                std::mem::take(&mut *plans)
            } else {
                PlanMap::default()
            };
            plans.insert(key, Arc::new(plan));
            drop(plans);
            drop(old);
            Ok(())
        })
    }

    fn clear(&self) {
        let old = std::mem::take(&mut *self.plans.lock().unwrap_or_else(|e| e.into_inner()));
        drop(old);
    }

    fn __len__(&self) -> usize {
        self.plans.lock().unwrap_or_else(|e| e.into_inner()).len()
    }
}
