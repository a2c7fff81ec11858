//! The one error type of the runtime and its `Result` alias.

use cudarc::driver::sys::CUresult;
use std::ffi::CStr;

/// Everything that can go wrong in the runtime. `Launch` is the caller's
/// fault (a bad launch caught before the driver sees it); every other variant
/// comes from the environment or the driver.
#[derive(Debug, Clone, thiserror::Error)]
pub enum CudaError {
    /// `libcuda.so` could not be loaded: no NVIDIA driver on this machine.
    #[error("CUDA driver not available: {reason}")]
    NoDriver { reason: String },
    /// The driver loaded but there is no usable GPU (or not this ordinal).
    #[error("no CUDA device: {reason}")]
    NoDevice { reason: String },
    /// A driver call failed. `name` is the driver's error name (`CUDA_ERROR_...`).
    #[error("{call} failed: {name} ({code}): {message}")]
    Driver {
        call: &'static str,
        code: u32,
        name: String,
        message: String,
    },
    /// The driver JIT rejected PTX; `log` is the JIT's error log.
    #[error("loading module failed: {name}: {message}\nJIT log:\n{log}")]
    Jit {
        code: u32,
        name: String,
        message: String,
        log: String,
    },
    /// No kernel of this name in the module.
    #[error("kernel `{name}` not found in module{hint}")]
    KernelNotFound { name: String, hint: String },
    /// A launch was rejected before reaching the driver.
    #[error("{0}")]
    Launch(#[from] LaunchError),
    /// The memory pool's limit (or the device) cannot satisfy an allocation.
    #[error("out of device memory: requested {requested} bytes ({reason})")]
    OutOfMemory { requested: u64, reason: String },
    /// A caller passed something the runtime cannot use (bad size, shape, image).
    #[error("{0}")]
    Invalid(String),
    /// A tensor bound to a program buffer does not match its declaration.
    #[error("binding '{name}': {message}")]
    Binding { name: String, message: String },
}

impl CudaError {
    /// The driver's error name (`CUDA_ERROR_ILLEGAL_ADDRESS`, ...), where there is one.
    pub fn driver_error_name(&self) -> Option<&str> {
        match self {
            CudaError::Driver { name, .. } | CudaError::Jit { name, .. } => Some(name),
            _ => None,
        }
    }
}

/// A launch that would be invalid: wrong argument count or type, a block
/// larger than the device or the kernel allows, too much shared memory,
/// memory of the wrong device or on the host.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("launch of kernel `{kernel}` rejected: {message}")]
pub struct LaunchError {
    pub kernel: String,
    pub message: String,
}

impl LaunchError {
    pub fn new(kernel: &str, message: impl Into<String>) -> LaunchError {
        LaunchError {
            kernel: kernel.to_owned(),
            message: message.into(),
        }
    }
}

pub type Result<T, E = CudaError> = std::result::Result<T, E>;

/// Name and description the driver gives an error code.
pub(crate) fn describe(code: CUresult) -> (String, String) {
    let mut name: *const std::ffi::c_char = std::ptr::null();
    let mut msg: *const std::ffi::c_char = std::ptr::null();
    // SAFETY: both calls only write a pointer to a static string (or leave null);
    // the driver library is loaded, since a code could only come from it.
    unsafe {
        let _ = cudarc::driver::sys::cuGetErrorName(code, &mut name);
        let _ = cudarc::driver::sys::cuGetErrorString(code, &mut msg);
    }
    let to_string = |p: *const std::ffi::c_char, fallback: String| {
        if p.is_null() {
            fallback
        } else {
            // SAFETY: non-null pointers from cuGetError* are NUL-terminated statics.
            unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
        }
    };
    (
        to_string(name, format!("CUDA_ERROR_{}", code as u32)),
        to_string(msg, "unknown error".to_owned()),
    )
}

/// Turns a driver status into a `Result`, naming the call that failed.
#[inline]
pub(crate) fn check(code: CUresult, call: &'static str) -> Result<()> {
    if code == CUresult::CUDA_SUCCESS {
        Ok(())
    } else {
        Err(driver_error(code, call))
    }
}

#[cold]
pub(crate) fn driver_error(code: CUresult, call: &'static str) -> CudaError {
    let (name, message) = describe(code);
    CudaError::Driver {
        call,
        code: code as u32,
        name,
        message,
    }
}
