//! Device memory (a caching pool with size classes, stats and a limit),
//! pinned host memory, and copies.
//!
//! Pool reuse is stream-ordered: a freed block goes back to a free list keyed
//! by (size class, stream it was allocated on) and is only handed out again
//! for allocations on that same stream, so work still queued there that uses
//! the old block runs before any new use. Dropping a stream synchronizes it
//! and moves its cached blocks to the legacy default stream's lists. Using a block on another stream and
//! dropping it while that work is pending is the caller's responsibility
//! (synchronize first), as with PyTorch's caching allocator.

use crate::device::Device;
use crate::error::{check, CudaError, Result};
use crate::stream::Stream;
use cudarc::driver::sys::{self, CUdeviceptr, CUresult};
use std::collections::HashMap;
use std::sync::Mutex;

/// Smallest block the pool hands out (also the alignment every block has).
pub const MIN_BLOCK: u64 = 512;

/// The size class a request of `bytes` is served from: at least 512 bytes,
/// then rounded up to a quarter of its power of two (at most 25% waste).
pub fn size_class(bytes: u64) -> u64 {
    if bytes <= MIN_BLOCK {
        return MIN_BLOCK;
    }
    let pow = 1u64 << (63 - bytes.leading_zeros()); // largest power of two <= bytes
    let step = (pow / 4).max(MIN_BLOCK);
    bytes.div_ceil(step).saturating_mul(step)
}

/// Counters of one device's pool (bytes are size-class bytes).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PoolStats {
    /// Bytes handed out and not yet freed.
    pub in_use_bytes: u64,
    /// Bytes held in free lists for reuse.
    pub cached_bytes: u64,
    pub peak_in_use_bytes: u64,
    pub allocs: u64,
    pub frees: u64,
    pub cache_hits: u64,
    pub cache_misses: u64,
    /// `cuMemAlloc` / `cuMemFree` calls made.
    pub driver_allocs: u64,
    pub driver_frees: u64,
    /// Cap on in-use plus cached bytes, if set.
    pub limit: Option<u64>,
}

#[derive(Default)]
struct PoolState {
    free: HashMap<(u64, usize), Vec<CUdeviceptr>>,
    stats: PoolStats,
}

/// The per-device caching allocator (see the module docs).
pub struct Pool {
    state: Mutex<PoolState>,
}

