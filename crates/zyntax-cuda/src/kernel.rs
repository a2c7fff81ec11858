//! Kernels: parameter layouts, launch validation, argument marshalling, launch.

use crate::device::Device;
use crate::error::{check, CudaError, LaunchError, Result};
use crate::memory::DeviceBuffer;
use crate::module::{describe_params, Module};
use crate::stream::Stream;
use cudarc::driver::sys::{self, CUdeviceptr, CUfunction, CUfunction_attribute, CUstream};
use std::ffi::c_void;
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use zyntax_hir::{Function, ScalarType, Type};

/// How one kernel parameter is passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ParamKind {
    /// A device pointer; `elem` is the pointee's scalar type when known (HIR).
    Ptr { elem: Option<ScalarType> },
    /// A scalar of a known HIR type.
    Scalar(ScalarType),
    /// A scalar known only from PTX: `bytes` wide, float or integer. An
    /// 8-byte integer also accepts a device pointer (PTX cannot tell them apart).
    Raw { bytes: u32, float: bool },
    /// An aggregate passed by value, as raw bytes.
    Bytes(u32),
    /// A TMA tensor map (issue 13): 128 bytes by value (`__grid_constant__`).
    TensorMap,
}

impl ParamKind {
    /// Bytes the parameter occupies in the launch's parameter buffer.
    pub fn size(&self) -> u32 {
        match self {
            ParamKind::Ptr { .. } => 8,
            ParamKind::Scalar(s) => s.size_bytes() as u32,
            ParamKind::Raw { bytes, .. } | ParamKind::Bytes(bytes) => *bytes,
            ParamKind::TensorMap => zyntax_hir::tensormap::TENSORMAP_BYTES as u32,
        }
    }

    /// From an HIR parameter type; vectors, arrays and fragments cannot be
    /// kernel parameters.
    pub fn from_type(t: &Type) -> Result<ParamKind> {
        match t {
            Type::Scalar(s) => Ok(ParamKind::Scalar(*s)),
            Type::TensorMap => Ok(ParamKind::TensorMap),
            Type::Ptr(_, pointee) => Ok(ParamKind::Ptr {
                elem: match &**pointee {
                    Type::Array(e, _) => e.elem_scalar(),
                    other => other.elem_scalar(),
                },
            }),
            other => Err(CudaError::Invalid(format!(
                "kernel parameters of type {other} are not supported (scalars, pointers and tensor maps only)"
            ))),
        }
    }
}

impl fmt::Display for ParamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ParamKind::Ptr { elem: Some(e) } => write!(f, "ptr<{e}>"),
            ParamKind::Ptr { elem: None } => f.write_str("ptr"),
            ParamKind::Scalar(s) => write!(f, "{s}"),
            ParamKind::Raw { bytes, float } => {
                write!(f, "{}{}", if *float { "f" } else { "b" }, bytes * 8)
            }
            ParamKind::Bytes(n) => write!(f, "bytes[{n}]"),
            ParamKind::TensorMap => f.write_str("tensormap"),
        }
    }
}

/// What the runtime knows about a kernel's interface.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Signature {
    pub params: Vec<ParamKind>,
    /// Declared launch bounds (HIR `KernelInfo::max_threads`).
    pub max_threads: Option<[u32; 3]>,
    /// Dynamic shared bytes used when a launch does not say.
    pub shared_bytes: u32,
    /// Declared blocks per cluster (HIR `KernelInfo::cluster`).
    pub cluster: Option<[u32; 3]>,
    /// Whether the kernel (or a function it calls) uses `grid_sync`: it
    /// must be launched cooperatively.
    pub grid_sync: bool,
}

impl Signature {
    pub fn from_params(params: Vec<ParamKind>) -> Signature {
        Signature {
            params,
            ..Signature::default()
        }
    }

    /// From HIR parameter types.
    pub fn from_types(types: &[Type]) -> Result<Signature> {
        Ok(Signature::from_params(
            types
                .iter()
                .map(ParamKind::from_type)
                .collect::<Result<_>>()?,
        ))
    }

    /// From an HIR kernel: parameter types plus launch bounds and default
    /// dynamic shared memory from its `KernelInfo`.
    pub fn from_function(f: &Function) -> Result<Signature> {
        let info = f.kind.kernel_info().ok_or_else(|| {
            CudaError::Invalid(format!("`{}` is not a kernel entry point", f.name))
        })?;
        let mut s = Signature::from_types(&f.param_types())?;
        s.max_threads = info.max_threads;
        s.shared_bytes = info.shared_bytes;
        s.cluster = info.cluster;
        s.grid_sync = zyntax_hir::uses_grid_sync(None, f);
        Ok(s)
    }

