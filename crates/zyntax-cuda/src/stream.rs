//! Streams and events.

use crate::device::Device;
use crate::error::{check, Result};
use crate::graph::Graph;
use crate::keep::KeepAlive;
use cudarc::driver::sys::{self, CUevent, CUresult, CUstream, CUstreamCaptureMode};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

#[derive(Clone, Copy)]
pub(crate) struct RawStream(pub(crate) CUstream);
// SAFETY: stream handles may be used from any thread; the driver serialises.
unsafe impl Send for RawStream {}
unsafe impl Sync for RawStream {}

struct StreamInner {
    raw: RawStream,
    device: Device,
    /// False for the legacy default stream, which is not ours to destroy.
    owned: bool,
    /// Set between `begin_capture` and `end_capture` (a cheap check on the
    /// launch path).
    capturing: AtomicBool,
    /// Owners of the memory the captured work touches; they move into the graph.
    captured_owners: Mutex<Vec<KeepAlive>>,
}

impl StreamInner {
    fn new(raw: CUstream, device: &Device, owned: bool) -> StreamInner {
        StreamInner {
            raw: RawStream(raw),
            device: device.clone(),
            owned,
            capturing: AtomicBool::new(false),
            captured_owners: Mutex::new(Vec::new()),
        }
    }
}

impl Drop for StreamInner {
    fn drop(&mut self) {
        if self.owned && self.device.bind().is_ok() {
            // Wait for the stream's work so the pool can hand its cached
            // blocks to other streams; then destroy it.
            // SAFETY: we created the stream and nobody else holds it.
            unsafe {
                let synced = sys::cuStreamSynchronize(self.raw.0) == CUresult::CUDA_SUCCESS;
                if synced {
                    self.device.pool().retire_stream(self.raw.0 as usize);
                }
                let _ = sys::cuStreamDestroy_v2(self.raw.0);
            }
        }
    }
}

/// A queue of device work. Cheap to clone (shared handle).
#[derive(Clone)]
pub struct Stream {
    inner: Arc<StreamInner>,
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Stream({:#x}, device {})",
            self.handle(),
            self.inner.device.ordinal()
        )
    }
}

/// How a capture treats unsafe calls from other threads (see
/// `cuStreamBeginCapture`): `Global` and `ThreadLocal` reject them, `Relaxed` allows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaptureMode {
    Global,
    ThreadLocal,
    Relaxed,
}

impl Stream {
    /// A new stream. Blocking streams (the default, `non_blocking = false`)
    /// order themselves after the legacy default stream, which is what PyTorch
    /// and CuPy use unless told otherwise, so their arrays are safe to pass.
    pub fn new(device: &Device, non_blocking: bool) -> Result<Stream> {
        device.bind()?;
        let mut s: CUstream = std::ptr::null_mut();
        // CU_STREAM_NON_BLOCKING = 1
        let flags = if non_blocking { 1 } else { 0 };
        // SAFETY: a context is current; writes one handle.
        check(
            unsafe { sys::cuStreamCreate(&mut s, flags) },
            "cuStreamCreate",
        )?;
        Ok(Stream {
            inner: Arc::new(StreamInner::new(s, device, true)),
        })
    }

    /// The legacy default stream (handle 0) of `device`.
    pub fn legacy_default(device: &Device) -> Stream {
        Stream {
            inner: Arc::new(StreamInner::new(std::ptr::null_mut(), device, false)),
        }
    }

    /// Wraps a foreign stream handle (e.g. `torch.cuda.current_stream().cuda_stream`).
    ///
    /// # Safety
    /// `raw` must be a valid stream of `device`'s primary context and outlive
    /// every use of the returned `Stream` (it is not destroyed on drop).
    pub unsafe fn from_raw(device: &Device, raw: CUstream) -> Stream {
        Stream {
            inner: Arc::new(StreamInner::new(raw, device, false)),
        }
    }

    #[inline]
    pub fn raw(&self) -> CUstream {
        self.inner.raw.0
    }

    /// The handle as an integer (as `__cuda_array_interface__` spells streams).
    pub fn handle(&self) -> usize {
        self.inner.raw.0 as usize
    }

    pub fn device(&self) -> &Device {
        &self.inner.device
    }

    /// Blocks the calling thread until all work queued so far has finished.
    pub fn synchronize(&self) -> Result<()> {
        self.inner.device.bind()?;
        // SAFETY: valid stream of the current context.
        check(
            unsafe { sys::cuStreamSynchronize(self.raw()) },
            "cuStreamSynchronize",
        )
    }

    /// Whether all queued work has finished (never blocks).
    pub fn query(&self) -> Result<bool> {
        self.inner.device.bind()?;
        // SAFETY: valid stream.
        match unsafe { sys::cuStreamQuery(self.raw()) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => check(e, "cuStreamQuery").map(|_| false),
        }
    }

    /// Records `event` at the current end of this stream.
    pub fn record(&self, event: &Event) -> Result<()> {
        event.record(self)
    }

    /// Makes future work on this stream wait for `event`.
    pub fn wait(&self, event: &Event) -> Result<()> {
        self.inner.device.bind()?;
        // SAFETY: both handles are valid.
        check(
            unsafe { sys::cuStreamWaitEvent(self.raw(), event.raw.0, 0) },
            "cuStreamWaitEvent",
        )
    }

