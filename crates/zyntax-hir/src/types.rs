//! HIR types: scalars, vectors, arrays, pointers with address spaces, MMA fragments.

use serde::{Deserialize, Serialize};
use std::fmt;

/// How deeply types may nest: the number of `ptr`, array and `vec`
/// constructors around the innermost scalar or fragment (`f32` is 0,
/// `ptr<global, [f32; 4]>` is 2). Every way into the HIR enforces this one
/// limit: the `.zir` parser, the type-string parser and type constructors of
/// the Python API, the JSON loader and the verifier; so a verified module
/// always prints, parses and serializes back, and nothing recursing over a
/// type can exhaust the stack. 32 keeps the deepest allowed type within
/// `serde_json`'s own nesting limit (two JSON levels per type level).
pub const MAX_TYPE_DEPTH: u32 = 32;

/// Scalar element types. Integer signedness lives in the type, so arithmetic
/// ops are generic (`add`, `div`, `shr`, `lt`) and their meaning follows the operand type.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum ScalarType {
    Bool,
    I8,
    I16,
    I32,
    I64,
    U8,
    U16,
    U32,
    U64,
    F16,
    BF16,
    F32,
    F64,
}

impl ScalarType {
    pub const ALL: [ScalarType; 13] = [
        ScalarType::Bool,
        ScalarType::I8,
        ScalarType::I16,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U8,
        ScalarType::U16,
        ScalarType::U32,
        ScalarType::U64,
        ScalarType::F16,
        ScalarType::BF16,
        ScalarType::F32,
        ScalarType::F64,
    ];

    pub fn name(self) -> &'static str {
        match self {
            ScalarType::Bool => "bool",
            ScalarType::I8 => "i8",
            ScalarType::I16 => "i16",
            ScalarType::I32 => "i32",
            ScalarType::I64 => "i64",
            ScalarType::U8 => "u8",
            ScalarType::U16 => "u16",
            ScalarType::U32 => "u32",
            ScalarType::U64 => "u64",
            ScalarType::F16 => "f16",
            ScalarType::BF16 => "bf16",
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
        }
    }

    pub fn from_name(s: &str) -> Option<ScalarType> {
        ScalarType::ALL.iter().copied().find(|t| t.name() == s)
    }

    /// Size in bits (bool counts as 8 when stored in memory, 1 as a value).
    pub fn bits(self) -> u32 {
        match self {
            ScalarType::Bool => 1,
            ScalarType::I8 | ScalarType::U8 => 8,
            ScalarType::I16 | ScalarType::U16 | ScalarType::F16 | ScalarType::BF16 => 16,
            ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => 32,
            ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => 64,
        }
    }

    /// Size in bytes when stored in memory.
    pub fn size_bytes(self) -> u64 {
        match self {
            ScalarType::Bool => 1,
            other => u64::from(other.bits() / 8),
        }
    }

    pub fn is_int(self) -> bool {
        self.is_signed() || self.is_unsigned()
    }
    pub fn is_signed(self) -> bool {
        matches!(
            self,
            ScalarType::I8 | ScalarType::I16 | ScalarType::I32 | ScalarType::I64
        )
    }
    pub fn is_unsigned(self) -> bool {
        matches!(
            self,
            ScalarType::U8 | ScalarType::U16 | ScalarType::U32 | ScalarType::U64
        )
    }
    pub fn is_float(self) -> bool {
        matches!(
            self,
            ScalarType::F16 | ScalarType::BF16 | ScalarType::F32 | ScalarType::F64
        )
    }
    pub fn is_bool(self) -> bool {
        self == ScalarType::Bool
    }
}

/// Address spaces, numbered as NVPTX numbers them.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum AddrSpace {
    Generic = 0,
    Global = 1,
    Shared = 3,
    Constant = 4,
    Local = 5,
}

impl AddrSpace {
    pub const ALL: [AddrSpace; 5] = [
        AddrSpace::Generic,
        AddrSpace::Global,
        AddrSpace::Shared,
        AddrSpace::Constant,
        AddrSpace::Local,
    ];
    pub fn name(self) -> &'static str {
        match self {
            AddrSpace::Generic => "generic",
            AddrSpace::Global => "global",
            AddrSpace::Shared => "shared",
            AddrSpace::Constant => "constant",
            AddrSpace::Local => "local",
        }
    }
    pub fn from_name(s: &str) -> Option<AddrSpace> {
        AddrSpace::ALL.iter().copied().find(|a| a.name() == s)
    }
    pub fn number(self) -> u32 {
        self as u32
    }
}

/// Which operand of `D = A*B + C` a fragment holds.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum FragKind {
    A,
    B,
    /// Accumulator (C and D).
    Acc,
}