impl Pool {
    pub(crate) fn new() -> Pool {
        Pool {
            state: Mutex::new(PoolState::default()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, PoolState> {
        // A panic while holding the lock cannot leave counters half-updated in
        // a way that matters more than losing the pool, so recover the guard.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> PoolStats {
        self.lock().stats
    }

    /// Frees every cached block (needs `device` bound).
    fn release_cached(st: &mut PoolState) {
        for (_, ptrs) in st.free.drain() {
            for p in ptrs {
                // SAFETY: the block came from cuMemAlloc and is not in use.
                unsafe {
                    let _ = sys::cuMemFree_v2(p);
                }
                st.stats.driver_frees += 1;
            }
        }
        st.stats.cached_bytes = 0;
    }

    fn alloc(&self, device: &Device, bytes: u64, stream_key: usize) -> Result<(CUdeviceptr, u64)> {
        let class = size_class(bytes);
        let mut st = self.lock();
        if let Some(p) = st.free.get_mut(&(class, stream_key)).and_then(Vec::pop) {
            st.stats.cached_bytes -= class;
            st.stats.cache_hits += 1;
            Self::count_alloc(&mut st.stats, class);
            return Ok((p, class));
        }
        st.stats.cache_misses += 1;
        device.bind()?;
        if let Some(limit) = st.stats.limit {
            if st.stats.in_use_bytes + class > limit {
                return Err(CudaError::OutOfMemory {
                    requested: bytes,
                    reason: format!(
                        "memory pool limit of {limit} bytes reached: {} bytes in use",
                        st.stats.in_use_bytes
                    ),
                });
            }
            if st.stats.in_use_bytes + st.stats.cached_bytes + class > limit {
                Self::release_cached(&mut st);
            }
        }
        let mut p: CUdeviceptr = 0;
        // SAFETY: a context is current; writes one pointer.
        let mut rc = unsafe { sys::cuMemAlloc_v2(&mut p, class as usize) };
        if rc == CUresult::CUDA_ERROR_OUT_OF_MEMORY && st.stats.cached_bytes > 0 {
            Self::release_cached(&mut st);
            // SAFETY: as above.
            rc = unsafe { sys::cuMemAlloc_v2(&mut p, class as usize) };
        }
        if rc == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(CudaError::OutOfMemory {
                requested: bytes,
                reason: format!(
                    "the device has no {class} free bytes left ({} bytes in use by this pool)",
                    st.stats.in_use_bytes
                ),
            });
        }
        check(rc, "cuMemAlloc")?;
        st.stats.driver_allocs += 1;
        crate::profile::instant(
            "memory",
            "cuMemAlloc",
            vec![("bytes", crate::profile::ArgValue::Int(class as i64))],
        );
        Self::count_alloc(&mut st.stats, class);
        Ok((p, class))
    }

    fn count_alloc(s: &mut PoolStats, class: u64) {
        s.allocs += 1;
        s.in_use_bytes += class;
        s.peak_in_use_bytes = s.peak_in_use_bytes.max(s.in_use_bytes);
        Self::trace(s);
    }

    /// The memory timeline of a profile: the pool's bytes after each change.
    fn trace(s: &PoolStats) {
        if crate::profile::enabled() {
            use crate::profile::ArgValue::Int;
            crate::profile::counter(
                "memory pool",
                vec![
                    ("in_use_bytes", Int(s.in_use_bytes as i64)),
                    ("cached_bytes", Int(s.cached_bytes as i64)),
                ],
            );
        }
    }

    fn free(&self, device: &Device, ptr: CUdeviceptr, class: u64, stream_key: usize) {
        let mut st = self.lock();
        st.stats.frees += 1;
        st.stats.in_use_bytes = st.stats.in_use_bytes.saturating_sub(class);
        let over = st
            .stats
            .limit
            .is_some_and(|l| st.stats.in_use_bytes + st.stats.cached_bytes + class > l);
        if over {
            if device.bind().is_ok() {
                // SAFETY: block from cuMemAlloc, no longer referenced.
                unsafe {
                    let _ = sys::cuMemFree_v2(ptr);
                }
                st.stats.driver_frees += 1;
            }
            Self::trace(&st.stats);
            return;
        }
        st.stats.cached_bytes += class;
        st.free.entry((class, stream_key)).or_default().push(ptr);
        Self::trace(&st.stats);
    }

    /// Moves the cached blocks of a stream that is going away to the legacy
    /// default stream's free lists, so they stay reusable (and a new stream
    /// that gets the same handle cannot pick up blocks with pending work).
    /// The caller has synchronized the stream, so the blocks are idle.
    pub(crate) fn retire_stream(&self, stream_key: usize) {
        if stream_key == 0 {
            return;
        }
        let mut st = self.lock();
        let keys: Vec<(u64, usize)> = st
            .free
            .keys()
            .filter(|k| k.1 == stream_key)
            .copied()
            .collect();
        for k in keys {
            if let Some(mut blocks) = st.free.remove(&k) {
                st.free.entry((k.0, 0)).or_default().append(&mut blocks);
            }
        }
    }

    /// Caps in-use plus cached bytes (`None`: no cap); trims the cache to fit.
    pub fn set_limit(&self, device: &Device, limit: Option<u64>) -> Result<()> {
        let mut st = self.lock();
        st.stats.limit = limit;
        if let Some(l) = limit {
            if st.stats.in_use_bytes + st.stats.cached_bytes > l {
                device.bind()?;
                Self::release_cached(&mut st);
            }
        }
        Ok(())
    }

    /// Returns every cached block to the driver.
    pub fn empty_cache(&self, device: &Device) -> Result<()> {
        device.bind()?;
        // cuMemFree of a block whose last use is still queued is unsafe in
        // general; synchronizing first makes emptying the cache always safe.
        device.synchronize()?;
        let mut st = self.lock();
        Self::release_cached(&mut st);
        Ok(())
    }
}

impl Device {
    pub fn pool(&self) -> &Pool {
        &self.inner.pool
    }
    pub fn memory_stats(&self) -> PoolStats {
        self.inner.pool.stats()
    }
    pub fn set_memory_limit(&self, limit: Option<u64>) -> Result<()> {
        self.inner.pool.set_limit(self, limit)
    }
    pub fn empty_cache(&self) -> Result<()> {
        self.inner.pool.empty_cache(self)
    }
}

/// Plain old data that may be copied bytewise to and from the device.
///
/// # Safety
/// Implementors must have no padding, no pointers to host memory and accept
/// every bit pattern.
pub unsafe trait DeviceRepr: Copy + Send + Sync + 'static {}
macro_rules! device_repr {
    ($($t:ty),*) => { $(
        // SAFETY: primitive numbers: no padding, every bit pattern valid.
        unsafe impl DeviceRepr for $t {}
    )* };
}
device_repr!(
    u8,
    i8,
    u16,
    i16,
    u32,
    i32,
    u64,
    i64,
    f32,
    f64,
    half::f16,
    half::bf16
);

/// A block of device memory from the pool; returned to the pool on drop.
pub struct DeviceBuffer {
    ptr: CUdeviceptr,
    bytes: u64,
    class: u64,
    stream_key: usize,
    device: Device,
}

impl std::fmt::Debug for DeviceBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "DeviceBuffer({:#x}, {} bytes, device {})",
            self.ptr,
            self.bytes,
            self.device.ordinal()
        )
    }
}