    /// Starts capturing work queued on this stream into a graph instead of running it.
    pub fn begin_capture(&self, mode: CaptureMode) -> Result<()> {
        self.inner.device.bind()?;
        let m = match mode {
            CaptureMode::Global => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_GLOBAL,
            CaptureMode::ThreadLocal => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_THREAD_LOCAL,
            CaptureMode::Relaxed => CUstreamCaptureMode::CU_STREAM_CAPTURE_MODE_RELAXED,
        };
        // SAFETY: valid stream; the legacy stream is rejected by the driver with an error.
        check(
            unsafe { sys::cuStreamBeginCapture_v2(self.raw(), m) },
            "cuStreamBeginCapture",
        )?;
        self.owners().clear();
        self.inner.capturing.store(true, Ordering::Release);
        Ok(())
    }

    fn owners(&self) -> std::sync::MutexGuard<'_, Vec<KeepAlive>> {
        self.inner
            .captured_owners
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Whether [`Stream::begin_capture`] was called and the capture not yet ended.
    #[inline]
    pub fn capture_active(&self) -> bool {
        self.inner.capturing.load(Ordering::Acquire)
    }

    /// Registers the owner of memory that work just queued on this stream
    /// touches. While the stream captures, the owner moves into the graph at
    /// [`Stream::end_capture`] and lives as long as the graph and its
    /// executables; otherwise nothing is kept (the caller keeps the memory
    /// alive until the work has run, as for any launch).
    pub fn keep_alive(&self, owner: KeepAlive) {
        if self.capture_active() {
            self.owners().push(owner);
        }
    }

    /// Ends the capture started by [`Stream::begin_capture`] and returns the
    /// graph, which keeps every owner registered with [`Stream::keep_alive`]
    /// during the capture.
    pub fn end_capture(&self) -> Result<Graph> {
        self.inner.capturing.store(false, Ordering::Release);
        let owners = std::mem::take(&mut *self.owners());
        self.inner.device.bind()?;
        let mut g = std::ptr::null_mut();
        // SAFETY: valid stream; writes one graph handle that we then own.
        check(
            unsafe { sys::cuStreamEndCapture(self.raw(), &mut g) },
            "cuStreamEndCapture",
        )?;
        // SAFETY: `g` is a fresh graph owned by us.
        Ok(unsafe { Graph::from_raw(&self.inner.device, g, owners) })
    }

    /// Whether the stream is currently capturing.
    pub fn is_capturing(&self) -> Result<bool> {
        self.inner.device.bind()?;
        let mut st = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: valid stream; writes one enum.
        check(
            unsafe { sys::cuStreamIsCapturing(self.raw(), &mut st) },
            "cuStreamIsCapturing",
        )?;
        Ok(st != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE)
    }
}

#[derive(Clone, Copy)]
pub(crate) struct RawEvent(pub(crate) CUevent);
// SAFETY: event handles may be used from any thread.
unsafe impl Send for RawEvent {}
unsafe impl Sync for RawEvent {}

/// A marker in a stream: for dependencies between streams and for timing.
pub struct Event {
    raw: RawEvent,
    device: Device,
    timing: bool,
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event({:#x})", self.raw.0 as usize)
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: we created the event.
            unsafe {
                let _ = sys::cuEventDestroy_v2(self.raw.0);
            }
        }
    }
}

impl Event {
    /// A new event; `timing = false` makes record/wait cheaper.
    pub fn new(device: &Device, timing: bool) -> Result<Event> {
        device.bind()?;
        let mut e: CUevent = std::ptr::null_mut();
        // CU_EVENT_DISABLE_TIMING = 2
        let flags = if timing { 0 } else { 2 };
        // SAFETY: a context is current; writes one handle.
        check(
            unsafe { sys::cuEventCreate(&mut e, flags) },
            "cuEventCreate",
        )?;
        Ok(Event {
            raw: RawEvent(e),
            device: device.clone(),
            timing,
        })
    }

    pub fn raw(&self) -> CUevent {
        self.raw.0
    }

    pub fn record(&self, stream: &Stream) -> Result<()> {
        self.device.bind()?;
        // SAFETY: both handles valid.
        check(
            unsafe { sys::cuEventRecord(self.raw.0, stream.raw()) },
            "cuEventRecord",
        )
    }

    /// Records on a foreign stream handle (e.g. one named in a `__cuda_array_interface__`).
    ///
    /// # Safety
    /// `stream` must be a valid stream handle of this device's context (or a
    /// special handle such as `CU_STREAM_LEGACY`).
    pub unsafe fn record_raw(&self, stream: CUstream) -> Result<()> {
        self.device.bind()?;
        check(sys::cuEventRecord(self.raw.0, stream), "cuEventRecord")
    }

    /// Blocks until the event has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.device.bind()?;
        // SAFETY: valid event.
        check(
            unsafe { sys::cuEventSynchronize(self.raw.0) },
            "cuEventSynchronize",
        )
    }

    /// Whether the work before the event has completed.
    pub fn query(&self) -> Result<bool> {
        self.device.bind()?;
        // SAFETY: valid event.
        match unsafe { sys::cuEventQuery(self.raw.0) } {
            CUresult::CUDA_SUCCESS => Ok(true),
            CUresult::CUDA_ERROR_NOT_READY => Ok(false),
            e => check(e, "cuEventQuery").map(|_| false),
        }
    }

    /// Milliseconds from `self` to `end` (both recorded and completed).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        if !self.timing || !end.timing {
            return Err(crate::CudaError::Invalid(
                "elapsed time needs two events created with timing enabled".to_owned(),
            ));
        }
        self.device.bind()?;
        let mut ms = 0f32;
        // SAFETY: valid events; writes one float.
        check(
            unsafe { sys::cuEventElapsedTime(&mut ms, self.raw.0, end.raw.0) },
            "cuEventElapsedTime",
        )?;
        Ok(ms)
    }
}
