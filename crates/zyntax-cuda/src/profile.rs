//! A trace recorder: while [`start`]ed, the runtime records module loads and
//! cache hits, kernel launches and graph replays (host time, and device time
//! from events), copies, allocations and the pool's memory over time. [`stop`]
//! returns the events; `zyntax.profile` writes them as Chrome-trace JSON.
//!
//! When `libnvToolsExt.so.1` (NVTX) can be loaded at run time, the same host
//! operations are also pushed as NVTX ranges, so Nsight Systems shows them;
//! without it nothing changes. Disabled, every hook is one relaxed atomic load.

use crate::device::Device;
use crate::stream::Event;
use cudarc::driver::sys::{self, CUstream};
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Instant;

static ENABLED: AtomicBool = AtomicBool::new(false);

/// Where an event is drawn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Track {
    /// The host thread that did the work (a small per-process thread number).
    Host(u64),
    /// A stream of a device.
    Device { ordinal: u32, stream: usize },
}

/// A value attached to an event.
#[derive(Debug, Clone, PartialEq)]
pub enum ArgValue {
    Int(i64),
    Float(f64),
    Str(String),
}

/// One trace event: a span (`ph == 'X'`), an instant (`'i'`) or a counter (`'C'`).
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    pub ph: char,
    pub cat: &'static str,
    pub name: String,
    /// Microseconds since [`start`].
    pub ts_us: f64,
    pub dur_us: f64,
    pub track: Track,
    pub args: Vec<(&'static str, ArgValue)>,
}

struct Pending {
    name: String,
    cat: &'static str,
    ordinal: u32,
    stream: usize,
    start: Event,
    end: Event,
    args: Vec<(&'static str, ArgValue)>,
}

struct Recorder {
    t0: Instant,
    events: Vec<TraceEvent>,
    pending: Vec<Pending>,
    /// Per device: an event completed at a known host time.
    anchors: HashMap<u32, (Event, f64)>,
}

fn state() -> &'static Mutex<Option<Recorder>> {
    static S: OnceLock<Mutex<Option<Recorder>>> = OnceLock::new();
    S.get_or_init(|| Mutex::new(None))
}

fn lock() -> std::sync::MutexGuard<'static, Option<Recorder>> {
    state().lock().unwrap_or_else(|p| p.into_inner())
}

/// Whether a recording is running.
#[inline]
pub fn enabled() -> bool {
    ENABLED.load(Ordering::Relaxed)
}

/// Starts a recording (discarding any unfinished one).
pub fn start() {
    *lock() = Some(Recorder {
        t0: Instant::now(),
        events: Vec::new(),
        pending: Vec::new(),
        anchors: HashMap::new(),
    });
    ENABLED.store(true, Ordering::Relaxed);
}

/// Microseconds since [`start`] (0 when not recording).
pub fn now_us() -> f64 {
    lock()
        .as_ref()
        .map_or(0.0, |r| r.t0.elapsed().as_secs_f64() * 1e6)
}

fn thread_id() -> u64 {
    use std::sync::atomic::AtomicU64;
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local!(static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed));
    ID.with(|i| *i)
}

/// Ends the recording: waits for the device work it timed and returns every
/// event, ordered by time.
pub fn stop() -> Vec<TraceEvent> {
    ENABLED.store(false, Ordering::Relaxed);
    let Some(mut r) = lock().take() else {
        return Vec::new();
    };
    for p in std::mem::take(&mut r.pending) {
        let Some((anchor, anchor_us)) = r.anchors.get(&p.ordinal) else {
            continue;
        };
        // A timing that cannot be read (e.g. recorded inside a capture) is dropped.
        let times = p
            .end
            .synchronize()
            .and_then(|()| Ok((anchor.elapsed_ms(&p.start)?, p.start.elapsed_ms(&p.end)?)));
        if let Ok((from_anchor, dur)) = times {
            r.events.push(TraceEvent {
                ph: 'X',
                cat: p.cat,
                name: p.name,
                ts_us: anchor_us + f64::from(from_anchor) * 1e3,
                dur_us: f64::from(dur) * 1e3,
                track: Track::Device {
                    ordinal: p.ordinal,
                    stream: p.stream,
                },
                args: p.args,
            });
        }
    }
    r.events.sort_by(|a, b| a.ts_us.total_cmp(&b.ts_us));
    r.events
}

