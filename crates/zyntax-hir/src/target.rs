//! GPU targets: SM architectures and PTX ISA versions.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An NVIDIA SM architecture zyntax can target. Ordered by capability, with
/// `Sm90a` (arch-specific Hopper features such as `wgmma`) above `Sm90`.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Arch {
    Sm70,
    Sm75,
    Sm80,
    Sm86,
    Sm89,
    Sm90,
    Sm90a,
}

impl Arch {
    pub const ALL: [Arch; 7] = [
        Arch::Sm70,
        Arch::Sm75,
        Arch::Sm80,
        Arch::Sm86,
        Arch::Sm89,
        Arch::Sm90,
        Arch::Sm90a,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Arch::Sm70 => "sm_70",
            Arch::Sm75 => "sm_75",
            Arch::Sm80 => "sm_80",
            Arch::Sm86 => "sm_86",
            Arch::Sm89 => "sm_89",
            Arch::Sm90 => "sm_90",
            Arch::Sm90a => "sm_90a",
        }
    }

    pub fn from_name(s: &str) -> Option<Arch> {
        Arch::ALL.iter().copied().find(|a| a.name() == s)
    }

    /// Compute capability (major, minor).
    pub fn compute_capability(self) -> (u32, u32) {
        match self {
            Arch::Sm70 => (7, 0),
            Arch::Sm75 => (7, 5),
            Arch::Sm80 => (8, 0),
            Arch::Sm86 => (8, 6),
            Arch::Sm89 => (8, 9),
            Arch::Sm90 | Arch::Sm90a => (9, 0),
        }
    }

    /// The SM number as PTX spells it without the suffix (70, 75, ..., 90).
    pub fn sm(self) -> u32 {
        let (ma, mi) = self.compute_capability();
        ma * 10 + mi
    }

    /// The arch for a device's compute capability, if zyntax supports it. Newer
    /// devices run the newest baseline arch's PTX through the driver JIT.
    pub fn from_compute_capability(major: u32, minor: u32) -> Option<Arch> {
        let sm = major * 10 + minor;
        Arch::ALL
            .iter()
            .copied()
            .filter(|a| *a != Arch::Sm90a && a.sm() <= sm)
            .max()
    }

    /// The PTX ISA version zyntax emits for this arch by default: the lowest that
    /// the arch allows and that covers every HIR instruction available on it.
    pub fn default_ptx(self) -> PtxVersion {
        match self {
            Arch::Sm70 => PtxVersion::new(6, 4),
            Arch::Sm75 => PtxVersion::new(6, 4),
            Arch::Sm80 => PtxVersion::new(7, 0),
            Arch::Sm86 => PtxVersion::new(7, 1),
            Arch::Sm89 => PtxVersion::new(7, 8),
            Arch::Sm90 => PtxVersion::new(8, 0),
            Arch::Sm90a => PtxVersion::new(8, 0),
        }
    }
}

impl fmt::Display for Arch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A PTX ISA version such as 7.8.
#[derive(Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PtxVersion {
    pub major: u32,
    pub minor: u32,
}

impl PtxVersion {
    pub const fn new(major: u32, minor: u32) -> PtxVersion {
        PtxVersion { major, minor }
    }
    /// LLVM's feature spelling, e.g. `ptx78`.
    pub fn llvm_feature(self) -> String {
        format!("ptx{}{}", self.major, self.minor)
    }
}

impl fmt::Display for PtxVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}