    /// [`Signature::from_function`] for a kernel of `m`: `grid_sync` in the
    /// device functions it calls counts too.
    pub fn from_kernel(m: &zyntax_hir::Module, f: &Function) -> Result<Signature> {
        let mut s = Signature::from_function(f)?;
        s.grid_sync = zyntax_hir::uses_grid_sync(Some(m), f);
        Ok(s)
    }
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LaunchConfig {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

impl LaunchConfig {
    /// A 1-D launch covering `n` items with `block` threads per block.
    pub fn for_n(n: u64, block: u32) -> LaunchConfig {
        let block = block.max(1);
        let grid = n.div_ceil(u64::from(block)).clamp(1, u64::from(u32::MAX)) as u32;
        LaunchConfig {
            grid: [grid, 1, 1],
            block: [block, 1, 1],
            shared_bytes: 0,
        }
    }
}

/// Launch options beyond the grid (issue 13 items 4-5, issue 12 item 6),
/// passed to `cuLaunchKernelEx` as launch attributes.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Blocks per cluster (`CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION`, sm_90).
    pub cluster: Option<[u32; 3]>,
    /// Programmatic dependent launch
    /// (`CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION`, sm_90): the
    /// kernel may start before the previous one on the stream has finished;
    /// it waits for it with `griddepcontrol.wait`.
    pub pdl: bool,
    /// Cooperative launch (`CU_LAUNCH_ATTRIBUTE_COOPERATIVE`): every block is
    /// co-resident, as `grid_sync` needs.
    pub cooperative: bool,
}

/// Most blocks per cluster every sm_90 device runs (larger, up to
/// [`MAX_CLUSTER_NONPORTABLE`], needs the non-portable opt-in).
pub const MAX_CLUSTER_PORTABLE: u32 = 8;
pub const MAX_CLUSTER_NONPORTABLE: u32 = 16;

/// One argument, as the caller has it.
#[derive(Debug, Clone, Copy)]
pub enum KernelArg<'a> {
    Buffer(&'a DeviceBuffer),
    /// A raw device address; `device` and `elem` are checked when known.
    Ptr {
        ptr: CUdeviceptr,
        device: Option<u32>,
        elem: Option<ScalarType>,
    },
    Int(i128),
    Float(f64),
    Bool(bool),
    Bytes(&'a [u8]),
    /// A tensor map for a `tensormap` parameter (checked against the kernel's device).
    TensorMap(&'a crate::tensormap::TensorMap),
}

/// Attributes the driver reports for a compiled kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FuncAttrs {
    /// Most threads per block this kernel can launch with (launch bounds, registers).
    pub max_threads_per_block: u32,
    pub static_shared_bytes: u32,
    pub const_bytes: u32,
    pub local_bytes: u32,
    pub num_regs: u32,
    pub ptx_version: u32,
    pub binary_version: u32,
}

#[derive(Clone, Copy)]
pub(crate) struct RawFunc(pub(crate) CUfunction);
// SAFETY: function handles may be used from any thread.
unsafe impl Send for RawFunc {}
unsafe impl Sync for RawFunc {}

struct KernelInner {
    func: RawFunc,
    name: String,
    module: Module,
    sig: Signature,
    attrs: FuncAttrs,
    /// Offset of each parameter in 8-byte slots of the parameter buffer.
    slot_offsets: Vec<usize>,
    total_slots: usize,
    /// Current CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES.
    dyn_smem_limit: AtomicU32,
}

/// A kernel of a loaded module. Cheap to clone.
#[derive(Clone)]
pub struct Kernel {
    inner: Arc<KernelInner>,
}

impl fmt::Debug for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Kernel({}({}))",
            self.inner.name,
            describe_params(&self.inner.sig.params)
        )
    }
}

fn func_attr(f: CUfunction, a: CUfunction_attribute) -> Result<u32> {
    let mut v = 0;
    // SAFETY: valid function; writes one int.
    check(
        unsafe { sys::cuFuncGetAttribute(&mut v, a, f) },
        "cuFuncGetAttribute",
    )?;
    Ok(u32::try_from(v).unwrap_or(0))
}

/// Most parameters the stack fast path handles; more use a heap buffer.
pub const STACK_SLOTS: usize = 32;

