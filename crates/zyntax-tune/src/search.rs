//! The search loop: order the configs (the nearest tuned bucket's best first),
//! compile them, prune by resources, measure, and save the record after every
//! measurement, so an interrupted search keeps its best so far and resumes
//! where it stopped. How a config is compiled, launched and timed is the
//! caller's [`Bench`]: Python passes callables, a Rust embedder its own launcher.

use crate::config::Config;
use crate::prune::{prune, Limits, Resources};
use crate::record::{nearest, new_record, record_key, table_lookup, Bucket, DB_VERSION, MAX_TEXT};
use serde_json::{json, Map, Value};
use std::time::Instant;

/// What one search is about.
#[derive(Clone, Debug)]
pub struct Request<'a> {
    /// The kernel's name (for records and messages).
    pub kernel: &'a str,
    /// The candidates; the first is the default.
    pub configs: &'a [Config],
    /// The bucket of the key values ([`crate::bucket`]).
    pub bucket: Bucket,
    /// Exact arch (`sm_90a` is not `sm_90`) and zyntax version: records are per both.
    pub arch: &'a str,
    pub version: &'a str,
    /// Configs under this fraction of the best occupancy are not measured.
    pub min_occupancy_ratio: f64,
    /// False: never compile or measure (`ZYNTAX_AUTOTUNE=0`); the stored best or
    /// the first config is used.
    pub measure: bool,
}

/// A config's failure: `Skip` records why and goes on with the others; `Abort`
/// stops the search (an interrupt), keeping what was saved.
#[derive(Debug)]
pub enum Failure<E> {
    Skip(String),
    Abort(E),
}

/// What happened, for logs and progress bars.
#[derive(Debug)]
pub enum Event<'a> {
    /// An unusable stored or saved record, with why.
    Warning(&'a str),
    Failed {
        config: &'a str,
        why: &'a str,
    },
    Pruned {
        config: &'a str,
        why: &'a str,
    },
    Measured {
        config: &'a str,
        ms: f64,
    },
}

/// How configs are compiled, measured and saved.
pub trait Bench {
    /// What stops a search (an interrupt, an error that is no config's fault).
    type Abort;
    /// Compiles `cfg` and reports its resources; `Skip` if it does not compile.
    fn prepare(&mut self, cfg: &Config) -> Result<Resources, Failure<Self::Abort>>;
    /// The device's limits (asked once, after compiling).
    fn limits(&mut self) -> Result<Limits, Self::Abort>;
    /// Called once before the first measurement (allocate rotated inputs).
    fn start(&mut self) -> Result<(), Self::Abort> {
        Ok(())
    }
    /// Time of `cfg` in ms (compiled by `prepare` before); `Skip` if it fails to launch.
    fn measure(&mut self, cfg: &Config) -> Result<f64, Failure<Self::Abort>>;
    /// Persists the whole document (after each measurement and at the end).
    /// A failure to write is the implementation's to report; it does not stop the search.
    fn save(&mut self, doc: &Value);
    /// Something to log.
    fn event(&mut self, _e: Event<'_>) {}
}

/// Where the answer came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Source {
    /// An installed table (from a bundle): nothing compiled or measured.
    Table,
    /// A complete record of the tuning document.
    Database,
    /// Measuring is off: the stored best (complete or not) or the first config.
    Default,
    /// Measured now.
    Measured,
}

impl Source {
    pub fn as_str(self) -> &'static str {
        match self {
            Source::Table => "table",
            Source::Database => "database",
            Source::Default => "default",
            Source::Measured => "measured",
        }
    }
}

/// The answer of a search.
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Index of the chosen config in `Request::configs`.
    pub best: usize,
    pub source: Source,
    pub record_key: String,
    /// The record the answer comes from (None for `Source::Default`).
    pub record: Option<Value>,
}

/// Why a search gave no answer.
#[derive(Debug)]
pub enum SearchError<E> {
    /// No config compiled, fitted and ran: every config with why.
    NothingRan(String),
    Abort(E),
}

fn best_of(rec: &Value, configs: &[Config]) -> Option<usize> {
    let best = rec.get("best")?.as_str()?;
    configs.iter().position(|c| c.name() == best)
}

fn cut(s: String) -> String {
    if s.chars().count() <= MAX_TEXT {
        s
    } else {
        s.chars().take(MAX_TEXT).collect()
    }
}