fn push(ev: TraceEvent) {
    if let Some(r) = lock().as_mut() {
        r.events.push(ev);
    }
}

/// Records an event made elsewhere (e.g. a compile timed by Python).
pub fn record(ev: TraceEvent) {
    push(ev);
}

/// A host span, recorded when dropped (and an NVTX range while it lives).
pub struct Span {
    cat: &'static str,
    name: String,
    start_us: f64,
    pub args: Vec<(&'static str, ArgValue)>,
    nvtx: bool,
}

/// Starts a host span when recording.
#[inline]
pub fn span(cat: &'static str, name: impl FnOnce() -> String) -> Option<Span> {
    if !enabled() {
        return None;
    }
    let name = name();
    let nvtx = nvtx::push(&name);
    Some(Span {
        cat,
        name,
        start_us: now_us(),
        args: Vec::new(),
        nvtx,
    })
}

impl Span {
    pub fn arg(&mut self, key: &'static str, v: ArgValue) {
        self.args.push((key, v));
    }
}

impl Drop for Span {
    fn drop(&mut self) {
        if self.nvtx {
            nvtx::pop();
        }
        let end = now_us();
        push(TraceEvent {
            ph: 'X',
            cat: self.cat,
            name: std::mem::take(&mut self.name),
            ts_us: self.start_us,
            dur_us: (end - self.start_us).max(0.0),
            track: Track::Host(thread_id()),
            args: std::mem::take(&mut self.args),
        });
    }
}

/// Records an instant event when recording.
pub fn instant(cat: &'static str, name: &str, args: Vec<(&'static str, ArgValue)>) {
    if enabled() {
        push(TraceEvent {
            ph: 'i',
            cat,
            name: name.to_owned(),
            ts_us: now_us(),
            dur_us: 0.0,
            track: Track::Host(thread_id()),
            args,
        });
    }
}

