//! Tensor maps for TMA (issue 13 item 2): `cuTensorMapEncodeTiled` behind
//! zyntax's own validation.
//!
//! A [`TensorMap`] is the driver's opaque 128-byte `CUtensorMap`, built from a
//! [`TensorMapDesc`] and a global address. [`TensorMapDesc::validate`] checks
//! every field first (an [`CudaError::Invalid`] naming the field), so the
//! driver never sees a bad map. A kernel takes it as a `tensormap` parameter
//! ([`crate::ParamKind::TensorMap`]), by value. The map refers to memory by
//! address only: [`TensorMap::owner`] holds whatever keeps that memory alive
//! (launch and graph paths keep it with the arguments).

use crate::device::Device;
use crate::error::{check, CudaError, Result};
use crate::keep::KeepAlive;
use crate::memory::DeviceBuffer;
use cudarc::driver::sys::{
    self, CUtensorMap, CUtensorMapDataType, CUtensorMapFloatOOBfill, CUtensorMapInterleave,
    CUtensorMapL2promotion, CUtensorMapSwizzle,
};
use std::fmt;
use std::sync::Arc;
use zyntax_hir::tensormap::{
    Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc, TENSORMAP_BYTES,
};
use zyntax_hir::ScalarType;

/// An encoded tensor map (the `CUtensorMap` bytes) and what it describes.
#[derive(Clone)]
pub struct TensorMap {
    raw: Box<CUtensorMap>,
    desc: TensorMapDesc,
    address: u64,
    device: u32,
    owner: Option<KeepAlive>,
}

impl fmt::Debug for TensorMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "TensorMap({} dims {:?} box {:?} swizzle {} at {:#x} on device {})",
            self.desc.dtype,
            self.desc.dims,
            self.desc.box_dims,
            self.desc.swizzle,
            self.address,
            self.device
        )
    }
}

impl TensorMap {
    /// Encodes a tiled tensor map over `address` (device memory of `device`);
    /// `owner` keeps that memory alive for as long as the map exists.
    pub fn tiled(
        device: &Device,
        address: u64,
        desc: TensorMapDesc,
        owner: Option<KeepAlive>,
    ) -> Result<TensorMap> {
        desc.validate(address)
            .map_err(|e| CudaError::Invalid(e.to_string()))?;
        let dtype = data_type(desc.dtype).ok_or_else(|| {
            CudaError::Invalid(format!("tensor map dtype: {} is not supported", desc.dtype))
        })?;
        let rank = desc.rank();
        device.bind()?;
        let mut raw: Box<CUtensorMap> = Box::new(
            // SAFETY: CUtensorMap is plain bytes; all-zero is a valid value to overwrite.
            unsafe { std::mem::zeroed() },
        );
        let dims: Vec<u64> = desc.dims.clone();
        let strides: Vec<u64> = desc.strides.clone();
        // SAFETY: every pointer addresses `rank` (strides: `rank - 1`) valid
        // values; the enums take the driver's documented numbers; `raw` is a
        // 64-byte aligned CUtensorMap the call fills in.
        let rc = unsafe {
            sys::cuTensorMapEncodeTiled(
                &mut *raw,
                dtype,
                rank as u32,
                address as *mut std::ffi::c_void,
                dims.as_ptr(),
                strides.as_ptr(),
                desc.box_dims.as_ptr(),
                desc.elem_strides.as_ptr(),
                interleave(desc.interleave),
                swizzle(desc.swizzle),
                l2(desc.l2_promotion),
                oob(desc.oob_fill),
            )
        };
        check(rc, "cuTensorMapEncodeTiled")?;
        Ok(TensorMap {
            raw,
            desc,
            address,
            device: device.ordinal(),
            owner,
        })
    }

    /// A tensor map over a whole buffer of this device (which it keeps alive).
    pub fn from_buffer(buf: &Arc<DeviceBuffer>, desc: TensorMapDesc) -> Result<TensorMap> {
        let owner: KeepAlive = buf.clone();
        TensorMap::tiled(buf.device(), buf.ptr(), desc, Some(owner))
    }

    /// The 128 bytes a kernel's `tensormap` parameter receives.
    pub fn bytes(&self) -> &[u8; TENSORMAP_BYTES] {
        // SAFETY: CUtensorMap is exactly 128 plain bytes (checked below); u8 needs no alignment.
        unsafe { &*std::ptr::from_ref::<CUtensorMap>(&self.raw).cast::<[u8; TENSORMAP_BYTES]>() }
    }
    pub fn desc(&self) -> &TensorMapDesc {
        &self.desc
    }
    pub fn address(&self) -> u64 {
        self.address
    }
    pub fn device(&self) -> u32 {
        self.device
    }
    /// What keeps the described memory alive.
    pub fn owner(&self) -> Option<&KeepAlive> {
        self.owner.as_ref()
    }
}

const _: () = assert!(std::mem::size_of::<CUtensorMap>() == TENSORMAP_BYTES);
const _: () = assert!(std::mem::align_of::<CUtensorMap>() == 64);

/// The driver's element type (i8 and i16 travel as their unsigned twins:
/// TMA moves bits; `zyntax_hir::tensormap::dtype_code` lists the same).
fn data_type(s: ScalarType) -> Option<CUtensorMapDataType> {
    use CUtensorMapDataType as D;
    Some(match s {
        ScalarType::U8 | ScalarType::I8 => D::CU_TENSOR_MAP_DATA_TYPE_UINT8,
        ScalarType::U16 | ScalarType::I16 => D::CU_TENSOR_MAP_DATA_TYPE_UINT16,
        ScalarType::U32 => D::CU_TENSOR_MAP_DATA_TYPE_UINT32,
        ScalarType::I32 => D::CU_TENSOR_MAP_DATA_TYPE_INT32,
        ScalarType::U64 => D::CU_TENSOR_MAP_DATA_TYPE_UINT64,
        ScalarType::I64 => D::CU_TENSOR_MAP_DATA_TYPE_INT64,
        ScalarType::F16 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
        ScalarType::F32 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT32,
        ScalarType::F64 => D::CU_TENSOR_MAP_DATA_TYPE_FLOAT64,
        ScalarType::BF16 => D::CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
        ScalarType::Bool => return None,
    })
}

fn interleave(i: Interleave) -> CUtensorMapInterleave {
    match i {
        Interleave::None => CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_NONE,
        Interleave::B16 => CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_16B,
        Interleave::B32 => CUtensorMapInterleave::CU_TENSOR_MAP_INTERLEAVE_32B,
    }
}

fn swizzle(s: Swizzle) -> CUtensorMapSwizzle {
    match s {
        Swizzle::None => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_NONE,
        Swizzle::B32 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_32B,
        Swizzle::B64 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_64B,
        Swizzle::B128 => CUtensorMapSwizzle::CU_TENSOR_MAP_SWIZZLE_128B,
    }
}

fn l2(p: L2Promotion) -> CUtensorMapL2promotion {
    match p {
        L2Promotion::None => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_NONE,
        L2Promotion::B64 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_64B,
        L2Promotion::B128 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
        L2Promotion::B256 => CUtensorMapL2promotion::CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
    }
}

fn oob(o: OobFill) -> CUtensorMapFloatOOBfill {
    match o {
        OobFill::Zero => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
        OobFill::Nan => CUtensorMapFloatOOBfill::CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA,
    }
}
