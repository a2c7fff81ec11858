//! Entity references: typed `u32` indices into a function's arenas.
//! `Display` matches the `.zir` spelling (`v3`, `block2`).

use serde::{Deserialize, Serialize};
use std::fmt;

macro_rules! entity {
    ($name:ident, $prefix:literal, $doc:literal) => {
        #[doc = $doc]
        #[derive(
            Copy, Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
        )]
        #[serde(transparent)]
        pub struct $name(pub u32);

        impl $name {
            pub fn index(self) -> usize {
                self.0 as usize
            }
            pub fn from_index(i: usize) -> Self {
                // Arenas are bounded far below u32::MAX by the verifier's size limits.
                $name(i as u32)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }
    };
}

entity!(
    ValueId,
    "v",
    "An SSA value: a block parameter or an instruction result."
);
entity!(BlockId, "block", "A basic block with parameters.");
entity!(InstId, "inst", "An instruction.");