impl Drop for DeviceBuffer {
    fn drop(&mut self) {
        self.device
            .inner
            .pool
            .free(&self.device, self.ptr, self.class, self.stream_key);
    }
}

impl DeviceBuffer {
    /// `bytes` of uninitialised device memory, ordered on `stream` (legacy
    /// default stream if `None`) for pool reuse.
    pub fn alloc(device: &Device, bytes: u64, stream: Option<&Stream>) -> Result<DeviceBuffer> {
        let key = stream.map_or(0, Stream::handle);
        let (ptr, class) = device.inner.pool.alloc(device, bytes, key)?;
        Ok(DeviceBuffer {
            ptr,
            bytes,
            class,
            stream_key: key,
            device: device.clone(),
        })
    }

    /// `bytes` of zeroed device memory (the memset is queued on `stream`).
    pub fn zeroed(device: &Device, bytes: u64, stream: Option<&Stream>) -> Result<DeviceBuffer> {
        let b = DeviceBuffer::alloc(device, bytes, stream)?;
        b.memset_async(0, stream)?;
        Ok(b)
    }

    /// A buffer holding a copy of `data` (synchronous).
    pub fn from_slice<T: DeviceRepr>(device: &Device, data: &[T]) -> Result<DeviceBuffer> {
        let bytes = std::mem::size_of_val(data);
        let b = DeviceBuffer::alloc(device, bytes as u64, None)?;
        // SAFETY: T is plain data, so its bytes are initialised.
        let raw = unsafe { std::slice::from_raw_parts(data.as_ptr().cast::<u8>(), bytes) };
        b.copy_from_host(raw, None)?;
        Ok(b)
    }

    /// Copies the buffer back into a `Vec<T>` (synchronous; the length is
    /// `len_bytes / size_of::<T>()`).
    pub fn to_vec<T: DeviceRepr + Default>(&self) -> Result<Vec<T>> {
        let n = self.bytes as usize / std::mem::size_of::<T>().max(1);
        let mut v = vec![T::default(); n];
        let bytes = n * std::mem::size_of::<T>();
        // SAFETY: T accepts every bit pattern (DeviceRepr), `v` has `bytes` bytes.
        let raw = unsafe { std::slice::from_raw_parts_mut(v.as_mut_ptr().cast::<u8>(), bytes) };
        self.copy_to_host(raw, None)?;
        Ok(v)
    }

    #[inline]
    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    /// Requested size in bytes (the block may be larger).
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
    pub fn device(&self) -> &Device {
        &self.device
    }

