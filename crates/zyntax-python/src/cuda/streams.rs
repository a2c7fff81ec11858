//! Streams (with graph capture), events, and captured graphs.

use super::{convert_arg, device, dims, opt_stream, owner_of, CudaKernel, DlpackTensor, OrPy};
use crate::checked::{Checked, Flag, Is, Text};
use crate::errors::{guard, ArgumentError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::Arc;
use zyntax_cuda as zc;

/// A stream. Blocking by default (ordered with the legacy default stream,
/// which PyTorch and CuPy use by default).
#[pyclass(frozen, name = "Stream", module = "zyntax.cuda")]
pub struct CudaStream {
    pub(crate) inner: zc::Stream,
}

fn capture_mode(s: &str) -> PyResult<zc::CaptureMode> {
    match s {
        "global" => Ok(zc::CaptureMode::Global),
        "thread_local" => Ok(zc::CaptureMode::ThreadLocal),
        "relaxed" => Ok(zc::CaptureMode::Relaxed),
        _ => Err(ArgumentError::new_err(format!(
            "capture mode must be 'global', 'thread_local' or 'relaxed', not '{s}'"
        ))),
    }
}

#[pymethods]
impl CudaStream {
    #[new]
    #[pyo3(signature = (device=Checked(0), non_blocking=Flag(false)),
        text_signature = "(device=0, non_blocking=False)")]
    fn new(py: Python<'_>, device: Checked<u32>, non_blocking: Flag) -> PyResult<Self> {
        let non_blocking = non_blocking.0;
        guard(|| {
            let dev = self::device(py, device.0)?;
            Ok(CudaStream {
                inner: zc::Stream::new(&dev, non_blocking).py(py)?,
            })
        })
    }
    /// Wraps a foreign stream handle (e.g. `torch.cuda.current_stream().cuda_stream`);
    /// the caller keeps that stream alive.
    #[staticmethod]
    #[pyo3(signature = (handle, device=Checked(0)),
        text_signature = "(handle, device=0)")]
    fn from_handle(py: Python<'_>, handle: Checked<usize>, device: Checked<u32>) -> PyResult<Self> {
        guard(|| {
            let dev = self::device(py, device.0)?;
            // SAFETY: documented contract: a live stream of this device.
            Ok(CudaStream {
                inner: unsafe { zc::Stream::from_raw(&dev, handle.0 as zc::CUstream) },
            })
        })
    }
    /// The legacy default stream of a device.
    #[staticmethod]
    #[pyo3(signature = (device=Checked(0)),
        text_signature = "(device=0)")]
    fn legacy_default(py: Python<'_>, device: Checked<u32>) -> PyResult<Self> {
        guard(|| {
            Ok(CudaStream {
                inner: zc::Stream::legacy_default(&self::device(py, device.0)?),
            })
        })
    }
    #[getter]
    fn handle(&self) -> usize {
        self.inner.handle()
    }
    #[getter]
    fn device(&self) -> u32 {
        self.inner.device().ordinal()
    }
    /// Waits for the stream's work (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        let s = self.inner.clone();
        guard(|| py.detach(move || s.synchronize()).py(py))
    }
    fn query(&self, py: Python<'_>) -> PyResult<bool> {
        guard(|| self.inner.query().py(py))
    }
    /// Records `event` (a new one if `None`) and returns it.
    #[pyo3(signature = (event=None))]
    fn record(&self, py: Python<'_>, event: Option<Is<'_, CudaEvent>>) -> PyResult<Py<CudaEvent>> {
        guard(|| {
            let ev = match event {
                Some(e) => e.0.unbind(),
                None => Py::new(
                    py,
                    CudaEvent {
                        inner: zc::Event::new(self.inner.device(), true).py(py)?,
                    },
                )?,
            };
            self.inner.record(&ev.get().inner).py(py)?;
            Ok(ev)
        })
    }
    /// Makes future work on this stream wait for `event` (or all work queued so far on another stream).
    fn wait(&self, py: Python<'_>, other: &Bound<'_, PyAny>) -> PyResult<()> {
        guard(|| {
            if let Ok(e) = other.cast::<CudaEvent>() {
                return self.inner.wait(&e.get().inner).py(py);
            }
            if let Ok(s) = other.cast::<CudaStream>() {
                let ev = zc::Event::new(self.inner.device(), false).py(py)?;
                s.get().inner.record(&ev).py(py)?;
                return self.inner.wait(&ev).py(py);
            }
            Err(ArgumentError::new_err(
                "Stream.wait expects an Event or a Stream",
            ))
        })
    }
    /// Starts capturing this stream's work into a graph.
    #[pyo3(signature = (mode=Text::from("thread_local")),
        text_signature = "($self, mode='thread_local')")]
    fn begin_capture(&self, py: Python<'_>, mode: Text) -> PyResult<()> {
        guard(|| self.inner.begin_capture(capture_mode(&mode)?).py(py))
    }
    /// Ends the capture and returns the captured graph.
    fn end_capture(&self, py: Python<'_>) -> PyResult<CudaGraph> {
        guard(|| {
            Ok(CudaGraph {
                inner: self.inner.end_capture().py(py)?,
            })
        })
    }
    fn is_capturing(&self, py: Python<'_>) -> PyResult<bool> {
        guard(|| self.inner.is_capturing().py(py))
    }
    fn __repr__(&self) -> String {
        format!("{:?}", self.inner)
    }
}

/// A stream marker for dependencies and timing.
#[pyclass(frozen, name = "Event", module = "zyntax.cuda")]
pub struct CudaEvent {
    inner: zc::Event,
}