impl FragKind {
    pub fn name(self) -> &'static str {
        match self {
            FragKind::A => "a",
            FragKind::B => "b",
            FragKind::Acc => "acc",
        }
    }
    pub fn from_name(s: &str) -> Option<FragKind> {
        match s {
            "a" => Some(FragKind::A),
            "b" => Some(FragKind::B),
            "acc" => Some(FragKind::Acc),
            _ => None,
        }
    }
}

/// Matrix shape of a warp-level MMA (M x N x K).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum MmaShape {
    M16N16K16,
    M32N8K16,
    M8N32K16,
}

impl MmaShape {
    pub const ALL: [MmaShape; 3] = [MmaShape::M16N16K16, MmaShape::M32N8K16, MmaShape::M8N32K16];
    pub fn name(self) -> &'static str {
        match self {
            MmaShape::M16N16K16 => "m16n16k16",
            MmaShape::M32N8K16 => "m32n8k16",
            MmaShape::M8N32K16 => "m8n32k16",
        }
    }
    pub fn from_name(s: &str) -> Option<MmaShape> {
        MmaShape::ALL.iter().copied().find(|m| m.name() == s)
    }
    /// (M, N, K)
    pub fn dims(self) -> (u32, u32, u32) {
        match self {
            MmaShape::M16N16K16 => (16, 16, 16),
            MmaShape::M32N8K16 => (32, 8, 16),
            MmaShape::M8N32K16 => (8, 32, 16),
        }
    }
}

/// Memory layout of a matrix tile in memory.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    Row,
    Col,
}

impl Layout {
    pub fn name(self) -> &'static str {
        match self {
            Layout::Row => "row",
            Layout::Col => "col",
        }
    }
    pub fn from_name(s: &str) -> Option<Layout> {
        match s {
            "row" => Some(Layout::Row),
            "col" => Some(Layout::Col),
            _ => None,
        }
    }
}

/// A warp-distributed MMA fragment. Its contents are opaque: only the MMA
/// instructions (load, fill, mma, store) touch it. A and B fragments carry the
/// layout they were loaded with, because the hardware instruction depends on it;
/// accumulators do not (the layout is given at load/store time).
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
pub struct FragType {
    pub kind: FragKind,
    pub shape: MmaShape,
    pub elem: ScalarType,
    /// `Some` for A/B fragments, `None` for accumulators.
    pub layout: Option<Layout>,
}

/// An HIR type.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, PartialOrd, Ord)]
#[serde(rename_all = "lowercase")]
pub enum Type {
    Scalar(ScalarType),
    /// A short SIMD vector of scalars (2, 4 or 8 lanes): loads/stores of 8/16 bytes.
    Vector(ScalarType, u32),
    /// A fixed-size array; only as the pointee of a pointer or the element of a shared allocation.
    Array(Box<Type>, u64),
    /// A typed pointer into an address space.
    Ptr(AddrSpace, Box<Type>),
    /// A warp-level MMA fragment.
    Frag(FragType),
    /// A TMA tensor map (issue 13): only a kernel parameter, passed by value
    /// as a 128-byte `__grid_constant__`; only the TMA instructions use it.
    TensorMap,
}

impl Type {
    pub const BOOL: Type = Type::Scalar(ScalarType::Bool);
    pub const I8: Type = Type::Scalar(ScalarType::I8);
    pub const I16: Type = Type::Scalar(ScalarType::I16);
    pub const I32: Type = Type::Scalar(ScalarType::I32);
    pub const I64: Type = Type::Scalar(ScalarType::I64);
    pub const U8: Type = Type::Scalar(ScalarType::U8);
    pub const U16: Type = Type::Scalar(ScalarType::U16);
    pub const U32: Type = Type::Scalar(ScalarType::U32);
    pub const U64: Type = Type::Scalar(ScalarType::U64);
    pub const F16: Type = Type::Scalar(ScalarType::F16);
    pub const BF16: Type = Type::Scalar(ScalarType::BF16);
    pub const F32: Type = Type::Scalar(ScalarType::F32);
    pub const F64: Type = Type::Scalar(ScalarType::F64);