    fn raw_stream(stream: Option<&Stream>) -> sys::CUstream {
        stream.map_or(std::ptr::null_mut(), Stream::raw)
    }

    fn check_len(&self, offset: u64, len: u64, what: &str) -> Result<()> {
        if offset.checked_add(len).is_none_or(|end| end > self.bytes) {
            return Err(CudaError::Invalid(format!(
                "{what}: {len} bytes at offset {offset} do not fit a buffer of {} bytes",
                self.bytes
            )));
        }
        Ok(())
    }

    /// Sets every byte to `value` (queued on `stream`).
    pub fn memset_async(&self, value: u8, stream: Option<&Stream>) -> Result<()> {
        self.device.bind()?;
        // SAFETY: the whole range belongs to this buffer.
        check(
            unsafe {
                sys::cuMemsetD8Async(
                    self.ptr,
                    value,
                    self.bytes as usize,
                    Self::raw_stream(stream),
                )
            },
            "cuMemsetD8Async",
        )
    }

    /// Copies `src` into the start of the buffer and waits for the copy.
    pub fn copy_from_host(&self, src: &[u8], stream: Option<&Stream>) -> Result<()> {
        // SAFETY: `src` lives until we return, and we synchronize before returning.
        unsafe { self.copy_from_host_async(0, src.as_ptr(), src.len() as u64, stream)? };
        sync(&self.device, stream)
    }

    /// Copies the start of the buffer into `dst` and waits for the copy.
    pub fn copy_to_host(&self, dst: &mut [u8], stream: Option<&Stream>) -> Result<()> {
        // SAFETY: as above.
        unsafe { self.copy_to_host_async(0, dst.as_mut_ptr(), dst.len() as u64, stream)? };
        sync(&self.device, stream)
    }

    /// Queues a host-to-device copy of `len` bytes to `offset`.
    ///
    /// # Safety
    /// `src..src+len` must be readable host memory that stays alive and
    /// unchanged until the copy has run (truly asynchronous only for pinned memory).
    pub unsafe fn copy_from_host_async(
        &self,
        offset: u64,
        src: *const u8,
        len: u64,
        stream: Option<&Stream>,
    ) -> Result<()> {
        self.check_len(offset, len, "host-to-device copy")?;
        if len == 0 {
            return Ok(());
        }
        let _span = copy_span("HtoD", len);
        self.device.bind()?;
        check(
            sys::cuMemcpyHtoDAsync_v2(
                self.ptr + offset,
                src.cast(),
                len as usize,
                Self::raw_stream(stream),
            ),
            "cuMemcpyHtoDAsync",
        )
    }

    /// Queues a device-to-host copy of `len` bytes from `offset`.
    ///
    /// # Safety
    /// `dst..dst+len` must be writable host memory that stays alive and is
    /// not read until the copy has run.
    pub unsafe fn copy_to_host_async(
        &self,
        offset: u64,
        dst: *mut u8,
        len: u64,
        stream: Option<&Stream>,
    ) -> Result<()> {
        self.check_len(offset, len, "device-to-host copy")?;
        if len == 0 {
            return Ok(());
        }
        let _span = copy_span("DtoH", len);
        self.device.bind()?;
        check(
            sys::cuMemcpyDtoHAsync_v2(
                dst.cast(),
                self.ptr + offset,
                len as usize,
                Self::raw_stream(stream),
            ),
            "cuMemcpyDtoHAsync",
        )
    }

    /// Queues a copy of all of `src` (which must not be larger) into this buffer.
    pub fn copy_from_device_async(
        &self,
        src: &DeviceBuffer,
        stream: Option<&Stream>,
    ) -> Result<()> {
        self.check_len(0, src.bytes, "device-to-device copy")?;
        // SAFETY: both ranges are owned device buffers of checked size.
        unsafe { copy_device_async(&self.device, self.ptr, src.ptr, src.bytes, stream) }
    }
}

