//! Driver initialisation, devices and their primary contexts.

use crate::error::{check, CudaError, Result};
use crate::memory::Pool;
use cudarc::driver::sys::{self, CUcontext, CUdevice, CUdevice_attribute, CUresult};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Set to `1` to make the runtime behave as if no driver were installed
/// (lets CPU-only tests exercise the "no GPU" path on a GPU machine).
pub const DISABLE_ENV: &str = "ZYNTAX_DISABLE_CUDA";

/// Loads `libcuda` and runs `cuInit` once per process; later calls return the
/// first outcome.
pub fn init() -> Result<()> {
    static INIT: OnceLock<Result<()>> = OnceLock::new();
    INIT.get_or_init(|| {
        if std::env::var(DISABLE_ENV).is_ok_and(|v| v == "1") {
            return Err(CudaError::NoDriver {
                reason: format!("disabled by {DISABLE_ENV}=1"),
            });
        }
        // SAFETY: only tries dlopen on the candidate names; no symbol is called.
        // Checked first because every later sys call would panic without the library.
        if !unsafe { sys::is_culib_present() } {
            return Err(CudaError::NoDriver {
                reason: "libcuda.so could not be loaded (is the NVIDIA driver installed? \
                         set LD_LIBRARY_PATH to the directory holding libcuda.so.1)"
                    .to_owned(),
            });
        }
        // SAFETY: cuInit has no preconditions.
        let rc = unsafe { sys::cuInit(0) };
        match rc {
            CUresult::CUDA_SUCCESS => Ok(()),
            CUresult::CUDA_ERROR_NO_DEVICE => Err(CudaError::NoDevice {
                reason: "the NVIDIA driver reports no CUDA-capable device".to_owned(),
            }),
            other => Err(crate::error::driver_error(other, "cuInit")),
        }
    })
    .clone()
}

/// Whether a driver and at least one device are usable.
pub fn is_available() -> bool {
    device_count().is_ok_and(|n| n > 0)
}

/// Number of CUDA devices.
pub fn device_count() -> Result<u32> {
    init()?;
    let mut n = 0;
    // SAFETY: writes one int.
    check(unsafe { sys::cuDeviceGetCount(&mut n) }, "cuDeviceGetCount")?;
    Ok(u32::try_from(n).unwrap_or(0))
}

/// Driver version as `(major, minor)`, e.g. `(13, 0)`.
pub fn driver_version() -> Result<(u32, u32)> {
    init()?;
    let mut v = 0;
    // SAFETY: writes one int.
    check(
        unsafe { sys::cuDriverGetVersion(&mut v) },
        "cuDriverGetVersion",
    )?;
    let v = u32::try_from(v).unwrap_or(0);
    Ok((v / 1000, (v % 1000) / 10))
}

/// What a device can do; read once when the device is first opened.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceProps {
    pub name: String,
    pub compute_capability: (u32, u32),
    pub sm_count: u32,
    pub max_threads_per_block: u32,
    pub max_block_dim: [u32; 3],
    pub max_grid_dim: [u32; 3],
    /// Shared memory a block gets without opting in (48 KiB).
    pub max_shared_per_block: u32,
    /// Shared memory a block can get after raising the kernel's dynamic limit.
    pub max_shared_per_block_optin: u32,
    pub max_shared_per_sm: u32,
    pub max_registers_per_block: u32,
    pub warp_size: u32,
    pub total_memory: u64,
    pub clock_rate_khz: u32,
    pub memory_clock_rate_khz: u32,
    pub memory_bus_width: u32,
    pub l2_cache_bytes: u32,
}

#[derive(Clone, Copy)]
pub(crate) struct Ctx(pub(crate) CUcontext);
// SAFETY: a CUcontext handle may be used from any thread (the driver is thread-safe);
// it is only an identifier here.
unsafe impl Send for Ctx {}
unsafe impl Sync for Ctx {}

pub(crate) struct DeviceInner {
    pub(crate) ordinal: u32,
    pub(crate) dev: CUdevice,
    pub(crate) ctx: Ctx,
    pub(crate) props: DeviceProps,
    pub(crate) pool: Pool,
}

/// One GPU with its primary context (shared with every other driver-API or
/// runtime-API user in the process, e.g. PyTorch and CuPy). Cheap to clone.
#[derive(Clone)]
pub struct Device {
    pub(crate) inner: Arc<DeviceInner>,
}

impl std::fmt::Debug for Device {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Device({}, {:?}, sm_{}{})",
            self.inner.ordinal,
            self.inner.props.name,
            self.inner.props.compute_capability.0,
            self.inner.props.compute_capability.1
        )
    }
}

impl PartialEq for Device {
    fn eq(&self, other: &Device) -> bool {
        self.inner.ordinal == other.inner.ordinal
    }
}
impl Eq for Device {}

fn attr(dev: CUdevice, a: CUdevice_attribute) -> Result<u32> {
    let mut v = 0;
    // SAFETY: writes one int; `dev` came from cuDeviceGet.
    check(
        unsafe { sys::cuDeviceGetAttribute(&mut v, a, dev) },
        "cuDeviceGetAttribute",
    )?;
    Ok(u32::try_from(v).unwrap_or(0))
}

