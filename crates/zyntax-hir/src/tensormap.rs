//! Tensor maps (issue 13 item 2): what a TMA instruction's `tensormap`
//! parameter describes, the rules `cuTensorMapEncodeTiled` imposes, and the
//! shared-memory layout of a box.
//!
//! The CUDA runtime (`zyntax-cuda`) encodes a [`TensorMapDesc`] into the
//! driver's opaque 128-byte `CUtensorMap`; the interpreter executes TMA
//! instructions from the same description. Both validate it here first, so
//! every bad field is an error naming it before the driver sees anything.
//!
//! Shared-memory layout of a box (tile mode, no interleave): the box is
//! stored row by row, a row being its `n0` innermost elements (each
//! `n_k = ceil(box[k] / elem_strides[k])`); element `(i0, ..., i4)` is at byte
//! `o = (((i4*n3 + i3)*n2 + i2)*n1 + i1) * pitch + i0 * elem_bytes`, then the
//! swizzle permutes 16-byte chunks: `o ^ (((o >> 7) & m) << 4)` with
//! `m = 1, 3, 7` for 32B, 64B and 128B (the chunk index within each 128-byte
//! line XORed with the line index, modulo the span's chunk count). The row
//! pitch is the row's bytes, but a row narrower than the swizzle span takes a
//! whole span (an H100 fills a canary-filled destination so: an f32 8 x 8
//! box under 64B swizzle puts row r at byte 64 r, its 32 bytes in chunks
//! XORed as a full row's; the other 32 bytes stay as they were), so such a
//! box spans `rows * span` bytes of shared memory ([`TensorMapDesc::shared_bytes`]).

use crate::types::ScalarType;
use std::fmt;

/// Largest tensor rank.
pub const MAX_RANK: usize = 5;
/// Largest box extent in any dimension.
pub const MAX_BOX: u32 = 256;
/// Size of the driver's `CUtensorMap` in bytes; its alignment is 64.
pub const TENSORMAP_BYTES: usize = 128;

macro_rules! choice {
    ($(#[$m:meta])* $name:ident { $($v:ident => $text:literal),+ $(,)? }) => {
        $(#[$m])*
        #[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Default)]
        pub enum $name { #[default] $($v),+ }
        impl $name {
            pub const ALL: &'static [$name] = &[$($name::$v),+];
            pub fn name(self) -> &'static str {
                match self { $($name::$v => $text),+ }
            }
            pub fn from_name(s: &str) -> Option<$name> {
                match s { $($text => Some($name::$v),)+ _ => None }
            }
            /// `"a", "b" or "c"`: for error messages.
            pub fn choices() -> String {
                let names: Vec<String> = Self::ALL.iter().map(|v| format!("\"{}\"", v.name())).collect();
                names.join(", ")
            }
        }
        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.name())
            }
        }
    };
}

choice!(
    /// How a box is permuted in shared memory (bank-conflict-free reads).
    Swizzle { None => "none", B32 => "32B", B64 => "64B", B128 => "128B" }
);
choice!(
    /// Interleaved layouts (for NC/8HWC8-style tensors).
    Interleave { None => "none", B16 => "16B", B32 => "32B" }
);
choice!(
    /// What out-of-bounds box elements read as: zero, or (floats) NaN.
    OobFill { Zero => "zero", Nan => "nan" }
);
choice!(
    /// L2 promotion of the tensor's lines (speed only).
    L2Promotion { None => "none", B64 => "64B", B128 => "128B", B256 => "256B" }
);

impl Swizzle {
    /// The swizzle span in bytes (0: none).
    pub fn span(self) -> u32 {
        match self {
            Swizzle::None => 0,
            Swizzle::B32 => 32,
            Swizzle::B64 => 64,
            Swizzle::B128 => 128,
        }
    }
    /// Alignment the shared box must have for the pattern to start at chunk 0:
    /// one repeat of the pattern (8 lines of 128 bytes for 128B).
    pub fn atom_bytes(self) -> u64 {
        match self {
            Swizzle::None => 128,
            Swizzle::B32 => 256,
            Swizzle::B64 => 512,
            Swizzle::B128 => 1024,
        }
    }
    /// The swizzled position of byte offset `o` of a box (see the module docs).
    pub fn apply(self, o: u64) -> u64 {
        let m = match self {
            Swizzle::None => return o,
            Swizzle::B32 => 1,
            Swizzle::B64 => 3,
            Swizzle::B128 => 7,
        };
        o ^ (((o >> 7) & m) << 4)
    }
}

