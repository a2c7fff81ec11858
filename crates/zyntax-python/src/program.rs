//! Python bindings of the program executor (`zyntax_cuda::program`),
//! wrapped by `zyntax.cuda.Program` (python/zyntax/cuda.py), which records
//! the program and hands it here as plain data:
//!
//! * buffers: `[(name, role, dtype, shape), ...]`
//! * steps: `[(kernel_name, [(buffer_index, access), ...]), ...]` for the
//!   GPU-free planning and checks, and `[(kernel, grid, block, shared_mem,
//!   args), ...]` for the executor, where each argument is a scalar or a
//!   `(buffer_index, access)` tuple.

use crate::checked::{Checked, Is, Text};
use crate::cuda::{device, dims, err, normalize_dtype, CudaKernel, CudaStream, DeviceArray, OrPy};
use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple};
use std::sync::Mutex;
use zyntax_cuda as zc;
use zyntax_cuda::program::{Access, BufferDecl, ProgramSpec, Role, StepArg};

fn access(s: &str) -> PyResult<Access> {
    match s {
        "read" => Ok(Access::Read),
        "write" => Ok(Access::Write),
        "readwrite" => Ok(Access::ReadWrite),
        _ => Err(ArgumentError::new_err(format!(
            "access must be 'read', 'write' or 'readwrite', not '{s}'"
        ))),
    }
}

type BufferTuple<'py> = (String, String, Bound<'py, PyAny>, Vec<usize>);

fn decls(py: Python<'_>, buffers: Vec<BufferTuple<'_>>) -> PyResult<Vec<BufferDecl>> {
    buffers
        .into_iter()
        .map(|(name, role, dtype, shape)| {
            let d = normalize_dtype(py, &dtype)?;
            let elem = d.elem.ok_or_else(|| {
                ArgumentError::new_err(format!(
                    "buffer '{name}': dtype {dtype} has no zyntax element type"
                ))
            })?;
            Ok(BufferDecl {
                name,
                role: Role::parse(&role).py(py)?,
                elem,
                shape,
            })
        })
        .collect()
}

fn spec(
    py: Python<'_>,
    buffers: Vec<BufferTuple<'_>>,
    steps: Vec<(String, Vec<(usize, String)>)>,
) -> PyResult<ProgramSpec> {
    let mut spec = ProgramSpec::default();
    for d in decls(py, buffers)? {
        spec.add_buffer(d).py(py)?;
    }
    for (name, uses) in steps {
        let uses = uses
            .into_iter()
            .map(|(b, a)| Ok((b, access(&a)?)))
            .collect::<PyResult<Vec<_>>>()?;
        spec.add_step(&name, uses).py(py)?;
    }
    Ok(spec)
}

fn plan_dict<'py>(
    py: Python<'py>,
    spec: &ProgramSpec,
    plan: &zc::MemoryPlan,
) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("slot_bytes", plan.slot_bytes.clone())?;
    let assign = PyDict::new(py);
    for (b, s) in spec.buffers.iter().zip(&plan.assignment) {
        if let Some(s) = s {
            assign.set_item(&b.name, *s)?;
        }
    }
    d.set_item("assignment", assign)?;
    d.set_item("planned_bytes", plan.planned_bytes)?;
    d.set_item("naive_bytes", plan.naive_bytes)?;
    Ok(d)
}

/// Plans the temporaries of a program (no GPU needed): allocation sizes,
/// which temporary lives in which, planned and naive bytes.
#[pyfunction]
pub fn cuda_program_plan<'py>(
    py: Python<'py>,
    buffers: Vec<BufferTuple<'py>>,
    steps: Vec<(String, Vec<(usize, String)>)>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let spec = spec(py, buffers, steps)?;
        let plan = spec.plan();
        plan_dict(py, &spec, &plan)
    })
}

/// Checks a program (no GPU needed): a temporary read before any launch writes it is an error.
#[pyfunction]
pub fn cuda_program_check(
    py: Python<'_>,
    buffers: Vec<BufferTuple<'_>>,
    steps: Vec<(String, Vec<(usize, String)>)>,
) -> PyResult<()> {
    guard(|| spec(py, buffers, steps)?.check_reads().py(py))
}

/// A recorded program on one device, ready to be prepared with bindings.
#[pyclass(frozen, name = "Program", module = "zyntax.cuda")]
pub struct CudaProgram {
    inner: zc::Program,
}