    pub fn ptr(space: AddrSpace, pointee: Type) -> Type {
        Type::Ptr(space, Box::new(pointee))
    }
    pub fn array(elem: Type, len: u64) -> Type {
        Type::Array(Box::new(elem), len)
    }
    /// Nesting depth as [`MAX_TYPE_DEPTH`] counts it; iterative, so it is
    /// safe on a type of any depth.
    pub fn depth(&self) -> u64 {
        let mut d = 0u64;
        let mut t = self;
        loop {
            match t {
                Type::Ptr(_, e) | Type::Array(e, _) => {
                    d += 1;
                    t = e;
                }
                Type::Vector(..) => return d + 1,
                Type::Scalar(_) | Type::Frag(_) | Type::TensorMap => return d,
            }
        }
    }
    /// An error message when the type nests deeper than [`MAX_TYPE_DEPTH`].
    pub fn check_depth(&self) -> Result<(), String> {
        let d = self.depth();
        if d > u64::from(MAX_TYPE_DEPTH) {
            Err(format!(
                "type nested {d} levels deep; at most {MAX_TYPE_DEPTH} are allowed"
            ))
        } else {
            Ok(())
        }
    }
    pub fn as_scalar(&self) -> Option<ScalarType> {
        match self {
            Type::Scalar(s) => Some(*s),
            _ => None,
        }
    }
    /// Element scalar of a scalar or vector type.
    pub fn elem_scalar(&self) -> Option<ScalarType> {
        match self {
            Type::Scalar(s) | Type::Vector(s, _) => Some(*s),
            _ => None,
        }
    }
    pub fn is_int(&self) -> bool {
        self.as_scalar().is_some_and(ScalarType::is_int)
    }
    pub fn is_float(&self) -> bool {
        self.as_scalar().is_some_and(ScalarType::is_float)
    }
    pub fn is_bool(&self) -> bool {
        *self == Type::BOOL
    }
    pub fn is_ptr(&self) -> bool {
        matches!(self, Type::Ptr(..))
    }
    pub fn pointee(&self) -> Option<&Type> {
        match self {
            Type::Ptr(_, t) => Some(t),
            _ => None,
        }
    }
    pub fn addr_space(&self) -> Option<AddrSpace> {
        match self {
            Type::Ptr(s, _) => Some(*s),
            _ => None,
        }
    }
    /// Whether values of this type can live in memory (loaded and stored).
    pub fn is_memory_type(&self) -> bool {
        match self {
            Type::Scalar(_) | Type::Vector(..) | Type::Ptr(..) => true,
            Type::Array(e, _) => e.is_memory_type(),
            Type::Frag(_) | Type::TensorMap => false,
        }
    }
    /// Size in bytes in memory (pointers are 64-bit); `None` for fragments and tensor maps.
    pub fn size_bytes(&self) -> Option<u64> {
        match self {
            Type::Scalar(s) => Some(s.size_bytes()),
            Type::Vector(s, n) => Some(s.size_bytes() * u64::from(*n)),
            Type::Array(e, n) => e.size_bytes().and_then(|b| b.checked_mul(*n)),
            Type::Ptr(..) => Some(8),
            Type::Frag(_) | Type::TensorMap => None,
        }
    }
    /// Natural alignment in bytes.
    pub fn align_bytes(&self) -> u64 {
        match self {
            Type::Scalar(s) => s.size_bytes(),
            Type::Vector(..) => self.size_bytes().unwrap_or(1),
            Type::Array(e, _) => e.align_bytes(),
            Type::Ptr(..) => 8,
            Type::Frag(_) => 1,
            Type::TensorMap => 64,
        }
    }
}

impl From<ScalarType> for Type {
    fn from(s: ScalarType) -> Type {
        Type::Scalar(s)
    }
}

impl fmt::Display for ScalarType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for AddrSpace {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl fmt::Display for FragType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "frag<{}, {}, {}",
            self.kind.name(),
            self.shape.name(),
            self.elem
        )?;
        if let Some(l) = self.layout {
            write!(f, ", {}", l.name())?;
        }
        f.write_str(">")
    }
}

/// The `.zir` spelling: `f32`, `vec<f32, 4>`, `[f32; 256]`, `ptr<global, f32>`,
/// `frag<a, m16n16k16, f16, row>`, `frag<acc, m16n16k16, f32>`, `tensormap`.
/// Written without recursion, so that even a type deeper than
/// [`MAX_TYPE_DEPTH`] (built directly in Rust) can be shown in an error.
impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut closers = Vec::new();
        let mut t = self;
        loop {
            match t {
                Type::Array(e, n) => {
                    f.write_str("[")?;
                    closers.push(Some(*n));
                    t = e;
                }
                Type::Ptr(space, e) => {
                    write!(f, "ptr<{space}, ")?;
                    closers.push(None);
                    t = e;
                }
                Type::Scalar(s) => break write!(f, "{s}")?,
                Type::Vector(s, n) => break write!(f, "vec<{s}, {n}>")?,
                Type::Frag(fr) => break write!(f, "{fr}")?,
                Type::TensorMap => break f.write_str("tensormap")?,
            }
        }
        // `Some(len)` closes an array, `None` a pointer.
        for c in closers.into_iter().rev() {
            match c {
                Some(n) => write!(f, "; {n}]")?,
                None => f.write_str(">")?,
            }
        }
        Ok(())
    }
}