/// A bad tensor-map field: `field` names it (`box[1]`, `strides[0]`, `swizzle`, ...).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapError {
    pub field: String,
    pub message: String,
}

impl fmt::Display for TensorMapError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "tensor map {}: {}", self.field, self.message)
    }
}

impl std::error::Error for TensorMapError {}

fn bad<T>(field: impl Into<String>, message: impl Into<String>) -> Result<T, TensorMapError> {
    Err(TensorMapError {
        field: field.into(),
        message: message.into(),
    })
}

/// A tiled tensor map: a tensor in global memory and the box TMA moves.
/// Dimensions are innermost first, as in PTX and the driver.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TensorMapDesc {
    pub dtype: ScalarType,
    /// Elements per dimension.
    pub dims: Vec<u64>,
    /// Byte strides of dimensions 1.. (dimension 0 is contiguous): `rank - 1` entries.
    pub strides: Vec<u64>,
    /// Box extent per dimension (1..=256).
    pub box_dims: Vec<u32>,
    /// Traversal stride per dimension (1..=8): every n-th element is loaded.
    pub elem_strides: Vec<u32>,
    pub swizzle: Swizzle,
    pub interleave: Interleave,
    pub oob_fill: OobFill,
    pub l2_promotion: L2Promotion,
}

impl TensorMapDesc {
    pub fn rank(&self) -> usize {
        self.dims.len()
    }
    pub fn elem_bytes(&self) -> u64 {
        self.dtype.size_bytes()
    }
    /// Elements of the box along dimension `k` (after the traversal stride).
    pub fn box_elems(&self, k: usize) -> u64 {
        u64::from(self.box_dims[k]).div_ceil(u64::from(self.elem_strides[k]))
    }
    /// Bytes one box moves (and completes on the barrier).
    pub fn box_bytes(&self) -> u64 {
        (0..self.rank()).map(|k| self.box_elems(k)).product::<u64>() * self.elem_bytes()
    }
    /// Bytes between box rows in shared memory: the row, or the whole swizzle
    /// span when the row is narrower (see the module docs).
    pub fn row_pitch(&self) -> u64 {
        (self.box_elems(0) * self.elem_bytes()).max(u64::from(self.swizzle.span()))
    }
    /// Bytes one box spans in shared memory: `box_bytes` plus the padding of
    /// rows narrower than the swizzle span.
    pub fn shared_bytes(&self) -> u64 {
        (1..self.rank()).map(|k| self.box_elems(k)).product::<u64>() * self.row_pitch()
    }
    /// The byte stride of dimension `k` (dimension 0: the element size).
    pub fn stride(&self, k: usize) -> u64 {
        if k == 0 {
            self.elem_bytes()
        } else {
            self.strides[k - 1]
        }
    }