fn step_arg(py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<StepArg> {
    if let Ok(t) = a.cast::<PyTuple>() {
        let (b, acc): (usize, String) = t.extract()?;
        return Ok(StepArg::Buffer(b, access(&acc)?));
    }
    if let Ok(b) = a.cast::<PyBool>() {
        return Ok(StepArg::Bool(b.is_true()));
    }
    if a.is_instance_of::<PyInt>() {
        return Ok(StepArg::Int(a.extract::<i128>()?));
    }
    if a.is_instance_of::<PyFloat>() {
        return Ok(StepArg::Float(a.extract::<f64>()?));
    }
    let _ = py;
    Err(ArgumentError::new_err(format!(
        "program launch arguments are buffers, bools, ints or floats, not {}",
        a.get_type().name()?
    )))
}

type StepTuple<'py> = (
    Bound<'py, CudaKernel>,
    Bound<'py, PyAny>,
    Bound<'py, PyAny>,
    Option<u32>,
    Bound<'py, PyList>,
);

#[pymethods]
impl CudaProgram {
    #[new]
    #[pyo3(signature = (device, buffers, steps))]
    fn new(
        py: Python<'_>,
        device: Checked<u32>,
        buffers: Vec<BufferTuple<'_>>,
        steps: Vec<StepTuple<'_>>,
    ) -> PyResult<Self> {
        guard(|| {
            let dev = self::device(py, device.0)?;
            let mut p = zc::Program::new(&dev);
            for d in decls(py, buffers)? {
                p.buffer(&d.name, d.role, d.elem, &d.shape).py(py)?;
            }
            for (k, grid, block, shared, args) in steps {
                let k = &k.get().inner;
                let cfg = zc::LaunchConfig {
                    grid: dims(&grid, "grid")?,
                    block: dims(&block, "block")?,
                    shared_bytes: shared.unwrap_or(k.signature().shared_bytes),
                };
                let args = args
                    .iter()
                    .map(|a| step_arg(py, &a))
                    .collect::<PyResult<Vec<_>>>()?;
                p.launch(k, cfg, args).py(py)?;
            }
            Ok(CudaProgram { inner: p })
        })
    }

    /// Validates `bindings` (`{name: DeviceArray}`) and allocates the
    /// planned temporaries. `warmup`: eager runs before the graph capture
    /// (`None`: never capture).
    #[pyo3(signature = (bindings, warmup=Some(Checked(2)), stream=None),
        text_signature = "($self, bindings, warmup=2, stream=None)")]
    fn prepare(
        &self,
        py: Python<'_>,
        bindings: Vec<(String, Bound<'_, DeviceArray>)>,
        warmup: Option<Checked<u32>>,
        stream: Option<Is<'_, CudaStream>>,
    ) -> PyResult<CudaProgramExec> {
        guard(|| {
            let b = bindings
                .into_iter()
                .map(|(n, a)| (n, a.get().binding()))
                .collect();
            let opts = zc::ExecOptions {
                warmup: warmup.map(|c| c.0),
                stream: stream.map(|s| s.get().inner.clone()),
            };
            let ex = self.inner.prepare(b, opts).py(py)?;
            Ok(CudaProgramExec {
                stream: Py::new(
                    py,
                    CudaStream {
                        inner: ex.stream().clone(),
                    },
                )?,
                inner: Mutex::new(ex),
            })
        })
    }
}

/// A prepared program: `run()` queues one run (eager during the warm-up,
/// then graph replays); `bind()` swaps a tensor in place.
#[pyclass(frozen, name = "ProgramExec", module = "zyntax.cuda")]
pub struct CudaProgramExec {
    inner: Mutex<zc::Executor>,
    stream: Py<CudaStream>,
}

