//! The autotuner's core (`zyntax_tune`) for `zyntax.tuning`.
//!
//! Documents, records and configs cross as JSON text (as `fusion_plan` does), so
//! what Python holds is exactly what the files hold. A refused record or file is
//! returned as its reason (Python raises `RejectedFile`); the search loop calls
//! back into Python to compile, time and save, and an exception that is not an
//! `Exception` (Ctrl-C) stops it and propagates unchanged.

use crate::checked::Text;
use crate::errors::{guard, ArgumentError};
use pyo3::exceptions::{PyException, PyOSError};
use pyo3::prelude::*;
use pyo3::types::PyDict;
use serde_json::Value;
use std::collections::{BTreeMap, HashMap};
use std::path::Path;
use zyntax_tune as tune;

fn parse(what: &str, text: &str) -> PyResult<Value> {
    serde_json::from_str(text).map_err(|e| ArgumentError::new_err(format!("{what}: not JSON: {e}")))
}

fn to_json(v: &Value) -> String {
    v.to_string()
}

/// A JSON text that fails to parse is a refused record, not an argument error:
/// `float("nan")` reaches here as `NaN`.
fn parsed_or<T>(text: &str, f: impl FnOnce(&Value) -> tune::Result<T>) -> Result<T, String> {
    let v: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    f(&v).map_err(|e| e.0)
}

/// The reason `config` (JSON) is not a valid config stored under `name`, or None.
#[pyfunction]
pub fn tune_check_config(name: Text, config: Text) -> Option<String> {
    parsed_or(&config, |v| tune::check_config(&name, v)).err()
}

/// The reason `record` (JSON) is not a valid record stored under `key`, or None.
#[pyfunction]
pub fn tune_check_record(key: Text, record: Text) -> Option<String> {
    parsed_or(&record, |v| tune::check_record(&key, v)).err()
}

/// The reason `doc` (JSON) is not a valid tuning document, or None.
#[pyfunction]
pub fn tune_check_db(doc: Text) -> Option<String> {
    parsed_or(&doc, tune::check_db).err()
}

/// `Config.name()` of a config given as JSON.
#[pyfunction]
pub fn tune_config_name(config: Text) -> PyResult<String> {
    let v = parse("config", &config)?;
    let cfg = config_of(&v).ok_or_else(|| ArgumentError::new_err("config: not a config"))?;
    Ok(cfg.name())
}

fn config_of(v: &Value) -> Option<tune::Config> {
    let u32_of = |f: &str| match v.get(f) {
        None | Some(Value::Null) => Some(None),
        Some(x) => x.as_u64().and_then(|x| u32::try_from(x).ok()).map(Some),
    };
    Some(tune::Config {
        block: u32::try_from(v.get("block")?.as_u64()?).ok()?,
        args: match v.get("args") {
            None | Some(Value::Null) => Default::default(),
            Some(a) => a.as_object()?.clone(),
        },
        max_registers: u32_of("max_registers")?,
        min_blocks: u32_of("min_blocks")?,
    })
}

type Limits6 = (u32, u32, u32, u32, u32, u32);
/// registers, shared_bytes, spill_store_bytes, spill_load_bytes, threads, dynamic shared.
type Resources6 = (u32, u32, u32, u32, u32, u32);

fn limits_of(l: Limits6) -> tune::Limits {
    tune::Limits {
        registers_per_sm: l.0,
        threads_per_block: l.1,
        threads_per_sm: l.2,
        blocks_per_sm: l.3,
        shared_per_sm: l.4,
        shared_per_block: l.5,
    }
}

fn resources_of(r: Resources6) -> tune::Resources {
    tune::Resources {
        registers: r.0,
        shared_bytes: r.1,
        spill_store_bytes: r.2,
        spill_load_bytes: r.3,
        threads: r.4,
        dynamic_shared: r.5,
    }
}

/// Fraction of an SM's threads resident (limits and resources as tuples).
#[pyfunction]
pub fn tune_occupancy(resources: Resources6, limits: Limits6) -> f64 {
    tune::occupancy(&resources_of(resources), &limits_of(limits))
}

/// Configs worth measuring (in order) and those pruned with why.
#[pyfunction]
pub fn tune_prune(
    candidates: Vec<(String, Resources6)>,
    limits: Limits6,
    min_occupancy_ratio: f64,
) -> (Vec<String>, Vec<(String, String)>) {
    let c: Vec<(String, tune::Resources)> = candidates
        .into_iter()
        .map(|(n, r)| (n, resources_of(r)))
        .collect();
    tune::prune(&c, &limits_of(limits), min_occupancy_ratio)
}