/// Tunes `req` against `doc`, the kernel's tuning document (checked, or
/// [`crate::empty_db`]), updated in place and saved through `bench`. With an
/// installed `table` (a bundle's records) the answer comes from it, exact bucket
/// or nearest, and nothing is compiled or measured.
pub fn tune<B: Bench>(
    req: &Request<'_>,
    table: Option<&Map<String, Value>>,
    doc: &mut Value,
    bench: &mut B,
) -> Result<Outcome, SearchError<B::Abort>> {
    let configs = req.configs;
    let rk = record_key(&req.bucket, req.arch, req.version);
    let t0 = Instant::now();
    let outcome = |best, source, record: Option<&Value>| Outcome {
        best,
        source,
        record_key: rk.clone(),
        record: record.cloned(),
    };
    if configs.is_empty() {
        return Err(SearchError::NothingRan("no configs to tune".into()));
    }
    if let Some(rec) = table.and_then(|t| table_lookup(t, &rk, &req.bucket, req.arch)) {
        if let Some(i) = best_of(rec, configs) {
            return Ok(outcome(i, Source::Table, Some(rec)));
        }
    }
    if !doc.get("records").is_some_and(Value::is_object) {
        *doc = crate::record::empty_db();
    }
    let stored = doc["records"].get(&rk).cloned();
    if let Some(rec) = &stored {
        if rec.get("complete") == Some(&Value::Bool(true)) {
            if let Some(i) = best_of(rec, configs) {
                return Ok(outcome(i, Source::Database, Some(rec)));
            }
        }
    }
    if !req.measure {
        let i = stored
            .as_ref()
            .and_then(|r| best_of(r, configs))
            .unwrap_or(0);
        return Ok(outcome(i, Source::Default, None));
    }

    let mut rec = match stored {
        Some(r) => r,
        None => {
            let mut r = new_record(&req.bucket, req.arch, req.version, req.kernel);
            let records = doc["records"].as_object().expect("checked above");
            if let Some(w) = nearest(records, &req.bucket, req.arch, Some(req.version)) {
                r["warm_start"] = w["best"].clone();
            }
            r
        }
    };
    for field in ["times_ms", "pruned", "failed"] {
        if !rec.get(field).is_some_and(Value::is_object) {
            rec[field] = json!({});
        }
    }
    rec["configs"] = configs
        .iter()
        .map(|c| (c.name(), c.to_json()))
        .collect::<Map<String, Value>>()
        .into();
    doc["version"] = DB_VERSION.into();
    doc["kernel"] = req.kernel.into();
    doc["records"][&rk] = rec.clone();

    // The order: the warm start first, then as given; done configs are skipped (resume).
    let mut order: Vec<usize> = (0..configs.len()).collect();
    if let Some(w) = rec.get("warm_start").and_then(Value::as_str) {
        if let Some(p) = configs.iter().position(|c| c.name() == w) {
            order.retain(|i| *i != p);
            order.insert(0, p);
        }
    }
    let done = |rec: &Value, n: &str| {
        ["times_ms", "failed", "pruned"]
            .iter()
            .any(|f| rec[*f].get(n).is_some())
    };
    let todo: Vec<usize> = order
        .into_iter()
        .filter(|i| !done(&rec, &configs[*i].name()))
        .collect();

    // 1. compile and read resources; 2. prune.
    let mut prepared: Vec<(String, Resources)> = Vec::new();
    for &i in &todo {
        let n = configs[i].name();
        match bench.prepare(&configs[i]) {
            Ok(r) => prepared.push((n, r)),
            Err(Failure::Abort(e)) => return Err(SearchError::Abort(e)),
            Err(Failure::Skip(why)) => {
                let why = cut(format!("compile: {why}"));
                bench.event(Event::Failed {
                    config: &n,
                    why: &why,
                });
                rec["failed"][&n] = why.into();
            }
        }
    }
    let (keep, pruned) = if prepared.is_empty() {
        (Vec::new(), Vec::new())
    } else {
        let lim = bench.limits().map_err(SearchError::Abort)?;
        prune(&prepared, &lim, req.min_occupancy_ratio)
    };
    for (n, why) in &pruned {
        bench.event(Event::Pruned { config: n, why });
        rec["pruned"][n] = why.clone().into();
    }

    // 3. measure, saving after each config (an interrupt keeps the best so far).
    if !keep.is_empty() {
        bench.start().map_err(SearchError::Abort)?;
    }
    for n in &keep {
        let cfg = configs
            .iter()
            .find(|c| &c.name() == n)
            .expect("a given config");
        match bench.measure(cfg) {
            Ok(ms) => {
                bench.event(Event::Measured { config: n, ms });
                rec["times_ms"][n] = json!(ms);
                rec["best"] = fastest(&rec["times_ms"]).into();
                doc["records"][&rk] = rec.clone();
                bench.save(doc);
            }
            Err(Failure::Abort(e)) => return Err(SearchError::Abort(e)),
            Err(Failure::Skip(why)) => {
                let why = cut(format!("launch: {why}"));
                bench.event(Event::Failed {
                    config: n,
                    why: &why,
                });
                rec["failed"][n] = why.into();
            }
        }
    }
    rec["complete"] = true.into();
    let before = rec.get("seconds").and_then(Value::as_f64).unwrap_or(0.0);
    rec["seconds"] = json!(before + t0.elapsed().as_secs_f64());
    doc["records"][&rk] = rec.clone();
    bench.save(doc);
    match best_of(&rec, configs) {
        Some(i) => Ok(outcome(i, Source::Measured, Some(&rec))),
        None => {
            let mut why: Vec<String> = Vec::new();
            for f in ["failed", "pruned"] {
                for (n, w) in rec[f].as_object().into_iter().flatten() {
                    why.push(format!("{n}: {}", w.as_str().unwrap_or("")));
                }
            }
            Err(SearchError::NothingRan(format!(
                "autotune {}: no config could run ({})",
                req.kernel,
                why.join("; ")
            )))
        }
    }
}

/// The fastest measured config's name (ties: the first in key order).
fn fastest(times: &Value) -> String {
    let mut best: Option<(&String, f64)> = None;
    for (n, t) in times.as_object().into_iter().flatten() {
        let t = t.as_f64().unwrap_or(f64::INFINITY);
        match best {
            Some((_, b)) if b <= t => {}
            _ => best = Some((n, t)),
        }
    }
    best.map(|(n, _)| n.clone()).unwrap_or_default()
}