impl Kernel {
    pub(crate) fn new(
        module: Module,
        name: String,
        f: CUfunction,
        sig: Signature,
    ) -> Result<Kernel> {
        use CUfunction_attribute as A;
        let attrs = FuncAttrs {
            max_threads_per_block: func_attr(f, A::CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
            static_shared_bytes: func_attr(f, A::CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES)?,
            const_bytes: func_attr(f, A::CU_FUNC_ATTRIBUTE_CONST_SIZE_BYTES)?,
            local_bytes: func_attr(f, A::CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES)?,
            num_regs: func_attr(f, A::CU_FUNC_ATTRIBUTE_NUM_REGS)?,
            ptx_version: func_attr(f, A::CU_FUNC_ATTRIBUTE_PTX_VERSION)?,
            binary_version: func_attr(f, A::CU_FUNC_ATTRIBUTE_BINARY_VERSION)?,
        };
        let dyn_limit = func_attr(f, A::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)?;
        let mut slot_offsets = Vec::with_capacity(sig.params.len());
        let mut total = 0usize;
        for p in &sig.params {
            slot_offsets.push(total);
            total += (p.size() as usize).div_ceil(8).max(1);
        }
        Ok(Kernel {
            inner: Arc::new(KernelInner {
                func: RawFunc(f),
                name,
                module,
                sig,
                attrs,
                slot_offsets,
                total_slots: total,
                dyn_smem_limit: AtomicU32::new(dyn_limit),
            }),
        })
    }

    pub fn name(&self) -> &str {
        &self.inner.name
    }
    pub fn signature(&self) -> &Signature {
        &self.inner.sig
    }
    pub fn params(&self) -> &[ParamKind] {
        &self.inner.sig.params
    }
    pub fn attrs(&self) -> &FuncAttrs {
        &self.inner.attrs
    }
    pub fn module(&self) -> &Module {
        &self.inner.module
    }
    pub fn device(&self) -> &Device {
        &self.inner.module.inner.device
    }
    pub fn raw(&self) -> CUfunction {
        self.inner.func.0
    }
    /// 8-byte slots the parameter buffer needs, and each parameter's offset.
    pub fn slot_layout(&self) -> (usize, &[usize]) {
        (self.inner.total_slots, &self.inner.slot_offsets)
    }

    fn err(&self, msg: impl Into<String>) -> LaunchError {
        LaunchError::new(&self.inner.name, msg)
    }

    /// Most threads per block a launch of this kernel may use on its device.
    pub fn max_block_threads(&self) -> u32 {
        self.inner
            .attrs
            .max_threads_per_block
            .min(self.device().props().max_threads_per_block)
    }

    /// Checks a launch configuration against the device's and the kernel's
    /// limits, and raises the kernel's dynamic shared memory limit above the
    /// default 48 KiB when the launch asks for more (and the device allows).
    pub fn check_config(&self, cfg: &LaunchConfig) -> Result<()> {
        let props = self.device().props();
        const AXES: [&str; 3] = ["x", "y", "z"];
        for (i, axis) in AXES.iter().enumerate() {
            if cfg.grid[i] == 0 || cfg.grid[i] > props.max_grid_dim[i] {
                return Err(self
                    .err(format!(
                        "grid {} = {} is outside 1..={} (device limit)",
                        axis, cfg.grid[i], props.max_grid_dim[i]
                    ))
                    .into());
            }
            if cfg.block[i] == 0 || cfg.block[i] > props.max_block_dim[i] {
                return Err(self
                    .err(format!(
                        "block {} = {} is outside 1..={} (device limit)",
                        axis, cfg.block[i], props.max_block_dim[i]
                    ))
                    .into());
            }
        }
        let threads = u64::from(cfg.block[0]) * u64::from(cfg.block[1]) * u64::from(cfg.block[2]);
        if threads > u64::from(props.max_threads_per_block) {
            return Err(self
                .err(format!(
                    "block of {threads} threads exceeds the device limit of {} threads per block",
                    props.max_threads_per_block
                ))
                .into());
        }
        if let Some(m) = self.inner.sig.max_threads {
            let declared = u64::from(m[0]) * u64::from(m[1]) * u64::from(m[2]);
            if (0..3).any(|i| cfg.block[i] > m[i]) || threads > declared {
                return Err(self
                    .err(format!(
                        "block ({}, {}, {}) exceeds the kernel's launch bounds max_threads ({}, {}, {})",
                        cfg.block[0], cfg.block[1], cfg.block[2], m[0], m[1], m[2]
                    ))
                    .into());
            }
        }
        if threads > u64::from(self.inner.attrs.max_threads_per_block) {
            return Err(self
                .err(format!(
                    "block of {threads} threads exceeds this kernel's limit of {} threads per block \
                     (set by its launch bounds and register use: {} registers per thread)",
                    self.inner.attrs.max_threads_per_block, self.inner.attrs.num_regs
                ))
                .into());
        }
        let stat = self.inner.attrs.static_shared_bytes;
        let total = u64::from(stat) + u64::from(cfg.shared_bytes);
        if total > u64::from(props.max_shared_per_block_optin) {
            return Err(self
                .err(format!(
                    "shared memory of {total} bytes ({stat} static + {} dynamic) exceeds the \
                     device limit of {} bytes per block",
                    cfg.shared_bytes, props.max_shared_per_block_optin
                ))
                .into());
        }
        if cfg.shared_bytes > self.inner.dyn_smem_limit.load(Ordering::Relaxed) {
            self.set_max_dynamic_shared(cfg.shared_bytes)?;
        }
        Ok(())
    }

    /// Checks the launch options against the kernel and the device before the
    /// driver sees them: `grid_sync` kernels need `cooperative` and a grid
    /// that fits co-resident; a cluster shape must match a declared one,
    /// divide the grid, have at most 16 blocks (above 8 the kernel is opted
    /// in to non-portable sizes) and fit the device; clusters and `pdl` need
    /// sm_90. Call after [`Kernel::check_config`].
    pub fn check_options(&self, cfg: &LaunchConfig, opts: &LaunchOptions) -> Result<()> {
        let sig = &self.inner.sig;
        if *opts == LaunchOptions::default() && !sig.grid_sync && sig.cluster.is_none() {
            return Ok(());
        }
        let props = self.device().props();
        let (major, minor) = props.compute_capability;
        if sig.grid_sync && !opts.cooperative {
            return Err(self
                .err("the kernel uses grid_sync: launch it with cooperative=True (all blocks co-resident)")
                .into());
        }
        if opts.pdl && major < 9 {
            return Err(self
                .err(format!(
                    "pdl needs compute capability 9.0 or newer; the device is {major}.{minor}"
                ))
                .into());
        }
        let cluster = match (sig.cluster, opts.cluster) {
            (Some(d), Some(c)) if d != c => {
                return Err(self
                    .err(format!(
                    "cluster ({}, {}, {}) differs from the kernel's declared cluster ({}, {}, {})",
                    c[0], c[1], c[2], d[0], d[1], d[2]
                ))
                    .into())
            }
            (d, c) => c.or(d),
        };
        if let Some(c) = cluster {
            self.check_cluster(cfg, c, opts.cluster.is_some())?;
        }
        if opts.cooperative {
            self.check_coresident(cfg)?;
        }
        Ok(())
    }

    fn check_cluster(&self, cfg: &LaunchConfig, c: [u32; 3], at_launch: bool) -> Result<()> {
        const AXES: [&str; 3] = ["x", "y", "z"];
        let (major, minor) = self.device().props().compute_capability;
        if major < 9 {
            return Err(self
                .err(format!(
                    "cluster needs compute capability 9.0 or newer; the device is {major}.{minor}"
                ))
                .into());
        }
        for (i, axis) in AXES.iter().enumerate() {
            if c[i] == 0 {
                return Err(self.err(format!("cluster {axis} = 0; at least 1")).into());
            }
            if !cfg.grid[i].is_multiple_of(c[i]) {
                return Err(self
                    .err(format!(
                        "grid {axis} = {} is not a multiple of cluster {axis} = {}",
                        cfg.grid[i], c[i]
                    ))
                    .into());
            }
        }
        let n = u64::from(c[0]) * u64::from(c[1]) * u64::from(c[2]);
        if n > u64::from(MAX_CLUSTER_NONPORTABLE) {
            return Err(self
                .err(format!(
                    "cluster of {n} blocks exceeds the largest cluster ({MAX_CLUSTER_NONPORTABLE} blocks, \
                     above {MAX_CLUSTER_PORTABLE} non-portable)"
                ))
                .into());
        }
        if n > u64::from(MAX_CLUSTER_PORTABLE) {
            self.device().bind()?;
            // SAFETY: valid function handle; sets one int attribute.
            check(
                unsafe {
                    sys::cuFuncSetAttribute(
                        self.inner.func.0,
                        CUfunction_attribute::CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED,
                        1,
                    )
                },
                "cuFuncSetAttribute(NON_PORTABLE_CLUSTER_SIZE_ALLOWED)",
            )?;
        }
        if !at_launch {
            return Ok(()); // a declared shape: the driver checks it at load
        }
        // Whether one cluster of this shape fits an SM group at all.
        if self.max_active_clusters(cfg, c)? < 1 {
            return Err(self
                .err(format!(
                    "cluster of {n} blocks of {} threads and {} bytes of dynamic shared memory \
                     cannot be resident on this device (cuOccupancyMaxActiveClusters = 0)",
                    cfg.block[0] * cfg.block[1] * cfg.block[2],
                    cfg.shared_bytes
                ))
                .into());
        }
        Ok(())
    }

    /// How many clusters of `c` blocks of `cfg`'s block shape and dynamic
    /// shared memory can be resident at once (`cuOccupancyMaxActiveClusters`):
    /// the grid of a persistent cluster kernel.
    pub fn max_active_clusters(&self, cfg: &LaunchConfig, c: [u32; 3]) -> Result<u32> {
        let mut attr = cluster_attr(c);
        let lc = sys::CUlaunchConfig {
            gridDimX: cfg.grid[0],
            gridDimY: cfg.grid[1],
            gridDimZ: cfg.grid[2],
            blockDimX: cfg.block[0],
            blockDimY: cfg.block[1],
            blockDimZ: cfg.block[2],
            sharedMemBytes: cfg.shared_bytes,
            hStream: std::ptr::null_mut(),
            attrs: &mut attr,
            numAttrs: 1,
        };
        let mut clusters = 0i32;
        self.device().bind()?;
        // SAFETY: `lc` and the attribute it points to live for the call.
        check(
            unsafe { sys::cuOccupancyMaxActiveClusters(&mut clusters, self.inner.func.0, &lc) },
            "cuOccupancyMaxActiveClusters",
        )?;
        Ok(clusters.max(0) as u32)
    }

    /// Whether every block of the grid can be resident at once (cooperative launch).
    fn check_coresident(&self, cfg: &LaunchConfig) -> Result<()> {
        let threads = cfg.block[0] * cfg.block[1] * cfg.block[2];
        let mut per_sm = 0i32;
        self.device().bind()?;
        // SAFETY: valid function handle; writes one int.
        check(
            unsafe {
                sys::cuOccupancyMaxActiveBlocksPerMultiprocessor(
                    &mut per_sm,
                    self.inner.func.0,
                    threads as i32,
                    cfg.shared_bytes as usize,
                )
            },
            "cuOccupancyMaxActiveBlocksPerMultiprocessor",
        )?;
        let sms = u64::from(self.device().props().sm_count);
        let fits = u64::try_from(per_sm).unwrap_or(0) * sms;
        let blocks = u64::from(cfg.grid[0]) * u64::from(cfg.grid[1]) * u64::from(cfg.grid[2]);
        if blocks > fits {
            return Err(self
                .err(format!(
                    "cooperative grid of {blocks} blocks is too large: at most {fits} blocks of \
                     {threads} threads can be co-resident ({per_sm} per SM x {sms} SMs)"
                ))
                .into());
        }
        Ok(())
    }

    /// [`Kernel::launch`] with launch options.
    ///
    /// # Safety
    /// As [`Kernel::launch`].
    pub unsafe fn launch_with(
        &self,
        cfg: &LaunchConfig,
        opts: &LaunchOptions,
        stream: Option<&Stream>,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        self.check_config(cfg)?;
        self.check_options(cfg, opts)?;
        let mut pb = self.marshal(args)?;
        self.launch_raw_with(
            cfg,
            opts,
            stream_raw(self.device(), stream)?,
            pb.as_mut_ptr(),
        )
    }

    /// [`Kernel::launch_raw`] with launch options: `cuLaunchKernelEx` with
    /// one attribute per option (plain `cuLaunchKernel` without any).
    ///
    /// # Safety
    /// As [`Kernel::launch_raw`]; `opts` checked by [`Kernel::check_options`].
    pub unsafe fn launch_raw_with(
        &self,
        cfg: &LaunchConfig,
        opts: &LaunchOptions,
        stream: CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        if *opts == LaunchOptions::default() {
            return self.launch_raw(cfg, stream, params);
        }
        use sys::CUlaunchAttributeID as Id;
        let mut attrs = Vec::with_capacity(3);
        if let Some(c) = opts.cluster {
            attrs.push(cluster_attr(c));
        }
        if opts.pdl {
            let mut a: sys::CUlaunchAttribute = std::mem::zeroed();
            a.id = Id::CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            a.value.programmaticStreamSerializationAllowed = 1;
            attrs.push(a);
        }
        if opts.cooperative {
            let mut a: sys::CUlaunchAttribute = std::mem::zeroed();
            a.id = Id::CU_LAUNCH_ATTRIBUTE_COOPERATIVE;
            a.value.cooperative = 1;
            attrs.push(a);
        }
        let lc = sys::CUlaunchConfig {
            gridDimX: cfg.grid[0],
            gridDimY: cfg.grid[1],
            gridDimZ: cfg.grid[2],
            blockDimX: cfg.block[0],
            blockDimY: cfg.block[1],
            blockDimZ: cfg.block[2],
            sharedMemBytes: cfg.shared_bytes,
            hStream: stream,
            attrs: attrs.as_mut_ptr(),
            numAttrs: attrs.len() as u32,
        };
        self.device().bind()?;
        check(
            sys::cuLaunchKernelEx(&lc, self.inner.func.0, params, std::ptr::null_mut()),
            "cuLaunchKernelEx",
        )
    }

    /// Raises (or lowers) `CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES`.
    pub fn set_max_dynamic_shared(&self, bytes: u32) -> Result<()> {
        self.device().bind()?;
        let v = i32::try_from(bytes)
            .map_err(|_| CudaError::Invalid(format!("{bytes} bytes of shared memory")))?;
        // SAFETY: valid function; the value was checked against the device limit by callers.
        check(
            unsafe {
                sys::cuFuncSetAttribute(
                    self.inner.func.0,
                    CUfunction_attribute::CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                    v,
                )
            },
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)",
        )?;
        self.inner.dyn_smem_limit.store(bytes, Ordering::Relaxed);
        Ok(())
    }