#[pymethods]
impl CudaEvent {
    #[new]
    #[pyo3(signature = (device=Checked(0), timing=Flag(true)),
        text_signature = "(device=0, timing=True)")]
    fn new(py: Python<'_>, device: Checked<u32>, timing: Flag) -> PyResult<Self> {
        let timing = timing.0;
        guard(|| {
            let dev = self::device(py, device.0)?;
            Ok(CudaEvent {
                inner: zc::Event::new(&dev, timing).py(py)?,
            })
        })
    }
    /// Records the event on `stream` (the legacy default stream if `None`).
    #[pyo3(signature = (stream=None))]
    fn record(&self, py: Python<'_>, stream: Option<Is<'_, CudaStream>>) -> PyResult<()> {
        guard(|| match stream {
            Some(s) => self.inner.record(&s.get().inner).py(py),
            // SAFETY: null is the legacy default stream.
            None => unsafe { self.inner.record_raw(std::ptr::null_mut()) }.py(py),
        })
    }
    /// Waits for the event (GIL released).
    fn synchronize(&self, py: Python<'_>) -> PyResult<()> {
        guard(|| py.detach(|| self.inner.synchronize()).py(py))
    }
    fn query(&self, py: Python<'_>) -> PyResult<bool> {
        guard(|| self.inner.query().py(py))
    }
    /// Milliseconds from this event to `end`.
    fn elapsed_ms(&self, py: Python<'_>, end: Is<'_, CudaEvent>) -> PyResult<f32> {
        guard(|| self.inner.elapsed_ms(&end.get().inner).py(py))
    }
}

/// A captured graph; `instantiate()` makes it replayable.
#[pyclass(frozen, name = "Graph", module = "zyntax.cuda")]
pub struct CudaGraph {
    inner: zc::Graph,
}

#[pymethods]
impl CudaGraph {
    #[getter]
    fn num_nodes(&self, py: Python<'_>) -> PyResult<usize> {
        guard(|| self.inner.num_nodes().py(py))
    }
    #[getter]
    fn num_kernel_nodes(&self, py: Python<'_>) -> PyResult<usize> {
        guard(|| self.inner.num_kernel_nodes().py(py))
    }
    /// How many owners (arrays, tensors, host buffers) the graph keeps alive.
    #[getter]
    fn num_owners(&self) -> usize {
        self.inner.num_owners()
    }
    fn instantiate(&self, py: Python<'_>) -> PyResult<CudaGraphExec> {
        guard(|| {
            Ok(CudaGraphExec {
                inner: self.inner.instantiate().py(py)?,
            })
        })
    }
}

/// An executable graph.
#[pyclass(frozen, name = "GraphExec", module = "zyntax.cuda")]
pub struct CudaGraphExec {
    inner: zc::GraphExec,
}

#[pymethods]
impl CudaGraphExec {
    /// Queues one replay on `stream` (legacy default stream if `None`).
    #[pyo3(signature = (stream=None))]
    fn launch(&self, py: Python<'_>, stream: Option<Is<'_, CudaStream>>) -> PyResult<()> {
        guard(|| self.inner.launch(opt_stream(stream.as_deref())).py(py))
    }
    #[getter]
    fn num_kernel_nodes(&self) -> usize {
        self.inner.num_kernel_nodes()
    }
    /// Replaces the arguments (and optionally grid/block/shared memory) of the
    /// `index`-th captured launch of `kernel` for later replays.
    #[pyo3(signature = (index, kernel, *args, grid=None, block=None, shared_mem=None))]
    #[allow(clippy::too_many_arguments)]
    fn set_kernel_args(
        &self,
        py: Python<'_>,
        index: Checked<usize>,
        kernel: Is<'_, CudaKernel>,
        args: &Bound<'_, PyTuple>,
        grid: Option<&Bound<'_, PyAny>>,
        block: Option<&Bound<'_, PyAny>>,
        shared_mem: Option<Checked<u32>>,
    ) -> PyResult<()> {
        guard(|| {
            let k = kernel.get();
            let cfg = match (grid, block) {
                (Some(g), Some(b)) => Some(zc::LaunchConfig {
                    grid: dims(g, "grid")?,
                    block: dims(b, "block")?,
                    shared_bytes: shared_mem
                        .map(|c| c.0)
                        .unwrap_or(k.inner.signature().shared_bytes),
                }),
                (None, None) => None,
                _ => {
                    return Err(ArgumentError::new_err(
                        "arguments 'grid' and 'block': pass both, or neither",
                    ))
                }
            };
            let mut keep: Vec<DlpackTensor> = Vec::new();
            let items: Vec<Bound<'_, PyAny>> = args.iter().collect();
            let mut kargs = Vec::with_capacity(items.len());
            for (i, a) in items.iter().enumerate() {
                let kind = k
                    .inner
                    .params()
                    .get(i)
                    .cloned()
                    .unwrap_or(zc::ParamKind::Bytes(0));
                kargs.push(convert_arg(py, &k.inner, i, &kind, a, &mut keep)?);
            }
            // The executable owns the new arguments' memory from now on.
            let mut owners: Vec<zc::KeepAlive> = items.iter().filter_map(owner_of).collect();
            owners.extend(keep.into_iter().map(|t| Arc::new(t) as zc::KeepAlive));
            // SAFETY: as for a launch; the caller vouches for buffer sizes,
            // and `owners` keeps every argument's memory alive.
            unsafe {
                self.inner
                    .set_kernel_args(index.0, &k.inner, cfg.as_ref(), &kargs, owners)
            }
            .py(py)
        })
    }
}