    /// Checks every rule of `cuTensorMapEncodeTiled` that does not depend on
    /// the device; `address` is the tensor's global address.
    pub fn validate(&self, address: u64) -> Result<(), TensorMapError> {
        let rank = self.rank();
        if !(1..=MAX_RANK).contains(&rank) {
            return bad(
                "rank",
                format!("{rank} dimensions; a tensor map has 1 to {MAX_RANK}"),
            );
        }
        if dtype_code(self.dtype).is_none() {
            return bad(
                "dtype",
                format!(
                    "{} is not supported (u8, i8, u16, i16, u32, i32, u64, i64, f16, bf16, f32, f64)",
                    self.dtype
                ),
            );
        }
        for (name, n) in [
            ("strides", self.strides.len() + 1),
            ("box", self.box_dims.len()),
            ("element_strides", self.elem_strides.len()),
        ] {
            if n != rank {
                return bad(name, format!("has {n} entries for a rank-{rank} tensor"));
            }
        }
        let align = if self.interleave == Interleave::B32 {
            32
        } else {
            16
        };
        if !address.is_multiple_of(align) {
            return bad(
                "address",
                format!("global address {address:#x} is not {align}-byte aligned"),
            );
        }
        for (k, &d) in self.dims.iter().enumerate() {
            if d == 0 || d > 1 << 32 {
                return bad(format!("dims[{k}]"), format!("{d} is outside 1..=2^32"));
            }
        }
        for (k, &s) in self.strides.iter().enumerate() {
            if !s.is_multiple_of(16) || s >= 1 << 40 {
                return bad(
                    format!("strides[{}]", k + 1),
                    format!("{s} bytes: a global stride must be a multiple of 16 bytes below 2^40"),
                );
            }
        }
        for (k, &b) in self.box_dims.iter().enumerate() {
            if b == 0 || b > MAX_BOX {
                return bad(format!("box[{k}]"), format!("{b} is outside 1..={MAX_BOX}"));
            }
        }
        for (k, &e) in self.elem_strides.iter().enumerate() {
            if !(1..=8).contains(&e) {
                return bad(
                    format!("element_strides[{k}]"),
                    format!("{e} is outside 1..=8"),
                );
            }
        }
        // The driver documents elementStrides[0] as ignored without interleave
        // (an H100 loads box[0] contiguous elements): refused rather than dropped.
        if self.interleave == Interleave::None && self.elem_strides[0] != 1 {
            return bad(
                "element_strides[0]",
                format!(
                    "{}: TMA has no stride along the innermost dimension without interleave \
                     (the hardware ignores it); it must be 1",
                    self.elem_strides[0]
                ),
            );
        }
        if self.interleave != Interleave::None && rank < 3 {
            return bad("interleave", "an interleaved tensor map has rank 3 or more");
        }
        if self.interleave == Interleave::B32 && self.swizzle != Swizzle::B32 {
            return bad("swizzle", "32B interleave needs 32B swizzle");
        }
        let inner = u64::from(self.box_dims[0]) * self.elem_bytes();
        if self.interleave == Interleave::None {
            if !inner.is_multiple_of(16) {
                return bad(
                    "box[0]",
                    format!(
                        "the inner box is {inner} bytes ({} x {}); it must be a multiple of 16 bytes",
                        self.box_dims[0], self.dtype
                    ),
                );
            }
            let span = u64::from(self.swizzle.span());
            if span != 0 && inner > span {
                return bad(
                    "swizzle",
                    format!(
                        "{} swizzle spans {span} bytes, but the inner box is {inner} bytes ({} x {}); \
                         the inner box must be at most the span",
                        self.swizzle, self.box_dims[0], self.dtype
                    ),
                );
            }
        }
        if self.oob_fill == OobFill::Nan && !self.dtype.is_float() {
            return bad(
                "oob_fill",
                format!(
                    "NaN fill needs a float tensor, this one holds {}",
                    self.dtype
                ),
            );
        }
        Ok(())
    }

    /// Byte offset in the shared box of element `idx` (box-relative, innermost first).
    pub fn shared_offset(&self, idx: &[u64]) -> u64 {
        let mut row = 0u64;
        for k in (1..self.rank()).rev() {
            row = row * self.box_elems(k) + idx[k];
        }
        self.swizzle
            .apply(row * self.row_pitch() + idx[0] * self.elem_bytes())
    }
}

