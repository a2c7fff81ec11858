//! # zyntax-cuda
//!
//! The CUDA driver runtime of zyntax, on [`cudarc`]'s driver bindings with
//! dynamic loading: this crate builds and links on machines without CUDA,
//! and every entry point returns [`CudaError::NoDriver`] /
//! [`CudaError::NoDevice`] there instead of failing to load or panicking.
//!
//! | module | what |
//! | --- | --- |
//! | [`bundle`] | AOT bundles (fatbin/cubin + JSON manifest): checks, SASS-or-PTX choice, load |
//! | [`device`] | `cuInit`, devices, primary contexts, properties |
//! | [`module`] | PTX/cubin/fatbin loading (JIT log in errors), process-wide module cache |
//! | [`kernel`] | parameter layouts (HIR or PTX), launch validation, marshalling, launch |
//! | [`memory`] | caching pool with size classes, stats and a limit; pinned memory; copies |
//! | [`stream`] | streams, events, capture |
//! | [`profile`] | trace recording (launches with device time, copies, allocations, module loads), NVTX |
//! | [`program`] | programs of launches over named buffers: validation, liveness planning, graph capture and replay |
//! | [`graph`] | graphs: instantiate, replay, update kernel arguments; they own the memory they touch |
//! | [`keep`] | `KeepAlive` owners that keep memory alive while queued or captured work may use it |
//!
//! ```no_run
//! use zyntax_cuda::{Device, DeviceBuffer, KernelArg, LaunchConfig, Module};
//! # fn main() -> zyntax_cuda::Result<()> {
//! # let ptx = "";
//! let dev = Device::get(0)?;
//! let module = Module::load_ptx(&dev, ptx)?;
//! let saxpy = module.kernel("saxpy", None)?; // parameters from the PTX
//! let x = DeviceBuffer::from_slice(&dev, &[1.0f32; 1024])?;
//! let y = DeviceBuffer::from_slice(&dev, &[2.0f32; 1024])?;
//! let cfg = LaunchConfig::for_n(1024, 256);
//! // SAFETY: saxpy touches n elements of x and y, both of which hold 1024.
//! unsafe {
//!     saxpy.launch(&cfg, None, &[KernelArg::Buffer(&x), KernelArg::Buffer(&y),
//!                               KernelArg::Float(3.0), KernelArg::Int(1024)])?;
//! }
//! let out: Vec<f32> = y.to_vec()?; // synchronous copy back
//! # Ok(()) }
//! ```

pub mod bundle;
pub mod device;
pub mod error;
pub mod graph;
pub mod keep;
pub mod kernel;
pub mod memory;
pub mod module;
pub mod profile;
pub mod program;
pub mod stream;
pub mod tensormap;

/// The raw driver API (cudarc's dynamically loaded bindings), for callers
/// that need a call this crate does not wrap. Call [`init`] first.
pub use cudarc::driver::sys as cudarc_sys;
pub use cudarc::driver::sys::{CUdeviceptr, CUstream};

/// Turns a raw driver status into a [`Result`] naming `call`.
pub fn check_driver(code: cudarc_sys::CUresult, call: &'static str) -> Result<()> {
    error::check(code, call)
}
pub use bundle::{Bundle, LoadedFrom};
pub use device::{device_count, driver_version, init, is_available, Device, DeviceProps};
pub use error::{CudaError, LaunchError, Result};
pub use graph::{Graph, GraphExec};
pub use keep::KeepAlive;
pub use kernel::{
    elem_compatible, FuncAttrs, Kernel, KernelArg, LaunchConfig, LaunchOptions, ParamKind,
    Signature,
};
pub use memory::{
    size_class, Advice, DeviceBuffer, DeviceRepr, HostRegistration, Location, ManagedBuffer,
    PinnedBuffer, Pool, PoolStats,
};
pub use module::{
    clear_module_cache, module_cache_len, parse_ptx_entries, Global, ImageKind, Module,
};
pub use program::{
    Access, Binding, ExecOptions, Executor, MemoryPlan, Program, ProgramSpec, Role, StepArg,
};
pub use stream::{CaptureMode, Event, Stream};
pub use tensormap::TensorMap;

