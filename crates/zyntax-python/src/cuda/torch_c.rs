//! PyTorch tensors read and made through libtorch's C entry points (issue 25).
//!
//! A call plan (`plans.rs`) reads each torch tensor's key (dtype, device,
//! shape, strides, address) and makes its outputs on every call. Through
//! the tensor's Python methods that costs ~1 µs a tensor, and an output
//! through `torch.empty_like` ~1.6 µs (H200 host, session 11), where
//! PyTorch's own ops spend ~0.7 µs on their output in C++. So when PyTorch
//! is imported, `_plans` loads the C functions of AOTInductor's shim
//! (`aoti_torch_*` in libtorch_cpu: a C ABI that PyTorch keeps stable for
//! compiled models) and `THPVariable_Wrap` of libtorch_python (an at::Tensor
//! to its Python object), and the plans read and allocate through them.
//!
//! What is assumed, and checked before anything is enabled (`_plans`
//! compares every read with the tensor's own methods on CPU tensors of each
//! dtype, and a made tensor with what Python sees of it): a Python tensor
//! object holds its `at::Tensor` (one pointer to the TensorImpl) right after
//! the object header. [`read`] only trusts that slot where it holds the
//! tensor's TensorImpl (`Tensor._cdata`); a torch whose layout differs
//! fails the check, and the plans keep the Python methods. Symbols that are
//! missing mean the same. `ZYNTAX_TORCH_C=0` keeps the Python methods.

use pyo3::ffi;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::OnceLock;

/// `at::Tensor*` (AOTInductor's `AtenTensorHandle`).
type Handle = *mut c_void;
type Get<T> = unsafe extern "C" fn(Handle, *mut T) -> i32;

/// c10::DeviceType::CUDA.
pub(crate) const CUDA: i32 = 1;

pub(crate) struct TorchC {
    _libs: (libloading::Library, libloading::Library),
    empty_strided:
        unsafe extern "C" fn(i64, *const i64, *const i64, i32, i32, i32, *mut Handle) -> i32,
    delete: unsafe extern "C" fn(Handle) -> i32,
    data_ptr: Get<*mut c_void>,
    dim: Get<i64>,
    sizes: Get<*const i64>,
    strides: Get<*const i64>,
    dtype: Get<i32>,
    device_type: Get<i32>,
    device_index: Get<i32>,
    /// `PyObject* THPVariable_Wrap(const at::TensorBase&)` (or by value:
    /// the same pointer to the tensor is passed either way).
    wrap: unsafe extern "C" fn(Handle) -> *mut ffi::PyObject,
}

// SAFETY: plain function pointers into libraries that stay loaded.
unsafe impl Send for TorchC {}
unsafe impl Sync for TorchC {}

static LOADED: OnceLock<TorchC> = OnceLock::new();
static ENABLED: AtomicBool = AtomicBool::new(false);

/// `aoti_torch_get_current_cuda_stream(device_index, &stream)`.
type StreamFn = unsafe extern "C" fn(i32, *mut *mut c_void) -> i32;

/// libtorch_cuda's stream function (loaded with the others when the
/// library is given) and whether `_torch_c` checked and turned it on.
static STREAM: OnceLock<(libloading::Library, StreamFn)> = OnceLock::new();
static STREAM_ENABLED: AtomicBool = AtomicBool::new(false);

fn stream_of(device: i32) -> Option<u64> {
    let (_, f) = STREAM.get()?;
    let mut h: *mut c_void = std::ptr::null_mut();
    // SAFETY: the shim writes one handle and reports a C++ exception (a bad
    // device index) as a non-zero code.
    (unsafe { f(device, &mut h) } == 0).then_some(h as u64)
}

/// PyTorch's current stream on `device` as a raw handle (0: the legacy
/// default stream) through libtorch's C function, once checked and turned
/// on with the other C functions; None otherwise (callers then ask
/// `torch._C._cuda_getCurrentRawStream`).
pub(crate) fn current_stream(device: i64) -> Option<u64> {
    if STREAM_ENABLED.load(Ordering::Relaxed) && ENABLED.load(Ordering::Relaxed) {
        stream_of(i32::try_from(device).ok()?)
    } else {
        None
    }
}

/// The loaded functions once `_plans` enabled them (checked), else None.
pub(crate) fn enabled() -> Option<&'static TorchC> {
    if ENABLED.load(Ordering::Relaxed) {
        LOADED.get()
    } else {
        None
    }
}

/// The loaded functions, enabled or not (a plan's "aten" allocation was
/// checked when it was stored).
pub(crate) fn loaded() -> Option<&'static TorchC> {
    LOADED.get()
}

/// What [`TorchC::read`] gives of a tensor.
pub(crate) struct Meta {
    pub dtype: i32,
    pub device_type: i32,
    pub device: i32,
    pub shape: Vec<i64>,
    pub strides: Vec<i64>,
    pub ptr: u64,
}