/// Queues a device-to-device copy between raw pointers.
///
/// # Safety
/// Both ranges must be valid device memory of at least `len` bytes.
pub unsafe fn copy_device_async(
    device: &Device,
    dst: CUdeviceptr,
    src: CUdeviceptr,
    len: u64,
    stream: Option<&Stream>,
) -> Result<()> {
    if len == 0 {
        return Ok(());
    }
    let _span = copy_span("DtoD", len);
    device.bind()?;
    check(
        sys::cuMemcpyDtoDAsync_v2(dst, src, len as usize, DeviceBuffer::raw_stream(stream)),
        "cuMemcpyDtoDAsync",
    )
}

/// A profile span around queuing a copy of `bytes` in direction `dir`.
pub fn copy_span(dir: &'static str, bytes: u64) -> Option<crate::profile::Span> {
    let mut s = crate::profile::span("copy", || format!("copy {dir}"))?;
    s.arg("bytes", crate::profile::ArgValue::Int(bytes as i64));
    Some(s)
}

fn sync(device: &Device, stream: Option<&Stream>) -> Result<()> {
    match stream {
        Some(s) => s.synchronize(),
        None => {
            device.bind()?;
            // SAFETY: the legacy stream of the current context.
            check(
                unsafe { sys::cuStreamSynchronize(std::ptr::null_mut()) },
                "cuStreamSynchronize",
            )
        }
    }
}

/// Page-locked host memory: copies from and to it are truly asynchronous and
/// may be captured into graphs.
pub struct PinnedBuffer {
    ptr: *mut u8,
    bytes: usize,
    device: Device,
}

// SAFETY: the buffer is plain host memory owned by this value.
unsafe impl Send for PinnedBuffer {}
unsafe impl Sync for PinnedBuffer {}

impl std::fmt::Debug for PinnedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedBuffer({:p}, {} bytes)", self.ptr, self.bytes)
    }
}

impl PinnedBuffer {
    /// `bytes` of zeroed pinned memory, usable from every context (portable).
    pub fn new(device: &Device, bytes: usize) -> Result<PinnedBuffer> {
        device.bind()?;
        let mut p: *mut std::ffi::c_void = std::ptr::null_mut();
        // SAFETY: writes one pointer; a context is current. Zero-size requests
        // still get one byte so the pointer is real.
        check(
            unsafe { sys::cuMemHostAlloc(&mut p, bytes.max(1), sys::CU_MEMHOSTALLOC_PORTABLE) },
            "cuMemHostAlloc",
        )?;
        // SAFETY: fresh allocation of at least `bytes` bytes.
        unsafe { std::ptr::write_bytes(p.cast::<u8>(), 0, bytes) };
        Ok(PinnedBuffer {
            ptr: p.cast(),
            bytes,
            device: device.clone(),
        })
    }

    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    pub fn len(&self) -> usize {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
    pub fn as_slice(&self) -> &[u8] {
        // SAFETY: owned, initialised (zeroed at creation) allocation.
        unsafe { std::slice::from_raw_parts(self.ptr, self.bytes) }
    }
    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as above, and `&mut self` gives exclusive access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.bytes) }
    }
}

impl Drop for PinnedBuffer {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: allocated by cuMemHostAlloc. Callers must not drop a
            // buffer with a copy still queued (documented on the async copies).
            unsafe {
                let _ = sys::cuMemFreeHost(self.ptr.cast());
            }
        }
    }
}

/// Where managed memory should live: a device (by ordinal) or the host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Location {
    Device(u32),
    Host,
}

impl Location {
    fn raw(self) -> sys::CUmemLocation {
        match self {
            Location::Device(d) => sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_DEVICE,
                id: d as i32,
            },
            Location::Host => sys::CUmemLocation {
                type_: sys::CUmemLocationType::CU_MEM_LOCATION_TYPE_HOST,
                id: 0,
            },
        }
    }
}

/// Hints for managed memory (`cuMemAdvise`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Advice {
    SetReadMostly,
    UnsetReadMostly,
    SetPreferredLocation,
    UnsetPreferredLocation,
    SetAccessedBy,
    UnsetAccessedBy,
}