    /// Encodes argument `index` into `slots` (the whole parameter buffer),
    /// checking it against the parameter's kind.
    #[inline]
    pub fn encode_arg(
        &self,
        index: usize,
        arg: KernelArg<'_>,
        slots: &mut [u64],
    ) -> Result<(), LaunchError> {
        let kind = &self.inner.sig.params[index];
        let off = self.inner.slot_offsets[index];
        match encode(kind, arg, &mut slots[off..], self.device().ordinal()) {
            Ok(()) => Ok(()),
            Err(m) => Err(self.err(format!("argument #{index} ({kind}): {m}"))),
        }
    }

    /// Checks argument count and encodes all arguments into an owned buffer.
    pub fn marshal(&self, args: &[KernelArg<'_>]) -> Result<ParamBuffer, LaunchError> {
        self.check_arg_count(args.len())?;
        let mut slots = vec![0u64; self.inner.total_slots];
        for (i, a) in args.iter().enumerate() {
            self.encode_arg(i, *a, &mut slots)?;
        }
        Ok(ParamBuffer::new(slots, &self.inner.slot_offsets))
    }

    #[inline]
    pub fn check_arg_count(&self, n: usize) -> Result<(), LaunchError> {
        let want = self.inner.sig.params.len();
        if n != want {
            return Err(self.err(format!(
                "expected {want} argument(s) ({}), got {n}",
                describe_params(&self.inner.sig.params)
            )));
        }
        Ok(())
    }

    /// Validates `cfg` and `args`, then queues the kernel on `stream` (the
    /// legacy default stream when `None`). Returns as soon as it is queued.
    ///
    /// # Safety
    /// 1. The kernel reads and writes whatever its pointer arguments address:
    ///    every buffer passed must be large enough for the indices the kernel
    ///    computes from `cfg` and its scalar arguments.
    /// 2. Buffers must stay alive until the launch has run (synchronize the
    ///    stream or record an event before dropping them, when they were
    ///    allocated on another stream; see [`crate::memory`]).
    /// 3. Concurrent launches on other streams must not race on the same memory.
    pub unsafe fn launch(
        &self,
        cfg: &LaunchConfig,
        stream: Option<&Stream>,
        args: &[KernelArg<'_>],
    ) -> Result<()> {
        self.check_config(cfg)?;
        self.check_options(cfg, &LaunchOptions::default())?;
        self.check_arg_count(args.len())?;
        let n = self.inner.total_slots;
        if n <= STACK_SLOTS {
            let mut slots = [0u64; STACK_SLOTS];
            for (i, a) in args.iter().enumerate() {
                self.encode_arg(i, *a, &mut slots)?;
            }
            let mut ptrs = [std::ptr::null_mut::<c_void>(); STACK_SLOTS];
            for (i, off) in self.inner.slot_offsets.iter().enumerate() {
                ptrs[i] = slots.as_mut_ptr().add(*off).cast();
            }
            self.launch_raw(cfg, stream_raw(self.device(), stream)?, ptrs.as_mut_ptr())
        } else {
            let mut pb = self.marshal(args)?;
            self.launch_raw(cfg, stream_raw(self.device(), stream)?, pb.as_mut_ptr())
        }
    }

    /// Queues the kernel with an already encoded parameter array. Does not
    /// validate `cfg` or the parameters (see [`Kernel::check_config`]).
    ///
    /// # Safety
    /// Everything [`Kernel::launch`] requires, plus: `params` points to one
    /// pointer per kernel parameter, each to a value of the parameter's size,
    /// valid for the duration of this call (the driver copies them); `stream`
    /// belongs to this kernel's device (or is null).
    #[inline]
    pub unsafe fn launch_raw(
        &self,
        cfg: &LaunchConfig,
        stream: CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        if crate::profile::enabled() {
            return self.launch_profiled(cfg, stream, params);
        }
        self.launch_unprofiled(cfg, stream, params)
    }

    #[cold]
    unsafe fn launch_profiled(
        &self,
        cfg: &LaunchConfig,
        stream: CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        use crate::profile::{span, ArgValue, DeviceTimer};
        let name = self.name();
        let mut host = span("launch", || format!("launch {name}"));
        let timer = DeviceTimer::start(self.device(), stream);
        let r = self.launch_unprofiled(cfg, stream, params);
        let args = vec![
            ("grid", ArgValue::Str(format!("{:?}", cfg.grid))),
            ("block", ArgValue::Str(format!("{:?}", cfg.block))),
            ("shared_bytes", ArgValue::Int(i64::from(cfg.shared_bytes))),
        ];
        if let Some(t) = timer {
            t.finish("kernel", name.to_owned(), args.clone());
        }
        if let Some(h) = host.as_mut() {
            h.args = args;
        }
        r
    }

    #[inline]
    unsafe fn launch_unprofiled(
        &self,
        cfg: &LaunchConfig,
        stream: CUstream,
        params: *mut *mut c_void,
    ) -> Result<()> {
        self.device().bind()?;
        check(
            sys::cuLaunchKernel(
                self.inner.func.0,
                cfg.grid[0],
                cfg.grid[1],
                cfg.grid[2],
                cfg.block[0],
                cfg.block[1],
                cfg.block[2],
                cfg.shared_bytes,
                stream,
                params,
                std::ptr::null_mut(),
            ),
            "cuLaunchKernel",
        )
    }
}

/// The cluster-dimension launch attribute.
fn cluster_attr(c: [u32; 3]) -> sys::CUlaunchAttribute {
    // SAFETY: a plain C struct/union; all-zero is a valid value.
    let mut a: sys::CUlaunchAttribute = unsafe { std::mem::zeroed() };
    a.id = sys::CUlaunchAttributeID::CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION;
    a.value.clusterDim.x = c[0];
    a.value.clusterDim.y = c[1];
    a.value.clusterDim.z = c[2];
    a
}

/// The stream handle for a launch, checking the stream's device.
pub(crate) fn stream_raw(device: &Device, stream: Option<&Stream>) -> Result<CUstream> {
    match stream {
        None => Ok(std::ptr::null_mut()),
        Some(s) if s.device() == device => Ok(s.raw()),
        Some(s) => Err(CudaError::Invalid(format!(
            "stream belongs to device {}, kernel to device {}",
            s.device().ordinal(),
            device.ordinal()
        ))),
    }
}

/// An encoded parameter array that owns its storage (for graph updates and
/// launches with many parameters).
pub struct ParamBuffer {
    slots: Vec<u64>,
    offsets: Vec<usize>,
    ptrs: Vec<*mut c_void>,
}

// SAFETY: the pointers point into the buffer's own heap storage (`slots`),
// which moves with it; nothing is shared.
unsafe impl Send for ParamBuffer {}
unsafe impl Sync for ParamBuffer {}

impl ParamBuffer {
    fn new(slots: Vec<u64>, offsets: &[usize]) -> ParamBuffer {
        let mut pb = ParamBuffer {
            slots,
            offsets: offsets.to_vec(),
            ptrs: Vec::new(),
        };
        pb.refresh();
        pb
    }
    fn refresh(&mut self) {
        let base = self.slots.as_mut_ptr();
        // SAFETY: every offset is inside `slots` (computed from the same layout).
        self.ptrs = self
            .offsets
            .iter()
            .map(|o| unsafe { base.add(*o) }.cast::<c_void>())
            .collect();
    }
    /// The `void**` the driver takes.
    pub fn as_mut_ptr(&mut self) -> *mut *mut c_void {
        self.ptrs.as_mut_ptr()
    }
}

/// Whether memory of element type `have` may be passed where the kernel
/// expects a pointer to `want`: the same type, integers of the same width
/// (signedness is the kernel's view of the bits), or bools as bytes.
pub fn elem_compatible(want: ScalarType, have: ScalarType) -> bool {
    want == have
        || (want.is_int() && have.is_int() && want.size_bytes() == have.size_bytes())
        || (matches!(want, ScalarType::U8 | ScalarType::I8) && have == ScalarType::Bool)
}

fn int_range(s: ScalarType) -> (i128, i128) {
    let bits = s.bits();
    if s.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

fn put(dst: &mut [u64], bytes: &[u8]) {
    let mut buf = [0u8; 8];
    buf[..bytes.len()].copy_from_slice(bytes);
    dst[0] = u64::from_le_bytes(buf);
}

fn encode(
    kind: &ParamKind,
    arg: KernelArg<'_>,
    dst: &mut [u64],
    device: u32,
) -> Result<(), String> {
    match (kind, arg) {
        (
            ParamKind::Ptr { .. }
            | ParamKind::Raw {
                bytes: 8,
                float: false,
            },
            KernelArg::Buffer(b),
        ) => {
            if b.device().ordinal() != device {
                return Err(format!(
                    "buffer is on device {}, the kernel runs on device {device}",
                    b.device().ordinal()
                ));
            }
            dst[0] = b.ptr();
            Ok(())
        }
        (
            ParamKind::Ptr { .. }
            | ParamKind::Raw {
                bytes: 8,
                float: false,
            },
            KernelArg::Ptr {
                ptr,
                device: dev,
                elem: have,
            },
        ) => {
            if let Some(d) = dev {
                if d != device {
                    return Err(format!(
                        "memory is on device {d}, the kernel runs on device {device}"
                    ));
                }
            }
            if let (Some(w), Some(h)) = (elem_of(kind), have) {
                if !elem_compatible(w, h) {
                    return Err(format!("memory holds {h} elements, the kernel expects {w}"));
                }
            }
            dst[0] = ptr;
            Ok(())
        }
        (ParamKind::Ptr { .. }, KernelArg::Int(v)) => {
            // A raw address (e.g. 0 for null); the caller vouches for it.
            let v = u64::try_from(v).map_err(|_| format!("{v} is not a device address"))?;
            dst[0] = v;
            Ok(())
        }
        (ParamKind::Ptr { .. }, other) => {
            Err(format!("expected device memory, got {}", arg_name(&other)))
        }
        (ParamKind::Scalar(s), arg) => encode_scalar(*s, arg, dst),
        (ParamKind::Raw { bytes, float: true }, arg) => {
            let s = match bytes {
                2 => ScalarType::F16,
                4 => ScalarType::F32,
                8 => ScalarType::F64,
                _ => return Err(format!("unsupported float width {bytes}")),
            };
            encode_scalar(s, arg, dst)
        }
        (
            ParamKind::Raw {
                bytes,
                float: false,
            },
            arg,
        ) => {
            let (s_signed, s_unsigned) = match bytes {
                1 => (ScalarType::I8, ScalarType::U8),
                2 => (ScalarType::I16, ScalarType::U16),
                4 => (ScalarType::I32, ScalarType::U32),
                8 => (ScalarType::I64, ScalarType::U64),
                _ => return Err(format!("unsupported integer width {bytes}")),
            };
            match arg {
                // PTX does not say the signedness: accept the union of both ranges.
                KernelArg::Int(v) if v < 0 => encode_scalar(s_signed, arg, dst),
                KernelArg::Bool(b) if *bytes == 1 => {
                    encode_scalar(ScalarType::U8, KernelArg::Int(i128::from(b)), dst)
                }
                _ => encode_scalar(s_unsigned, arg, dst),
            }
        }
        (ParamKind::Bytes(n), KernelArg::Bytes(b)) => {
            if b.len() != *n as usize {
                return Err(format!("expected {n} bytes, got {}", b.len()));
            }
            for (i, chunk) in b.chunks(8).enumerate() {
                put(&mut dst[i..], chunk);
            }
            Ok(())
        }
        (ParamKind::Bytes(n), other) => {
            Err(format!("expected {n} raw bytes, got {}", arg_name(&other)))
        }
        (ParamKind::TensorMap, KernelArg::TensorMap(t)) => {
            if t.device() != device {
                return Err(format!(
                    "the tensor map describes memory on device {}, the kernel runs on device {device}",
                    t.device()
                ));
            }
            for (i, chunk) in t.bytes().chunks(8).enumerate() {
                put(&mut dst[i..], chunk);
            }
            Ok(())
        }
        (ParamKind::TensorMap, other) => Err(format!(
            "expected a tensor map (zyntax.cuda.TensorMap), got {}",
            arg_name(&other)
        )),
    }
}

fn elem_of(kind: &ParamKind) -> Option<ScalarType> {
    match kind {
        ParamKind::Ptr { elem } => *elem,
        _ => None,
    }
}

fn arg_name(a: &KernelArg<'_>) -> &'static str {
    match a {
        KernelArg::Buffer(_) | KernelArg::Ptr { .. } => "device memory",
        KernelArg::Int(_) => "an integer",
        KernelArg::Float(_) => "a float",
        KernelArg::Bool(_) => "a bool",
        KernelArg::Bytes(_) => "raw bytes",
        KernelArg::TensorMap(_) => "a tensor map",
    }
}

fn encode_scalar(s: ScalarType, arg: KernelArg<'_>, dst: &mut [u64]) -> Result<(), String> {
    match arg {
        KernelArg::Bool(b) if s == ScalarType::Bool => {
            put(dst, &[u8::from(b)]);
            Ok(())
        }
        KernelArg::Int(v) if s.is_int() => {
            let (lo, hi) = int_range(s);
            if v < lo || v > hi {
                return Err(format!("{v} does not fit {s} ({lo}..={hi})"));
            }
            let le = (v as i64).to_le_bytes();
            put(dst, &le[..s.size_bytes() as usize]);
            Ok(())
        }
        KernelArg::Int(v) if s.is_float() => encode_float(s, v as f64, dst),
        KernelArg::Float(f) if s.is_float() => encode_float(s, f, dst),
        other => Err(format!(
            "expected a value of type {s}, got {}",
            arg_name(&other)
        )),
    }
}

fn encode_float(s: ScalarType, f: f64, dst: &mut [u64]) -> Result<(), String> {
    match s {
        ScalarType::F64 => dst[0] = f.to_bits(),
        ScalarType::F32 => put(dst, &(f as f32).to_le_bytes()),
        ScalarType::F16 => put(dst, &half::f16::from_f64(f).to_le_bytes()),
        ScalarType::BF16 => put(dst, &half::bf16::from_f64(f).to_le_bytes()),
        other => return Err(format!("{other} is not a float type")),
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn enc(kind: ParamKind, arg: KernelArg<'_>) -> Result<u64, String> {
        let mut d = [0u64; 4];
        encode(&kind, arg, &mut d, 0).map(|_| d[0])
    }

    #[test]
    fn scalars_encode_little_endian_with_range_checks() {
        assert_eq!(
            enc(ParamKind::Scalar(ScalarType::I32), KernelArg::Int(-2)),
            Ok(0xffff_fffe)
        );
        assert!(enc(ParamKind::Scalar(ScalarType::I32), KernelArg::Int(1 << 31)).is_err());
        assert!(enc(ParamKind::Scalar(ScalarType::U8), KernelArg::Int(-1)).is_err());
        assert_eq!(
            enc(
                ParamKind::Scalar(ScalarType::U64),
                KernelArg::Int(u64::MAX.into())
            ),
            Ok(u64::MAX)
        );
        assert_eq!(
            enc(ParamKind::Scalar(ScalarType::F32), KernelArg::Float(1.5)),
            Ok(u64::from(1.5f32.to_bits()))
        );
        assert_eq!(
            enc(ParamKind::Scalar(ScalarType::F16), KernelArg::Float(1.0)),
            Ok(0x3c00)
        );
        assert_eq!(
            enc(ParamKind::Scalar(ScalarType::BF16), KernelArg::Int(1)),
            Ok(0x3f80)
        );
        assert_eq!(
            enc(ParamKind::Scalar(ScalarType::Bool), KernelArg::Bool(true)),
            Ok(1)
        );
        assert!(enc(ParamKind::Scalar(ScalarType::I32), KernelArg::Float(1.0)).is_err());
        assert!(enc(ParamKind::Scalar(ScalarType::Bool), KernelArg::Int(1)).is_err());
    }

    #[test]
    fn pointers_check_device_and_element_type() {
        let p = |device, elem| KernelArg::Ptr {
            ptr: 0xdead_0000,
            device,
            elem,
        };
        let f32p = ParamKind::Ptr {
            elem: Some(ScalarType::F32),
        };
        assert_eq!(
            enc(f32p.clone(), p(Some(0), Some(ScalarType::F32))),
            Ok(0xdead_0000)
        );
        let e = enc(f32p.clone(), p(Some(1), Some(ScalarType::F32))).unwrap_err();
        assert!(e.contains("device 1"), "{e}");
        let e = enc(f32p.clone(), p(Some(0), Some(ScalarType::F64))).unwrap_err();
        assert!(e.contains("f64"), "{e}");
        assert!(enc(f32p.clone(), KernelArg::Float(1.0)).is_err());
        // Integers of one width are interchangeable; byte pointers take bools.
        let i32p = ParamKind::Ptr {
            elem: Some(ScalarType::I32),
        };
        assert!(enc(i32p, p(None, Some(ScalarType::U32))).is_ok());
        let u8p = ParamKind::Ptr {
            elem: Some(ScalarType::U8),
        };
        assert!(enc(u8p.clone(), p(None, Some(ScalarType::Bool))).is_ok());
        assert!(enc(u8p.clone(), p(None, Some(ScalarType::U16))).is_err());
        assert!(enc(u8p, p(None, Some(ScalarType::F64))).is_err());
        // PTX-only 8-byte integer params take pointers or integers.
        let raw = ParamKind::Raw {
            bytes: 8,
            float: false,
        };
        assert_eq!(enc(raw.clone(), p(Some(0), None)), Ok(0xdead_0000));
        assert_eq!(enc(raw, KernelArg::Int(-1)), Ok(u64::MAX));
    }

    #[test]
    fn raw_params_follow_ptx_width() {
        let f4 = ParamKind::Raw {
            bytes: 4,
            float: true,
        };
        assert_eq!(
            enc(f4, KernelArg::Float(2.0)),
            Ok(u64::from(2.0f32.to_bits()))
        );
        let b4 = ParamKind::Raw {
            bytes: 4,
            float: false,
        };
        assert_eq!(enc(b4.clone(), KernelArg::Int(-1)), Ok(0xffff_ffff));
        assert_eq!(
            enc(b4.clone(), KernelArg::Int(0xffff_ffff)),
            Ok(0xffff_ffff)
        );
        assert!(enc(b4, KernelArg::Int(1 << 32)).is_err());
    }

    #[test]
    fn signature_from_hir_types() {
        use zyntax_hir::AddrSpace;
        let s = Signature::from_types(&[
            Type::ptr(AddrSpace::Global, Type::F32),
            Type::F32,
            Type::U32,
        ])
        .unwrap();
        assert_eq!(
            s.params,
            vec![
                ParamKind::Ptr {
                    elem: Some(ScalarType::F32)
                },
                ParamKind::Scalar(ScalarType::F32),
                ParamKind::Scalar(ScalarType::U32),
            ]
        );
        assert!(Signature::from_types(&[Type::Vector(ScalarType::F32, 4)]).is_err());
    }
}