impl TorchC {
    /// The `at::Tensor` slot of a tensor object, if it holds `impl_ptr`
    /// (None: unknown layout).
    fn slot(obj: &Bound<'_, PyAny>, impl_ptr: Option<usize>) -> Option<Handle> {
        let at = (obj.as_ptr() as *mut u8).wrapping_add(std::mem::size_of::<ffi::PyObject>());
        if let Some(want) = impl_ptr {
            // SAFETY: a torch tensor object is larger than its header plus
            // one pointer (the check only runs on exact torch.Tensor objects).
            let got = unsafe { *(at as *const usize) };
            if got != want {
                return None;
            }
        }
        Some(at as Handle)
    }

    /// Dtype, device, shape, strides and address of an exact `torch.Tensor`
    /// `obj` (None when libtorch refuses one: a tensor without storage).
    pub(crate) fn read(&self, obj: &Bound<'_, PyAny>) -> Option<Meta> {
        self.read_slot(Self::slot(obj, None)?)
    }

    fn read_slot(&self, h: Handle) -> Option<Meta> {
        // SAFETY: `h` is the at::Tensor of a live tensor object (checked
        // layout); every function only reads it and reports failure by code.
        unsafe {
            let (mut dtype, mut dt, mut dev, mut dim) = (0i32, 0i32, 0i32, 0i64);
            let (mut sz, mut st): (*const i64, *const i64) = (std::ptr::null(), std::ptr::null());
            let mut ptr: *mut c_void = std::ptr::null_mut();
            let ok = (self.device_type)(h, &mut dt) == 0
                && (self.device_index)(h, &mut dev) == 0
                && (self.dtype)(h, &mut dtype) == 0
                && (self.dim)(h, &mut dim) == 0
                && (self.sizes)(h, &mut sz) == 0
                && (self.strides)(h, &mut st) == 0
                && (self.data_ptr)(h, &mut ptr) == 0;
            if !ok || dim < 0 || (dim > 0 && (sz.is_null() || st.is_null())) {
                return None;
            }
            let n = dim as usize;
            let (shape, strides) = if n == 0 {
                (Vec::new(), Vec::new())
            } else {
                (
                    std::slice::from_raw_parts(sz, n).to_vec(),
                    std::slice::from_raw_parts(st, n).to_vec(),
                )
            };
            Some(Meta {
                dtype,
                device_type: dt,
                device: dev,
                shape,
                strides,
                ptr: ptr as u64,
            })
        }
    }

    /// A new tensor (`at::empty_strided`: PyTorch's caching allocator on the
    /// device's current stream, its capture pool while capturing) and its address.
    pub(crate) fn empty<'py>(
        &self,
        py: Python<'py>,
        shape: &[i64],
        strides: &[i64],
        dtype: i32,
        device_type: i32,
        device: i32,
    ) -> PyResult<(Bound<'py, PyAny>, u64)> {
        if shape.len() != strides.len() {
            return Err(super::plans::bad(
                "torch_c: shape and strides differ in length",
            ));
        }
        let mut h: Handle = std::ptr::null_mut();
        // SAFETY: the arrays hold `shape.len()` values; `h` receives a new
        // at::Tensor owned here (deleted below).
        let code = unsafe {
            (self.empty_strided)(
                shape.len() as i64,
                shape.as_ptr(),
                strides.as_ptr(),
                dtype,
                device_type,
                device,
                &mut h,
            )
        };
        if code != 0 || h.is_null() {
            return Err(pyo3::exceptions::PyMemoryError::new_err(format!(
                "torch: empty_strided{shape:?} failed on device {device} (out of memory?)"
            )));
        }
        let mut ptr: *mut c_void = std::ptr::null_mut();
        // SAFETY: `h` is a valid at::Tensor; the Python object takes its own
        // reference, ours is released after.
        unsafe {
            (self.data_ptr)(h, &mut ptr);
            let obj = (self.wrap)(h);
            (self.delete)(h);
            if obj.is_null() {
                return Err(PyErr::fetch(py));
            }
            Ok((Bound::from_owned_ptr(py, obj), ptr as u64))
        }
    }
}

fn load(cpu: &str, python: &str) -> Result<TorchC, String> {
    // SAFETY: the libraries are the torch the program imported (loaded
    // already: dlopen returns them); symbols are looked up by name with the
    // signatures of PyTorch's headers.
    unsafe {
        let lc = libloading::Library::new(cpu).map_err(|e| e.to_string())?;
        let lp = libloading::Library::new(python).map_err(|e| e.to_string())?;
        macro_rules! sym {
            ($lib:expr, $name:expr) => {
                *$lib
                    .get($name.as_bytes())
                    .map_err(|e| format!("{}: {e}", $name))?
            };
        }
        let wrap = [
            "_Z16THPVariable_WrapRKN2at10TensorBaseE",
            "_Z16THPVariable_WrapN2at10TensorBaseE",
        ]
        .iter()
        .find_map(|n| {
            lp.get::<unsafe extern "C" fn(Handle) -> *mut ffi::PyObject>(n.as_bytes())
                .ok()
                .map(|s| *s)
        })
        .ok_or("THPVariable_Wrap not found")?;
        Ok(TorchC {
            empty_strided: sym!(lc, "aoti_torch_empty_strided"),
            delete: sym!(lc, "aoti_torch_delete_tensor_object"),
            data_ptr: sym!(lc, "aoti_torch_get_data_ptr"),
            dim: sym!(lc, "aoti_torch_get_dim"),
            sizes: sym!(lc, "aoti_torch_get_sizes"),
            strides: sym!(lc, "aoti_torch_get_strides"),
            dtype: sym!(lc, "aoti_torch_get_dtype"),
            device_type: sym!(lc, "aoti_torch_get_device_type"),
            device_index: sym!(lc, "aoti_torch_get_device_index"),
            wrap,
            _libs: (lc, lp),
        })
    }
}