/// The bucket of key values: an int is rounded up to a power of two, a text
/// (Python passes `repr()` of anything else) hashed.
#[pyfunction]
pub fn tune_bucket(values: Vec<(String, Bound<'_, PyAny>)>) -> PyResult<BTreeMap<String, i64>> {
    let mut kv = Vec::new();
    for (k, v) in values {
        let v = match v.extract::<i64>() {
            Ok(i) if !v.is_instance_of::<pyo3::types::PyBool>() => tune::KeyValue::Int(i),
            _ => tune::KeyValue::Opaque(v.extract::<String>().map_err(|_| {
                ArgumentError::new_err(format!("key {k:?}: not an int in i64 or a text"))
            })?),
        };
        kv.push((k, v));
    }
    Ok(tune::bucket(kv.iter().map(|(k, v)| (k.as_str(), v))))
}

/// Where a record of `bucket` on `arch` and `version` lives in its document.
#[pyfunction]
pub fn tune_record_key(bucket: BTreeMap<String, i64>, arch: Text, version: Text) -> String {
    tune::record_key(&bucket, &arch, &version)
}

/// The record (JSON) of the nearest bucket with a best config, or None.
#[pyfunction]
#[pyo3(signature = (records, bucket, arch, version=None))]
pub fn tune_nearest(
    records: Text,
    bucket: BTreeMap<String, i64>,
    arch: Text,
    version: Option<String>,
) -> PyResult<Option<String>> {
    let v = parse("records", &records)?;
    let Some(m) = v.as_object() else {
        return Ok(None);
    };
    Ok(tune::nearest(m, &bucket, &arch, version.as_deref()).map(to_json))
}

/// The record (JSON) an installed table gives for `key` (exact) or `bucket` (nearest).
#[pyfunction]
pub fn tune_table_lookup(
    records: Text,
    key: Text,
    bucket: BTreeMap<String, i64>,
    arch: Text,
) -> PyResult<Option<String>> {
    let v = parse("records", &records)?;
    let Some(m) = v.as_object() else {
        return Ok(None);
    };
    Ok(tune::table_lookup(m, &key, &bucket, &arch).map(to_json))
}

/// From bundles' tuning tables (JSON): the stored config (JSON) of `kernel` for
/// `bucket` on `arch`, or None.
#[pyfunction]
pub fn tune_tuned_config(
    tables: Text,
    kernel: Text,
    arch: Text,
    bucket: BTreeMap<String, i64>,
) -> PyResult<Option<String>> {
    let v = parse("tables", &tables)?;
    let Some(m) = v.as_object() else {
        return Ok(None);
    };
    Ok(tune::tuned_config(m, &kernel, &arch, &bucket).map(|c| to_json(&c.to_json())))
}

/// The MAC of a tuning document (JSON) under the cache's secret.
#[pyfunction]
pub fn tune_db_mac(secret: &[u8], kernel_hash: Text, doc: Text) -> PyResult<String> {
    Ok(tune::db_mac(secret, &kernel_hash, &parse("doc", &doc)?))
}

/// Reads the tuning file of `kernel_hash` in `dir`: (document JSON, None), or
/// (None, why) with why `None` when the file does not exist.
#[pyfunction]
#[pyo3(signature = (dir, kernel_hash, secret=None))]
pub fn tune_read_db(
    dir: Text,
    kernel_hash: Text,
    secret: Option<&[u8]>,
) -> (Option<String>, Option<String>) {
    match tune::read_db(Path::new(&*dir), &kernel_hash, secret) {
        Ok(doc) => (Some(to_json(&doc)), None),
        Err(tune::ReadError::Missing) => (None, None),
        Err(tune::ReadError::Rejected(r)) => (None, Some(r.0)),
    }
}

/// Writes a tuning document (JSON) atomically, signed when `secret` is given.
#[pyfunction]
#[pyo3(signature = (dir, kernel_hash, doc, secret=None))]
pub fn tune_write_db(
    dir: Text,
    kernel_hash: Text,
    doc: Text,
    secret: Option<&[u8]>,
) -> PyResult<()> {
    let doc = parse("doc", &doc)?;
    tune::write_db(Path::new(&*dir), &kernel_hash, &doc, secret)
        .map_err(|e| PyOSError::new_err(e.to_string()))
}

/// The Python side of a search: callables, configs by index.
struct PyBench<'py> {
    py: Python<'py>,
    index: HashMap<String, usize>,
    prepare: Bound<'py, PyAny>,
    limits: Bound<'py, PyAny>,
    start: Bound<'py, PyAny>,
    measure: Bound<'py, PyAny>,
    save: Bound<'py, PyAny>,
    event: Bound<'py, PyAny>,
    /// An exception out of `save` (a bug: save_db swallows its own), raised at the end.
    save_error: Option<PyErr>,
}

impl PyBench<'_> {
    /// An `Exception` is the config's failure; anything else (KeyboardInterrupt) stops.
    fn failure(&self, e: PyErr) -> tune::Failure<PyErr> {
        if e.is_instance_of::<PyException>(self.py) {
            let ty = e
                .get_type(self.py)
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            let msg = e
                .value(self.py)
                .str()
                .map(|s| s.to_string())
                .unwrap_or_default();
            tune::Failure::Skip(format!("{ty}: {msg}"))
        } else {
            tune::Failure::Abort(e)
        }
    }

    fn idx(&self, c: &tune::Config) -> usize {
        self.index[&c.name()]
    }
}