fn read_props(dev: CUdevice) -> Result<DeviceProps> {
    use CUdevice_attribute as A;
    let mut name = [0 as std::ffi::c_char; 256];
    // SAFETY: the buffer is 256 bytes and the length says so.
    check(
        unsafe { sys::cuDeviceGetName(name.as_mut_ptr(), 256, dev) },
        "cuDeviceGetName",
    )?;
    // SAFETY: cuDeviceGetName NUL-terminates within the given length; the last
    // byte is still 0 from initialisation in any case.
    let name = unsafe { std::ffi::CStr::from_ptr(name.as_ptr()) }
        .to_string_lossy()
        .into_owned();
    let mut total = 0usize;
    // SAFETY: writes one size_t.
    check(
        unsafe { sys::cuDeviceTotalMem_v2(&mut total, dev) },
        "cuDeviceTotalMem",
    )?;
    Ok(DeviceProps {
        name,
        compute_capability: (
            attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)?,
            attr(dev, A::CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)?,
        ),
        sm_count: attr(dev, A::CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT)?,
        max_threads_per_block: attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK)?,
        max_block_dim: [
            attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X)?,
            attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y)?,
            attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z)?,
        ],
        max_grid_dim: [
            attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X)?,
            attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y)?,
            attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z)?,
        ],
        max_shared_per_block: attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK)?,
        max_shared_per_block_optin: attr(
            dev,
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
        )?,
        max_shared_per_sm: attr(
            dev,
            A::CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_MULTIPROCESSOR,
        )?,
        max_registers_per_block: attr(dev, A::CU_DEVICE_ATTRIBUTE_MAX_REGISTERS_PER_BLOCK)?,
        warp_size: attr(dev, A::CU_DEVICE_ATTRIBUTE_WARP_SIZE)?,
        total_memory: total as u64,
        clock_rate_khz: attr(dev, A::CU_DEVICE_ATTRIBUTE_CLOCK_RATE)?,
        memory_clock_rate_khz: attr(dev, A::CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE)?,
        memory_bus_width: attr(dev, A::CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH)?,
        l2_cache_bytes: attr(dev, A::CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)?,
    })
}

impl Device {
    /// Opens device `ordinal` (retaining its primary context once per process).
    pub fn get(ordinal: u32) -> Result<Device> {
        static DEVICES: OnceLock<Mutex<HashMap<u32, Device>>> = OnceLock::new();
        init()?;
        let map = DEVICES.get_or_init(|| Mutex::new(HashMap::new()));
        let mut map = map.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(d) = map.get(&ordinal) {
            return Ok(d.clone());
        }
        let count = device_count()?;
        if ordinal >= count {
            return Err(CudaError::NoDevice {
                reason: format!("device {ordinal} requested but only {count} device(s) present"),
            });
        }
        let mut dev: CUdevice = 0;
        // SAFETY: ordinal < device count.
        check(
            unsafe { sys::cuDeviceGet(&mut dev, ordinal as i32) },
            "cuDeviceGet",
        )?;
        let mut ctx: CUcontext = std::ptr::null_mut();
        // SAFETY: retained for the life of the process (never released): devices
        // are process-global and other libraries share the same primary context.
        check(
            unsafe { sys::cuDevicePrimaryCtxRetain(&mut ctx, dev) },
            "cuDevicePrimaryCtxRetain",
        )?;
        let props = read_props(dev)?;
        let d = Device {
            inner: Arc::new(DeviceInner {
                ordinal,
                dev,
                ctx: Ctx(ctx),
                props,
                pool: Pool::new(),
            }),
        };
        map.insert(ordinal, d.clone());
        Ok(d)
    }

    pub fn ordinal(&self) -> u32 {
        self.inner.ordinal
    }

    pub fn props(&self) -> &DeviceProps {
        &self.inner.props
    }

    /// The raw `CUdevice` handle.
    pub fn raw_device(&self) -> CUdevice {
        self.inner.dev
    }

    /// The raw `CUcontext` (the device's primary context).
    pub fn raw_context(&self) -> CUcontext {
        self.inner.ctx.0
    }

    /// Makes this device's primary context current on the calling thread.
    ///
    /// Checked against `cuCtxGetCurrent` every time (cheap: thread-local in the
    /// driver) rather than cached, because other libraries in the process may
    /// switch the current context behind our back.
    #[inline]
    pub fn bind(&self) -> Result<()> {
        let mut cur: CUcontext = std::ptr::null_mut();
        // SAFETY: writes one handle.
        check(unsafe { sys::cuCtxGetCurrent(&mut cur) }, "cuCtxGetCurrent")?;
        if cur != self.inner.ctx.0 {
            // SAFETY: the context is retained for the process lifetime.
            check(
                unsafe { sys::cuCtxSetCurrent(self.inner.ctx.0) },
                "cuCtxSetCurrent",
            )?;
        }
        Ok(())
    }

    /// Waits for all work on this device (every stream) to finish.
    pub fn synchronize(&self) -> Result<()> {
        self.bind()?;
        // SAFETY: a context is current.
        check(unsafe { sys::cuCtxSynchronize() }, "cuCtxSynchronize")
    }

    /// Free and total device memory in bytes (as the driver sees it).
    pub fn mem_info(&self) -> Result<(u64, u64)> {
        self.bind()?;
        let (mut free, mut total) = (0usize, 0usize);
        // SAFETY: writes two size_t; a context is current.
        check(
            unsafe { sys::cuMemGetInfo_v2(&mut free, &mut total) },
            "cuMemGetInfo",
        )?;
        Ok((free as u64, total as u64))
    }

    /// `"sm_90"` style name of the device's architecture.
    pub fn arch_name(&self) -> String {
        let (ma, mi) = self.inner.props.compute_capability;
        format!("sm_{ma}{mi}")
    }
}
