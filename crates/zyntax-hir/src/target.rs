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

    /// The arch compiled for when none is named and no device is known (a
    /// module without `targets(...)`, AOT builds, machines without a GPU):
    /// the oldest arch with bf16, `cp.async` and `mma.sync`, which every
    /// newer device also runs through the driver's JIT. Every default in
    /// zyntax (the CLI, `zyntax.compile`, the `@zyntax.kernel` front-end)
    /// is this one (docs/lowering.md, "Targets").
    pub const DEFAULT: Arch = Arch::Sm80;

    /// Whether code for this arch runs on exactly its compute capability only
    /// (`sm_90a`: wgmma, setmaxnreg), not forward on newer devices.
    pub fn is_arch_specific(self) -> bool {
        self == Arch::Sm90a
    }

    /// The newest portable (not arch-specific) arch a device of this compute
    /// capability runs, if zyntax supports one: newer devices run its PTX
    /// through the driver JIT. `None` below sm_70.
    pub fn from_compute_capability(major: u32, minor: u32) -> Option<Arch> {
        let sm = major.saturating_mul(10).saturating_add(minor);
        Arch::ALL
            .iter()
            .copied()
            .filter(|a| !a.is_arch_specific() && a.sm() <= sm)
            .max()
    }

    /// The arch the runtime compiles for on a device of this compute
    /// capability: the arch-specific one when the capability is exactly its
    /// own (9.0 gets `sm_90a`, so kernels may use wgmma), else
    /// [`Arch::from_compute_capability`]. `None` below sm_70.
    pub fn for_device(major: u32, minor: u32) -> Option<Arch> {
        Arch::ALL
            .iter()
            .copied()
            .find(|a| a.is_arch_specific() && a.compute_capability() == (major, minor))
            .or_else(|| Arch::from_compute_capability(major, minor))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_archs() {
        let dev = |ma, mi| Arch::for_device(ma, mi).map(Arch::name);
        assert_eq!(dev(6, 1), None);
        assert_eq!(dev(7, 0), Some("sm_70"));
        assert_eq!(dev(7, 2), Some("sm_70"));
        assert_eq!(dev(8, 7), Some("sm_86"));
        assert_eq!(dev(8, 9), Some("sm_89"));
        // wgmma/setmaxnreg code runs on exactly 9.0; newer devices JIT plain sm_90.
        assert_eq!(dev(9, 0), Some("sm_90a"));
        assert_eq!(dev(10, 0), Some("sm_90"));
        assert_eq!(dev(12, 1), Some("sm_90"));
        assert_eq!(dev(u32::MAX, u32::MAX), Some("sm_90"));
        assert_eq!(Arch::from_compute_capability(9, 0), Some(Arch::Sm90));
    }

    #[test]
    fn default_arch_is_portable() {
        assert!(!Arch::DEFAULT.is_arch_specific());
        assert_eq!(Arch::DEFAULT, Arch::Sm80);
        assert_eq!(Arch::ALL.iter().filter(|a| a.is_arch_specific()).count(), 1);
    }
}