/// The driver's `CUtensorMapDataType` number of a zyntax element type (i8
/// and i16 travel as their unsigned twins: TMA moves bits).
pub fn dtype_code(s: ScalarType) -> Option<u32> {
    Some(match s {
        ScalarType::U8 | ScalarType::I8 => 0,
        ScalarType::U16 | ScalarType::I16 => 1,
        ScalarType::U32 => 2,
        ScalarType::I32 => 3,
        ScalarType::U64 => 4,
        ScalarType::I64 => 5,
        ScalarType::F16 => 6,
        ScalarType::F32 => 7,
        ScalarType::F64 => 8,
        ScalarType::BF16 => 9,
        ScalarType::Bool => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn desc() -> TensorMapDesc {
        TensorMapDesc {
            dtype: ScalarType::F16,
            dims: vec![128, 64],
            strides: vec![256],
            box_dims: vec![64, 8],
            elem_strides: vec![1, 1],
            swizzle: Swizzle::B128,
            interleave: Interleave::None,
            oob_fill: OobFill::Zero,
            l2_promotion: L2Promotion::None,
        }
    }

    #[test]
    fn validation_names_the_field() {
        assert_eq!(desc().validate(0x1000), Ok(()));
        let field = |d: TensorMapDesc, addr| d.validate(addr).unwrap_err().field;
        assert_eq!(field(desc(), 0x1008), "address");
        let mut d = desc();
        d.box_dims[1] = 257;
        assert_eq!(field(d, 0), "box[1]");
        let mut d = desc();
        d.box_dims[0] = 128; // 256 bytes > the 128-byte span
        assert_eq!(field(d, 0), "swizzle");
        let mut d = desc();
        d.strides[0] = 250;
        assert_eq!(field(d, 0), "strides[1]");
        let mut d = desc();
        d.dtype = ScalarType::Bool;
        assert_eq!(field(d, 0), "dtype");
        let mut d = desc();
        d.dtype = ScalarType::I32;
        d.box_dims[0] = 32;
        d.oob_fill = OobFill::Nan;
        assert_eq!(field(d, 0), "oob_fill");
    }

    #[test]
    fn narrow_rows_take_a_whole_span() {
        // f32 8 x 8 under 64B (the H100's canary dump): row r at byte 64 r,
        // its two chunks XORed with line r / 2 as in a full 64-byte row.
        let mut d = desc();
        d.dtype = ScalarType::F32;
        d.box_dims = vec![8, 8];
        d.swizzle = Swizzle::B64;
        assert_eq!(
            (d.box_bytes(), d.row_pitch(), d.shared_bytes()),
            (256, 64, 512)
        );
        assert_eq!(d.shared_offset(&[0, 1]), 64);
        assert_eq!(d.shared_offset(&[0, 2]), 128 + 16);
        assert_eq!(d.shared_offset(&[4, 7]), 3 * 128 + 64 + (16 ^ 48));
        // f16 32 x 8 under 128B: 64 of every 128 bytes, chunk XOR row % 8.
        d.dtype = ScalarType::F16;
        d.box_dims = vec![32, 8];
        d.swizzle = Swizzle::B128;
        assert_eq!((d.box_bytes(), d.shared_bytes()), (512, 1024));
        assert_eq!(d.shared_offset(&[8, 5]), 5 * 128 + (16 ^ (5 * 16)));
        // Rows that fill the span, and unswizzled rows, stay dense.
        assert_eq!(desc().shared_bytes(), desc().box_bytes());
        d.swizzle = Swizzle::None;
        assert_eq!(d.shared_bytes(), d.box_bytes());
    }

    #[test]
    fn innermost_element_stride_is_refused() {
        let mut d = desc();
        d.elem_strides = vec![2, 1];
        assert_eq!(d.validate(0).unwrap_err().field, "element_strides[0]");
        d.elem_strides = vec![1, 3];
        assert_eq!(d.validate(0), Ok(()));
    }

    #[test]
    fn swizzle_xors_chunks_with_the_line() {
        // 128B: line 1's chunk 0 moves to chunk 1; line 7's chunk 0 to chunk 7.
        assert_eq!(Swizzle::B128.apply(128), 128 + 16);
        assert_eq!(Swizzle::B128.apply(7 * 128 + 16), 7 * 128 + 6 * 16);
        assert_eq!(Swizzle::B64.apply(4 * 128), 4 * 128);
        assert_eq!(Swizzle::B32.apply(128 + 4), 128 + 16 + 4);
        // A permutation of each atom.
        for s in Swizzle::ALL {
            let atom = s.atom_bytes();
            let mut seen: Vec<u64> = (0..atom).map(|o| s.apply(o)).collect();
            seen.sort_unstable();
            assert_eq!(seen, (0..atom).collect::<Vec<_>>(), "{s}");
        }
    }
}