impl tune::Bench for PyBench<'_> {
    type Abort = PyErr;

    fn prepare(&mut self, c: &tune::Config) -> Result<tune::Resources, tune::Failure<PyErr>> {
        let r = self
            .prepare
            .call1((self.idx(c),))
            .and_then(|r| r.extract::<Resources6>());
        r.map(resources_of).map_err(|e| self.failure(e))
    }

    fn limits(&mut self) -> Result<tune::Limits, PyErr> {
        Ok(limits_of(self.limits.call0()?.extract::<Limits6>()?))
    }

    fn start(&mut self) -> Result<(), PyErr> {
        self.start.call0().map(|_| ())
    }

    fn measure(&mut self, c: &tune::Config) -> Result<f64, tune::Failure<PyErr>> {
        let r = self
            .measure
            .call1((self.idx(c),))
            .and_then(|r| r.extract::<f64>());
        r.map_err(|e| self.failure(e))
    }

    fn save(&mut self, doc: &Value) {
        if let Err(e) = self.save.call1((to_json(doc),)) {
            self.save_error.get_or_insert(e);
        }
    }

    fn event(&mut self, e: tune::Event<'_>) {
        let (kind, name, detail) = match e {
            tune::Event::Warning(w) => ("warning", "", w.to_string()),
            tune::Event::Failed { config, why } => ("failed", config, why.to_string()),
            tune::Event::Pruned { config, why } => ("pruned", config, why.to_string()),
            tune::Event::Measured { config, ms } => ("measured", config, ms.to_string()),
        };
        let _ = self.event.call1((kind, name, detail));
    }
}

/// Runs the search (`zyntax_tune::tune`). `request` is JSON with `kernel`,
/// `configs` (config objects, the first the default), `bucket`, `arch`,
/// `version`, `min_occupancy_ratio` and `measure`; `table` the installed
/// records (JSON) or None; `doc` the tuning document (JSON). Callbacks take a
/// config's index: `prepare(i)` -> (registers, shared bytes, spill stores,
/// spill loads, threads, dynamic shared), `limits()` -> the six limits,
/// `start()`, `measure(i)` -> ms, `save(doc_json)`, `event(kind, name, detail)`.
/// Returns a dict: `best` (index or None), `source`, `record_key`, `record`
/// (JSON or None) and `error` (why no config ran, or None).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn tune_search<'py>(
    py: Python<'py>,
    request: Text,
    table: Option<Text>,
    doc: Text,
    prepare: Bound<'py, PyAny>,
    limits: Bound<'py, PyAny>,
    start: Bound<'py, PyAny>,
    measure: Bound<'py, PyAny>,
    save: Bound<'py, PyAny>,
    event: Bound<'py, PyAny>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let req = parse("request", &request)?;
        let bad = |what: &str| ArgumentError::new_err(format!("tune_search request: {what}"));
        let configs: Vec<tune::Config> = req["configs"]
            .as_array()
            .ok_or_else(|| bad("configs is not a list"))?
            .iter()
            .map(|c| config_of(c).ok_or_else(|| bad(&format!("{c} is not a config"))))
            .collect::<PyResult<_>>()?;
        let bucket: BTreeMap<String, i64> = req["bucket"]
            .as_object()
            .ok_or_else(|| bad("bucket is not an object"))?
            .iter()
            .map(|(k, v)| Ok((k.clone(), v.as_i64().ok_or_else(|| bad("bucket value"))?)))
            .collect::<PyResult<_>>()?;
        let text = |f: &str| {
            req[f]
                .as_str()
                .ok_or_else(|| bad(&format!("{f} is not text")))
        };
        let r = tune::Request {
            kernel: text("kernel")?,
            configs: &configs,
            bucket,
            arch: text("arch")?,
            version: text("version")?,
            min_occupancy_ratio: req["min_occupancy_ratio"].as_f64().unwrap_or(0.25),
            measure: req["measure"].as_bool().unwrap_or(true),
        };
        let table = table.map(|t| parse("table", &t)).transpose()?;
        let mut doc = parse("doc", &doc)?;
        let mut bench = PyBench {
            py,
            index: configs
                .iter()
                .enumerate()
                .map(|(i, c)| (c.name(), i))
                .collect(),
            prepare,
            limits,
            start,
            measure,
            save,
            event,
            save_error: None,
        };
        let out = PyDict::new(py);
        match tune::tune(
            &r,
            table.as_ref().and_then(Value::as_object),
            &mut doc,
            &mut bench,
        ) {
            Ok(o) => {
                out.set_item("best", o.best)?;
                out.set_item("source", o.source.as_str())?;
                out.set_item("record_key", o.record_key)?;
                out.set_item("record", o.record.as_ref().map(to_json))?;
                out.set_item("error", None::<String>)?;
            }
            Err(tune::SearchError::NothingRan(why)) => {
                out.set_item("best", None::<usize>)?;
                out.set_item("source", "measured")?;
                out.set_item("record_key", tune::record_key(&r.bucket, r.arch, r.version))?;
                out.set_item("record", None::<String>)?;
                out.set_item("error", why)?;
            }
            Err(tune::SearchError::Abort(e)) => return Err(e),
        }
        match bench.save_error {
            Some(e) => Err(e),
            None => Ok(out),
        }
    })
}