/// Records a counter sample (e.g. the pool's bytes) when recording.
pub fn counter(name: &str, values: Vec<(&'static str, ArgValue)>) {
    if enabled() {
        push(TraceEvent {
            ph: 'C',
            cat: "memory",
            name: name.to_owned(),
            ts_us: now_us(),
            dur_us: 0.0,
            track: Track::Host(0),
            args: values,
        });
    }
}

/// Device-side timing of work queued on `stream`: [`DeviceTimer::start`]
/// records an event before it, [`DeviceTimer::finish`] one after.
pub struct DeviceTimer {
    device: Device,
    stream: CUstream,
    start: Event,
}

impl DeviceTimer {
    /// `None` when not recording, when the stream is capturing (events
    /// inside a capture are graph nodes, not timestamps) or on any failure:
    /// profiling never makes an operation fail.
    pub(crate) fn start(device: &Device, stream: CUstream) -> Option<DeviceTimer> {
        if !enabled() {
            return None;
        }
        let mut st = sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE;
        // SAFETY: a stream handle of this device (or the legacy stream); writes one enum.
        let rc = unsafe { sys::cuStreamIsCapturing(stream, &mut st) };
        if rc != sys::CUresult::CUDA_SUCCESS
            || st != sys::CUstreamCaptureStatus::CU_STREAM_CAPTURE_STATUS_NONE
        {
            return None;
        }
        ensure_anchor(device, stream)?;
        let start = Event::new(device, true).ok()?;
        // SAFETY: as above.
        unsafe { start.record_raw(stream) }.ok()?;
        Some(DeviceTimer {
            device: device.clone(),
            stream,
            start,
        })
    }

    pub(crate) fn finish(
        self,
        cat: &'static str,
        name: String,
        args: Vec<(&'static str, ArgValue)>,
    ) {
        let Ok(end) = Event::new(&self.device, true) else {
            return;
        };
        // SAFETY: the stream the start event was recorded on.
        if unsafe { end.record_raw(self.stream) }.is_err() {
            return;
        }
        if let Some(r) = lock().as_mut() {
            r.pending.push(Pending {
                name,
                cat,
                ordinal: self.device.ordinal(),
                stream: self.stream as usize,
                start: self.start,
                end,
                args,
            });
        }
    }
}

/// Records the device's time reference on `stream` (not capturing) and waits
/// for it, so later events convert to host time.
fn ensure_anchor(device: &Device, stream: CUstream) -> Option<()> {
    if lock()
        .as_ref()
        .is_some_and(|r| r.anchors.contains_key(&device.ordinal()))
    {
        return Some(());
    }
    let e = Event::new(device, true).ok()?;
    // SAFETY: a valid stream of this device (checked not capturing).
    unsafe { e.record_raw(stream) }.ok()?;
    e.synchronize().ok()?;
    let at = now_us();
    lock().as_mut()?.anchors.insert(device.ordinal(), (e, at));
    Some(())
}

/// NVTX ranges through `libnvToolsExt.so.1`, loaded on first use if present.
mod nvtx {
    use std::ffi::{c_char, c_int, CString};
    use std::sync::OnceLock;

    struct Nvtx {
        _lib: libloading::Library,
        push: unsafe extern "C" fn(*const c_char) -> c_int,
        pop: unsafe extern "C" fn() -> c_int,
    }

    fn lib() -> Option<&'static Nvtx> {
        static L: OnceLock<Option<Nvtx>> = OnceLock::new();
        L.get_or_init(|| {
            for name in ["libnvToolsExt.so.1", "libnvToolsExt.so"] {
                // SAFETY: loading NVTX runs no initialisers with preconditions;
                // the symbols have the C signatures declared here.
                unsafe {
                    let Ok(lib) = libloading::Library::new(name) else {
                        continue;
                    };
                    let push = lib
                        .get::<unsafe extern "C" fn(*const c_char) -> c_int>(b"nvtxRangePushA\0")
                        .map(|s| *s);
                    let pop = lib
                        .get::<unsafe extern "C" fn() -> c_int>(b"nvtxRangePop\0")
                        .map(|s| *s);
                    if let (Ok(push), Ok(pop)) = (push, pop) {
                        return Some(Nvtx {
                            _lib: lib,
                            push,
                            pop,
                        });
                    }
                }
            }
            None
        })
        .as_ref()
    }

    /// Whether the NVTX library was found.
    pub fn available() -> bool {
        lib().is_some()
    }

    pub(super) fn push(name: &str) -> bool {
        let Some(l) = lib() else { return false };
        let Ok(c) = CString::new(name) else {
            return false;
        };
        // SAFETY: a NUL-terminated string that outlives the call.
        unsafe { (l.push)(c.as_ptr()) };
        true
    }

    pub(super) fn pop() {
        if let Some(l) = lib() {
            // SAFETY: pops the range pushed by the matching `push`.
            unsafe { (l.pop)() };
        }
    }
}

/// Whether NVTX ranges are emitted (the library was found at run time).
pub fn nvtx_available() -> bool {
    nvtx::available()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_instants_and_counters_are_recorded_in_time_order() {
        assert!(span("x", || "ignored".to_owned()).is_none());
        start();
        {
            let mut s = span("compile", || "outer".to_owned()).unwrap();
            s.arg("bytes", ArgValue::Int(12));
            instant("module", "cache hit", vec![]);
            counter("pool", vec![("in_use_bytes", ArgValue::Int(512))]);
        }
        let ev = stop();
        assert!(!enabled());
        let names: Vec<&str> = ev.iter().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["outer", "cache hit", "pool"]);
        assert_eq!(ev[0].ph, 'X');
        assert!(ev[0].dur_us >= 0.0);
        assert_eq!(ev[0].args, vec![("bytes", ArgValue::Int(12))]);
        assert!(ev.windows(2).all(|w| w[0].ts_us <= w[1].ts_us));
        assert!(stop().is_empty());
    }
}