impl CudaProgramExec {
    fn lock(&self) -> std::sync::MutexGuard<'_, zc::Executor> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[pymethods]
impl CudaProgramExec {
    /// Queues `times` runs on the program's stream (returns at once).
    #[pyo3(signature = (times=Checked(1)), text_signature = "($self, times=1)")]
    fn run(&self, py: Python<'_>, times: Checked<u32>) -> PyResult<()> {
        guard(|| {
            let mut ex = self.lock();
            for _ in 0..times.0 {
                ex.run().map_err(|e| err(py, e))?;
            }
            Ok(())
        })
    }
    /// Binds a new tensor (a DeviceArray, or any `__cuda_array_interface__`
    /// / DLPack GPU tensor) to an input, parameter or output: validated, and
    /// a captured graph has its kernel nodes updated, not re-captured.
    fn bind(&self, py: Python<'_>, name: Text, array: &Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            let b = match array.cast::<DeviceArray>() {
                Ok(d) => d.get().binding(),
                Err(_) => {
                    if array.hasattr("__array_interface__")?
                        && !array.hasattr("__cuda_array_interface__")?
                    {
                        return Err(err(
                            py,
                            zc::CudaError::Binding {
                                name: name.0.clone(),
                                message: "is a host array; device memory is needed \
                                          (copy it with zyntax.cuda.to_device)"
                                    .to_owned(),
                            },
                        ));
                    }
                    // A zero-copy view, as zyntax.cuda.as_device_array makes one.
                    let d = if array.hasattr("__cuda_array_interface__")? {
                        crate::cuda::cuda_from_cuda_array_interface(py, array)?
                    } else {
                        crate::cuda::dlpack_view(py, array, "argument 'array'")?
                    };
                    d.binding()
                }
            };
            self.lock().bind(&name, b).py(py)
        })
    }
    /// Waits for the queued runs (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        guard(|| {
            let s = self.lock().stream().clone();
            py.detach(move || s.synchronize()).py(py)
        })
    }
    #[getter]
    fn stream(&self, py: Python<'_>) -> Py<CudaStream> {
        self.stream.clone_ref(py)
    }
    #[getter]
    fn is_captured(&self) -> bool {
        self.lock().is_captured()
    }
    /// `(runs, graph replays, graph updates)` so far.
    #[getter]
    fn counters(&self) -> (u64, u64, u64) {
        self.lock().counters()
    }
    /// The memory plan of the temporaries (as `zyntax.cuda.Program.plan()`).
    #[getter]
    fn plan<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        let ex = self.lock();
        plan_dict(py, ex.spec(), ex.plan())
    }
    /// Device address of a buffer (a bound tensor or a planned temporary).
    fn buffer_ptr(&self, name: Text) -> Option<u64> {
        self.lock().buffer_ptr(&name)
    }
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add("CudaProgram", py.get_type::<CudaProgram>())?;
    m.add("CudaProgramExec", py.get_type::<CudaProgramExec>())?;
    m.add_function(wrap_pyfunction!(cuda_program_plan, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_program_check, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_profile_start, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_profile_stop, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_profile_now_us, m)?)?;
    m.add_function(wrap_pyfunction!(cuda_profile_nvtx, m)?)?;
    Ok(())
}

// ---------------------------------------------------------------- profiling

fn arg_value(py: Python<'_>, v: &zc::profile::ArgValue) -> PyResult<Py<PyAny>> {
    Ok(match v {
        zc::profile::ArgValue::Int(i) => i.into_pyobject(py)?.into_any().unbind(),
        zc::profile::ArgValue::Float(f) => f.into_pyobject(py)?.into_any().unbind(),
        zc::profile::ArgValue::Str(s) => s.into_pyobject(py)?.into_any().unbind(),
    })
}

/// Starts recording runtime events (see `zyntax.profile`).
#[pyfunction]
pub fn cuda_profile_start() {
    zc::profile::start();
}

/// Microseconds since the recording started (the trace's clock).
#[pyfunction]
pub fn cuda_profile_now_us() -> f64 {
    zc::profile::now_us()
}

/// Whether NVTX ranges are emitted (libnvToolsExt was found).
#[pyfunction]
pub fn cuda_profile_nvtx() -> bool {
    zc::profile::nvtx_available()
}

/// Ends the recording; returns the events as dicts (`ph`, `cat`, `name`,
/// `ts`, `dur` in microseconds, `track` as `("host", thread)` or
/// `("device", ordinal, stream)`, `args`). Waits for timed device work.
#[pyfunction]
pub fn cuda_profile_stop(py: Python<'_>) -> PyResult<Vec<Py<PyDict>>> {
    guard(|| {
        let events = py.detach(zc::profile::stop);
        events
            .iter()
            .map(|e| {
                let d = PyDict::new(py);
                d.set_item("ph", e.ph.to_string())?;
                d.set_item("cat", e.cat)?;
                d.set_item("name", &e.name)?;
                d.set_item("ts", e.ts_us)?;
                d.set_item("dur", e.dur_us)?;
                match e.track {
                    zc::profile::Track::Host(t) => d.set_item("track", ("host", t))?,
                    zc::profile::Track::Device { ordinal, stream } => {
                        d.set_item("track", ("device", ordinal, stream))?
                    }
                }
                let args = PyDict::new(py);
                for (k, v) in &e.args {
                    args.set_item(*k, arg_value(py, v)?)?;
                }
                d.set_item("args", args)?;
                Ok(d.unbind())
            })
            .collect()
    })
}