impl Advice {
    pub fn parse(s: &str) -> Result<Advice> {
        Ok(match s {
            "read_mostly" => Advice::SetReadMostly,
            "unset_read_mostly" => Advice::UnsetReadMostly,
            "preferred_location" => Advice::SetPreferredLocation,
            "unset_preferred_location" => Advice::UnsetPreferredLocation,
            "accessed_by" => Advice::SetAccessedBy,
            "unset_accessed_by" => Advice::UnsetAccessedBy,
            _ => {
                return Err(CudaError::Invalid(format!(
                    "unknown memory advice '{s}' (read_mostly, preferred_location, accessed_by, \
                     or one of them prefixed with unset_)"
                )))
            }
        })
    }
    fn raw(self) -> sys::CUmem_advise {
        use sys::CUmem_advise as A;
        match self {
            Advice::SetReadMostly => A::CU_MEM_ADVISE_SET_READ_MOSTLY,
            Advice::UnsetReadMostly => A::CU_MEM_ADVISE_UNSET_READ_MOSTLY,
            Advice::SetPreferredLocation => A::CU_MEM_ADVISE_SET_PREFERRED_LOCATION,
            Advice::UnsetPreferredLocation => A::CU_MEM_ADVISE_UNSET_PREFERRED_LOCATION,
            Advice::SetAccessedBy => A::CU_MEM_ADVISE_SET_ACCESSED_BY,
            Advice::UnsetAccessedBy => A::CU_MEM_ADVISE_UNSET_ACCESSED_BY,
        }
    }
}

/// Managed (unified) memory: one address valid on the host and every
/// device, migrated on demand or by [`ManagedBuffer::prefetch`]. Not pooled.
pub struct ManagedBuffer {
    ptr: CUdeviceptr,
    bytes: u64,
    device: Device,
}

impl std::fmt::Debug for ManagedBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ManagedBuffer({:#x}, {} bytes)", self.ptr, self.bytes)
    }
}

impl ManagedBuffer {
    /// `bytes` of managed memory for use with `device`. Refuses more than
    /// the device has free: oversubscribed managed memory can stall or hang
    /// the GPU instead of failing.
    pub fn new(device: &Device, bytes: u64) -> Result<ManagedBuffer> {
        device.bind()?;
        let mut supported = 0;
        // SAFETY: writes one int.
        check(
            unsafe {
                sys::cuDeviceGetAttribute(
                    &mut supported,
                    sys::CUdevice_attribute::CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY,
                    device.raw_device(),
                )
            },
            "cuDeviceGetAttribute",
        )?;
        if supported == 0 {
            return Err(CudaError::Invalid(format!(
                "device {} does not support managed memory",
                device.ordinal()
            )));
        }
        let (free, _) = device.mem_info()?;
        if bytes > free {
            return Err(CudaError::OutOfMemory {
                requested: bytes,
                reason: format!(
                    "managed memory is limited to the device's free memory ({free} bytes) \
                     because oversubscribing it can hang the GPU"
                ),
            });
        }
        let mut p: CUdeviceptr = 0;
        // SAFETY: writes one pointer; CU_MEM_ATTACH_GLOBAL = 1 (any stream may use it).
        let rc = unsafe { sys::cuMemAllocManaged(&mut p, bytes.max(1) as usize, 1) };
        if rc == CUresult::CUDA_ERROR_OUT_OF_MEMORY {
            return Err(CudaError::OutOfMemory {
                requested: bytes,
                reason: "cuMemAllocManaged".to_owned(),
            });
        }
        check(rc, "cuMemAllocManaged")?;
        crate::profile::instant(
            "memory",
            "cuMemAllocManaged",
            vec![("bytes", crate::profile::ArgValue::Int(bytes as i64))],
        );
        Ok(ManagedBuffer {
            ptr: p,
            bytes,
            device: device.clone(),
        })
    }