/// Loads libtorch's C functions from the library paths (not enabled yet);
/// None when loaded, else why not. `cuda` (libtorch_cuda, optional): the
/// stream function's, loaded where it has it (else the plans keep asking
/// Python for the stream).
#[pyfunction]
#[pyo3(signature = (cpu, python, cuda=None))]
pub(crate) fn cuda_torch_c_load(cpu: &str, python: &str, cuda: Option<&str>) -> Option<String> {
    if let Some(path) = cuda.filter(|_| STREAM.get().is_none()) {
        // SAFETY: the torch the program imported (dlopen returns the loaded
        // library); the symbol has the shim header's signature.
        let got = unsafe {
            libloading::Library::new(path).ok().and_then(|lib| {
                let f = *lib
                    .get::<StreamFn>(b"aoti_torch_get_current_cuda_stream")
                    .ok()?;
                Some((lib, f))
            })
        };
        if let Some(got) = got {
            let _ = STREAM.set(got);
        }
    }
    if LOADED.get().is_some() {
        return None;
    }
    match load(cpu, python) {
        Ok(t) => {
            let _ = LOADED.set(t);
            None
        }
        Err(e) => Some(e),
    }
}

/// (dtype code, device type, device index, shape, strides, address) of an
/// exact `torch.Tensor` read through the C functions, or None when its
/// object does not hold the TensorImpl at `impl_ptr` (`t._cdata`) where
/// expected (another layout) or libtorch refuses it.
#[pyfunction]
pub(crate) fn cuda_torch_c_read<'py>(
    t: &Bound<'py, PyAny>,
    impl_ptr: usize,
) -> PyResult<Option<Bound<'py, PyTuple>>> {
    let Some(tc) = LOADED.get() else {
        return Ok(None);
    };
    let Some(m) = TorchC::slot(t, Some(impl_ptr)).and_then(|h| tc.read_slot(h)) else {
        return Ok(None);
    };
    Ok(Some(PyTuple::new(
        t.py(),
        [
            m.dtype.into_pyobject(t.py())?.into_any(),
            m.device_type.into_pyobject(t.py())?.into_any(),
            m.device.into_pyobject(t.py())?.into_any(),
            PyTuple::new(t.py(), &m.shape)?.into_any(),
            PyTuple::new(t.py(), &m.strides)?.into_any(),
            m.ptr.into_pyobject(t.py())?.into_any(),
        ],
    )?))
}

/// A new tensor through the C functions: (tensor, address).
#[pyfunction]
pub(crate) fn cuda_torch_c_empty<'py>(
    py: Python<'py>,
    shape: Vec<i64>,
    strides: Vec<i64>,
    dtype: i32,
    device_type: i32,
    device: i32,
) -> PyResult<(Bound<'py, PyAny>, u64)> {
    let Some(tc) = LOADED.get() else {
        return Err(super::plans::bad("torch_c: not loaded"));
    };
    tc.empty(py, &shape, &strides, dtype, device_type, device)
}

/// Turns the plans' use of the C functions on or off (on needs them loaded);
/// returns whether they are used now. Off also turns the stream function off.
#[pyfunction]
pub(crate) fn cuda_torch_c_enable(on: bool) -> bool {
    let on = on && LOADED.get().is_some();
    ENABLED.store(on, Ordering::Relaxed);
    if !on {
        STREAM_ENABLED.store(false, Ordering::Relaxed);
    }
    on
}

/// PyTorch's current stream on `device` through libtorch's C function,
/// enabled or not (for `_torch_c`'s check), or None where it is not loaded
/// or fails.
#[pyfunction]
pub(crate) fn cuda_torch_c_stream(device: i32) -> Option<u64> {
    stream_of(device)
}

/// Turns the launches' use of the stream function on or off (on needs it
/// loaded and the other C functions on); returns whether it is used now.
#[pyfunction]
pub(crate) fn cuda_torch_c_stream_enable(on: bool) -> bool {
    let on = on && STREAM.get().is_some() && ENABLED.load(Ordering::Relaxed);
    STREAM_ENABLED.store(on, Ordering::Relaxed);
    on
}
