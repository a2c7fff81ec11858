//! zyntax autotuning core: what tuning a kernel needs that is not Python.
//!
//! - [`Config`]: a candidate launch configuration (block, kernel arguments,
//!   register cap, minimum resident blocks) and its schema check;
//! - [`occupancy`] and [`prune`]: which configs are worth measuring, from
//!   ptxas' resource report and the device's [`Limits`] (reasons kept);
//! - [`bucket`], [`record_key`], [`nearest`]: records are per power-of-two
//!   bucket of the key values, exact arch and zyntax version; a new bucket
//!   starts from the nearest tuned one's best (warm start);
//! - [`check_record`] / [`check_db`]: every stored record is checked field by
//!   field; [`read_db`] / [`write_db`]: one JSON file per kernel, signed with
//!   the kernel cache's HMAC (the same bytes as `zyntax.frontend.cache.mac`)
//!   and written atomically: a forged, foreign or malformed file is ignored
//!   and the kernel re-tuned, never trusted;
//! - [`tune`]: the search loop over a caller's [`Bench`] (compile, limits,
//!   measure, save), so a Rust embedder tunes with its own launcher.
//!
//! `zyntax.tuning` (Python) is a front-end over this crate: the decorator,
//! CUDA-event timing and argument binding stay there.
//!
//! Tuning a (fake) kernel whose time is a closure:
//!
//! ```
//! use zyntax_tune::{bucket, tune, Bench, Config, Failure, KeyValue, Limits, Request, Resources};
//! use serde_json::Value;
//!
//! struct Fake<F: FnMut(&Config) -> f64> { time: F, saves: usize }
//! impl<F: FnMut(&Config) -> f64> Bench for Fake<F> {
//!     type Abort = ();
//!     fn prepare(&mut self, c: &Config) -> Result<Resources, Failure<()>> {
//!         Ok(Resources { registers: 32, threads: c.block, ..Resources::default() })
//!     }
//!     fn limits(&mut self) -> Result<Limits, ()> { Ok(Limits::default()) }
//!     fn measure(&mut self, c: &Config) -> Result<f64, Failure<()>> { Ok((self.time)(c)) }
//!     fn save(&mut self, _doc: &Value) { self.saves += 1 }
//! }
//!
//! let configs: Vec<Config> = [64, 128, 256, 512].map(Config::block).to_vec();
//! let req = Request {
//!     kernel: "scale",
//!     configs: &configs,
//!     bucket: bucket([("n", &KeyValue::Int(1000))]),
//!     arch: "sm_90",
//!     version: "0.1.0",
//!     min_occupancy_ratio: 0.25,
//!     measure: true,
//! };
//! // A kernel fastest at 256 threads per block.
//! let mut bench = Fake { time: |c: &Config| (c.block as f64 - 256.0).abs() + 1.0, saves: 0 };
//! let mut doc = zyntax_tune::empty_db();
//! let out = tune(&req, None, &mut doc, &mut bench).map_err(|_| "no config ran").unwrap();
//! assert_eq!(configs[out.best].block, 256);
//! assert_eq!(bench.saves, 5); // after each of 4 measurements, and at the end
//! assert_eq!(doc["records"][&out.record_key]["best"], "block=256");
//! ```

pub mod config;
pub mod db;
pub mod digest;
pub mod prune;
pub mod pyjson;
pub mod record;
pub mod search;

pub use config::{check_config, Config};
pub use db::{db_mac, read_db, signed, write_db, ReadError};
pub use prune::{occupancy, prune, Limits, Resources};
pub use record::{
    bucket, check_db, check_record, empty_db, nearest, record_key, table_lookup, tuned_config,
    Bucket, KeyValue, DB_VERSION,
};
pub use search::{tune, Bench, Event, Failure, Outcome, Request, SearchError, Source};

/// A tuning record or file refused, with what is wrong and where.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Rejected(pub String);

pub type Result<T> = std::result::Result<T, Rejected>;