/// One argument of [`quick_run`]: a host buffer (copied to the device before
/// the launch and back into the same `Vec` after it) or a scalar.
#[derive(Debug, Clone, PartialEq)]
pub enum QuickArg {
    Buffer(Vec<u8>),
    Int(i128),
    Float(f64),
    Bool(bool),
}

/// Options of [`quick_run_with`].
#[derive(Debug, Clone, Default)]
pub struct QuickRunOptions {
    pub device: u32,
    pub shared_bytes: u32,
    /// The kernel's HIR signature (stricter checks); from the PTX when `None`.
    pub signature: Option<Signature>,
}

/// What a [`quick_run`] measured.
#[derive(Debug, Clone, PartialEq)]
pub struct QuickRunReport {
    pub device_name: String,
    /// Kernel time between two events around the launch, in milliseconds.
    pub kernel_ms: f32,
}

/// Loads `ptx`, launches `kernel` once on device 0 over `grid` x `block`,
/// and copies every [`QuickArg::Buffer`] back. For the CLI and scripts.
pub fn quick_run(
    ptx: &str,
    kernel: &str,
    grid: [u32; 3],
    block: [u32; 3],
    args: &mut [QuickArg],
) -> Result<QuickRunReport> {
    quick_run_with(ptx, kernel, grid, block, &QuickRunOptions::default(), args)
}

/// [`quick_run`] with a device, dynamic shared memory and a signature.
pub fn quick_run_with(
    ptx: &str,
    kernel: &str,
    grid: [u32; 3],
    block: [u32; 3],
    opts: &QuickRunOptions,
    args: &mut [QuickArg],
) -> Result<QuickRunReport> {
    let dev = Device::get(opts.device)?;
    let module = Module::load_ptx(&dev, ptx)?;
    let k = module.kernel(kernel, opts.signature.clone())?;
    let stream = Stream::new(&dev, false)?;
    let mut bufs = Vec::new();
    for a in args.iter() {
        if let QuickArg::Buffer(v) = a {
            let b = DeviceBuffer::alloc(&dev, v.len() as u64, Some(&stream))?;
            b.copy_from_host(v, Some(&stream))?;
            bufs.push(Some(b));
        } else {
            bufs.push(None);
        }
    }
    let kargs: Vec<KernelArg<'_>> = args
        .iter()
        .zip(&bufs)
        .map(|(a, b)| match (a, b) {
            (_, Some(b)) => KernelArg::Buffer(b),
            (QuickArg::Int(v), _) => KernelArg::Int(*v),
            (QuickArg::Float(v), _) => KernelArg::Float(*v),
            (QuickArg::Bool(v), _) => KernelArg::Bool(*v),
            // Buffers always have a device copy (pushed above).
            (QuickArg::Buffer(_), None) => KernelArg::Int(0),
        })
        .collect();
    let cfg = LaunchConfig {
        grid,
        block,
        shared_bytes: opts.shared_bytes,
    };
    let (start, end) = (Event::new(&dev, true)?, Event::new(&dev, true)?);
    start.record(&stream)?;
    // SAFETY: every pointer argument is a buffer sized by the caller for this
    // kernel (the CLI's contract), alive until the synchronize below.
    unsafe { k.launch(&cfg, Some(&stream), &kargs)? };
    end.record(&stream)?;
    stream.synchronize()?;
    for (a, b) in args.iter_mut().zip(&bufs) {
        if let (QuickArg::Buffer(v), Some(b)) = (a, b) {
            b.copy_to_host(v, Some(&stream))?;
        }
    }
    Ok(QuickRunReport {
        device_name: dev.props().name.clone(),
        kernel_ms: start.elapsed_ms(&end)?,
    })
}