    pub fn ptr(&self) -> CUdeviceptr {
        self.ptr
    }
    pub fn len_bytes(&self) -> u64 {
        self.bytes
    }
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// Queues migrating the memory to `to` on `stream` (legacy when `None`).
    pub fn prefetch(&self, to: Location, stream: Option<&Stream>) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the range is this allocation; valid stream or legacy.
        check(
            unsafe {
                sys::cuMemPrefetchAsync_v2(
                    self.ptr,
                    self.bytes as usize,
                    to.raw(),
                    0,
                    stream.map_or(std::ptr::null_mut(), Stream::raw),
                )
            },
            "cuMemPrefetchAsync",
        )
    }

    /// Gives the driver a hint about how the memory is used from `at`.
    pub fn advise(&self, advice: Advice, at: Location) -> Result<()> {
        if self.bytes == 0 {
            return Ok(());
        }
        self.device.bind()?;
        // SAFETY: the range is this allocation.
        check(
            unsafe { sys::cuMemAdvise_v2(self.ptr, self.bytes as usize, advice.raw(), at.raw()) },
            "cuMemAdvise",
        )
    }
}

impl Drop for ManagedBuffer {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: allocated by cuMemAllocManaged; callers must not free
            // memory that queued work still uses (as for every buffer).
            unsafe {
                let _ = sys::cuMemFree_v2(self.ptr);
            }
        }
    }
}

/// Existing host memory, page-locked and mapped into the device's address
/// space (`cuMemHostRegister`): copies from it are fast and asynchronous,
/// and kernels can read and write it in place through [`HostRegistration::device_ptr`].
/// Unregistered on drop.
pub struct HostRegistration {
    host: *mut u8,
    bytes: usize,
    device_ptr: CUdeviceptr,
    device: Device,
}

// SAFETY: the registration only refers to memory its owner keeps alive.
unsafe impl Send for HostRegistration {}
unsafe impl Sync for HostRegistration {}

impl std::fmt::Debug for HostRegistration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "HostRegistration({:p}, {} bytes)", self.host, self.bytes)
    }
}

impl HostRegistration {
    /// Registers `bytes` at `host` (portable, mapped).
    ///
    /// # Safety
    /// `host..host+bytes` must be host memory that outlives the registration.
    pub unsafe fn new(device: &Device, host: *mut u8, bytes: usize) -> Result<HostRegistration> {
        if bytes == 0 {
            return Err(CudaError::Invalid(
                "cannot register an empty host array".to_owned(),
            ));
        }
        device.bind()?;
        let flags = sys::CU_MEMHOSTREGISTER_PORTABLE | sys::CU_MEMHOSTREGISTER_DEVICEMAP;
        check(
            sys::cuMemHostRegister_v2(host.cast(), bytes, flags),
            "cuMemHostRegister",
        )?;
        let mut d: CUdeviceptr = 0;
        if let Err(e) = check(
            sys::cuMemHostGetDevicePointer_v2(&mut d, host.cast(), 0),
            "cuMemHostGetDevicePointer",
        ) {
            let _ = sys::cuMemHostUnregister(host.cast());
            return Err(e);
        }
        Ok(HostRegistration {
            host,
            bytes,
            device_ptr: d,
            device: device.clone(),
        })
    }

    /// The address kernels use to reach the host memory.
    pub fn device_ptr(&self) -> CUdeviceptr {
        self.device_ptr
    }
    pub fn host_ptr(&self) -> *mut u8 {
        self.host
    }
    pub fn len(&self) -> usize {
        self.bytes
    }
    pub fn is_empty(&self) -> bool {
        self.bytes == 0
    }
}

impl Drop for HostRegistration {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: registered by `new`.
            unsafe {
                let _ = sys::cuMemHostUnregister(self.host.cast());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn size_classes_round_up_with_bounded_waste() {
        assert_eq!(size_class(0), 512);
        assert_eq!(size_class(1), 512);
        assert_eq!(size_class(512), 512);
        assert_eq!(size_class(513), 1024);
        assert_eq!(size_class(4096), 4096);
        assert_eq!(size_class(4097), 5120);
        assert_eq!(size_class(1 << 30), 1 << 30);
        for n in [
            777u64,
            12_345,
            1_000_000,
            3 << 20,
            (1 << 28) + 1,
            123_456_789,
        ] {
            let c = size_class(n);
            assert!(c >= n, "{n} -> {c}");
            assert!(c as f64 <= (n as f64) * 1.25 + 512.0, "{n} -> {c}");
            assert_eq!(c % 512, 0);
            assert_eq!(size_class(c), c, "classes are fixed points");
        }
    }
}
