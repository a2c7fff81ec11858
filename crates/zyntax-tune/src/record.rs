//! Key buckets, record keys, the nearest tuned bucket, and the schema of tuning
//! records and documents (checked field by field: a file that fails is ignored).
//!
//! A record is kept as JSON (`serde_json::Value`) so that it round-trips through
//! Python and files unchanged; [`check_record`] is what makes it trustworthy.

use crate::config::check_config;
use crate::digest::{hex, sha256};
use crate::{Rejected, Result};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Format of tuning documents: 2 carries the cache's MAC and is checked field by field.
pub const DB_VERSION: u64 = 2;
/// Bounds of a tuning file: larger or deeper ones are refused, not truncated.
pub const MAX_DB_BYTES: u64 = 4 << 20;
pub const MAX_RECORDS: usize = 4096;
pub const MAX_CONFIGS: usize = 4096;
pub const MAX_TEXT: usize = 16 << 10;

/// Key values rounded up to powers of two, by key name.
pub type Bucket = BTreeMap<String, i64>;

/// A key value: an integer (bucketed to the next power of two) or anything else,
/// given by a text that identifies it (Python passes `repr(value)`), hashed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum KeyValue {
    Int(i64),
    Opaque(String),
}

/// Bucket of one key value: positive integers round up to a power of two
/// (saturating at 2^62), others stay; opaque values hash to 32 bits.
pub fn bucket_value(v: &KeyValue) -> i64 {
    match v {
        KeyValue::Int(i) if *i > 0 => (*i as u64).next_power_of_two().min(1 << 62) as i64,
        KeyValue::Int(i) => *i,
        KeyValue::Opaque(text) => {
            i64::from_str_radix(&hex(&sha256(text.as_bytes()))[..8], 16).unwrap_or(0)
        }
    }
}

/// The bucket of a kernel's key values.
pub fn bucket<'a>(values: impl IntoIterator<Item = (&'a str, &'a KeyValue)>) -> Bucket {
    values
        .into_iter()
        .map(|(k, v)| (k.to_string(), bucket_value(v)))
        .collect()
}

/// `n=1024,k=64|sm_90|0.1.0`: where a record lives in its document.
pub fn record_key(b: &Bucket, arch: &str, version: &str) -> String {
    let keys: Vec<String> = b.iter().map(|(k, v)| format!("{k}={v}")).collect();
    format!("{}|{arch}|{version}", keys.join(","))
}

fn bucket_of(v: &Value) -> Option<Bucket> {
    v.as_object()?
        .iter()
        .map(|(k, x)| Some((k.clone(), x.as_i64()?)))
        .collect()
}

/// Distance of two buckets: the sum of |log2| differences; None across key sets.
fn distance(a: &Bucket, b: &Bucket) -> Option<f64> {
    if a.len() != b.len() || a.keys().any(|k| !b.contains_key(k)) {
        return None;
    }
    let l = |x: i64| (x.max(1) as f64).log2();
    Some(a.iter().map(|(k, x)| (l(*x) - l(b[k])).abs()).sum())
}

/// The record of the closest bucket to `b` on `arch` (and `version`, when
/// given) that has a best config; ties go to the first. Loosely shaped records
/// (installed tables are not schema-checked) are skipped, never trusted blindly.
pub fn nearest<'a>(
    records: &'a Map<String, Value>,
    b: &Bucket,
    arch: &str,
    version: Option<&str>,
) -> Option<&'a Value> {
    let mut best: Option<(f64, &Value)> = None;
    for r in records.values() {
        let Some(m) = r.as_object() else { continue };
        if m.get("arch").and_then(Value::as_str) != Some(arch) {
            continue;
        }
        if m.get("best")
            .and_then(Value::as_str)
            .unwrap_or("")
            .is_empty()
        {
            continue;
        }
        if version.is_some() && m.get("version").and_then(Value::as_str) != version {
            continue;
        }
        let Some(d) = m
            .get("bucket")
            .and_then(bucket_of)
            .and_then(|rb| distance(&rb, b))
        else {
            continue;
        };
        match best {
            Some((bd, _)) if bd <= d => {}
            _ => best = Some((d, r)),
        }
    }
    best.map(|(_, r)| r)
}

/// The record for `b` in an installed table: the exact one, else the nearest
/// on `arch` of any version (a deployed machine never measures).
pub fn table_lookup<'a>(
    records: &'a Map<String, Value>,
    rk: &str,
    b: &Bucket,
    arch: &str,
) -> Option<&'a Value> {
    records
        .get(rk)
        .filter(|r| r.is_object())
        .or_else(|| nearest(records, b, arch, None))
}

/// From bundles' tuning tables (`{hash: {"kernel", "records"}}`, as a bundle's
/// manifest carries them): the stored best config of `kernel` for bucket `b` on
/// `arch`, from the record of that bucket (any version) or the nearest one. A
/// best config that fails [`check_config`] is not used.
pub fn tuned_config(
    tables: &Map<String, Value>,
    kernel: &str,
    arch: &str,
    b: &Bucket,
) -> Option<crate::Config> {
    tables
        .values()
        .filter(|t| t.get("kernel").and_then(Value::as_str) == Some(kernel))
        .find_map(|t| {
            let rec = nearest(t.get("records")?.as_object()?, b, arch, None)?;
            let best = rec.get("best")?.as_str()?;
            check_config(best, rec.get("configs")?.get(best)?).ok()
        })
}

/// A new, empty record for a bucket.
pub fn new_record(b: &Bucket, arch: &str, version: &str, kernel: &str) -> Value {
    json!({
        "bucket": b,
        "arch": arch,
        "version": version,
        "kernel": kernel,
        "times_ms": {},
        "pruned": {},
        "failed": {},
        "best": null,
        "complete": false,
    })
}

fn cut(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

fn text<'a>(x: Option<&'a Value>, what: &str, limit: usize) -> Result<&'a str> {
    match x.and_then(Value::as_str) {
        Some(s) if s.chars().count() <= limit => Ok(s),
        _ => Err(Rejected(format!(
            "{what} is not a string of at most {limit} characters"
        ))),
    }
}

fn number(x: &Value, what: &str) -> Result<f64> {
    match x.as_f64() {
        Some(f) if x.is_number() && f.is_finite() && f >= 0.0 => Ok(f),
        _ => Err(Rejected(format!("{what} is not a finite number >= 0"))),
    }
}

/// `x` as an object of at most `limit` entries with keys of at most 4096 characters.
pub(crate) fn table<'a>(x: &'a Value, what: &str, limit: usize) -> Result<&'a Map<String, Value>> {
    match x.as_object() {
        Some(m) if m.len() <= limit => {
            if m.keys().any(|k| k.chars().count() > 4096) {
                return Err(Rejected(format!(
                    "a key of {what} is not a string of at most 4096 characters"
                )));
            }
            Ok(m)
        }
        _ => Err(Rejected(format!(
            "{what} is not an object of at most {limit} entries"
        ))),
    }
}

const RECORD_FIELDS: [&str; 12] = [
    "bucket",
    "arch",
    "version",
    "kernel",
    "times_ms",
    "pruned",
    "failed",
    "best",
    "complete",
    "configs",
    "warm_start",
    "seconds",
];

fn is_arch(s: &str) -> bool {
    let Some(rest) = s.strip_prefix("sm_") else {
        return false;
    };
    let digits = rest.strip_suffix('a').unwrap_or(rest);
    (2..=3).contains(&digits.len()) && digits.bytes().all(|b| b.is_ascii_digit())
}

/// Rejected unless `rec` is a well-formed record stored under its own key.
pub fn check_record(rk: &str, rec: &Value) -> Result<()> {
    let where_ = format!("record {:?}", cut(rk, 120));
    let bad = |what: &str| Rejected(format!("{where_}{what}"));
    let Some(m) = rec.as_object() else {
        return Err(bad(" is not a record object (or has unknown fields)"));
    };
    if m.keys().any(|k| !RECORD_FIELDS.contains(&k.as_str())) {
        return Err(bad(" is not a record object (or has unknown fields)"));
    }
    let null = Value::Null;
    let b = table(
        m.get("bucket").unwrap_or(&null),
        &format!("{where_} bucket"),
        64,
    )?;
    let bucket: Option<Bucket> = b
        .iter()
        .map(|(k, v)| Some((k.clone(), v.as_i64().filter(|_| v.is_i64())?)))
        .collect();
    let Some(bucket) = bucket else {
        return Err(bad(": a bucket value is not an integer"));
    };
    let arch = text(m.get("arch"), &format!("{where_} arch"), 16)?;
    if !is_arch(arch) {
        return Err(bad(&format!(": arch {arch:?} is not sm_XY")));
    }
    let version = text(m.get("version"), &format!("{where_} version"), 128)?;
    if rk != record_key(&bucket, arch, version) {
        return Err(bad(" is not stored under its own bucket, arch and version"));
    }
    if let Some(k) = m.get("kernel") {
        text(Some(k), &format!("{where_} kernel"), 1024)?;
    }
    let empty = Value::Object(Map::new());
    let configs = table(
        m.get("configs").unwrap_or(&null),
        &format!("{where_} configs"),
        MAX_CONFIGS,
    )?;
    for (name, d) in configs {
        check_config(name, d)?;
    }
    let times = table(
        m.get("times_ms").unwrap_or(&empty),
        &format!("{where_} times_ms"),
        MAX_CONFIGS,
    )?;
    for (name, t) in times {
        number(t, &format!("{where_}: the time of {:?}", cut(name, 80)))?;
    }
    let mut named: Vec<&String> = times.keys().collect();
    for field in ["pruned", "failed"] {
        let why = table(
            m.get(field).unwrap_or(&empty),
            &format!("{where_} {field}"),
            MAX_CONFIGS,
        )?;
        for (name, t) in why {
            let what = format!("{where_}: {field} reason of {:?}", cut(name, 80));
            text(Some(t), &what, MAX_TEXT)?;
        }
        named.extend(why.keys());
    }
    if let Some(n) = named.into_iter().find(|n| !configs.contains_key(*n)) {
        return Err(bad(&format!(
            " names config {:?} it does not describe",
            cut(n, 80)
        )));
    }
    match m.get("best") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if times.contains_key(s) => {}
        _ => return Err(bad(": best is not a measured config")),
    }
    match m.get("warm_start") {
        None | Some(Value::Null) => {}
        w => {
            text(w, &format!("{where_} warm_start"), 4096)?;
        }
    }
    if !matches!(m.get("complete"), None | Some(Value::Bool(_))) {
        return Err(bad(": complete is not true or false"));
    }
    if let Some(s) = m.get("seconds") {
        number(s, &format!("{where_} seconds"))?;
    }
    Ok(())
}

/// Rejected unless `doc` is a well-formed tuning document (every record checked;
/// the `mac` field aside).
pub fn check_db(doc: &Value) -> Result<()> {
    let Some(m) = doc.as_object() else {
        return Err(Rejected(
            "not a tuning document (an object of version, kernel, records)".into(),
        ));
    };
    if m.keys()
        .any(|k| !["version", "kernel", "records", "mac"].contains(&k.as_str()))
    {
        return Err(Rejected(
            "not a tuning document (an object of version, kernel, records)".into(),
        ));
    }
    // Python compares with ==, so 2.0 is format 2 as well.
    if m.get("version").and_then(Value::as_f64) != Some(DB_VERSION as f64) {
        let got = m
            .get("version")
            .map_or("None".into(), crate::pyjson::py_str);
        return Err(Rejected(format!(
            "tuning format {got}, this zyntax reads {DB_VERSION}"
        )));
    }
    if let Some(k) = m.get("kernel") {
        text(Some(k), "kernel", 1024)?;
    }
    let null = Value::Null;
    let records = table(m.get("records").unwrap_or(&null), "records", MAX_RECORDS)?;
    for (rk, rec) in records {
        check_record(rk, rec)?;
    }
    Ok(())
}

/// An empty document.
pub fn empty_db() -> Value {
    json!({"version": DB_VERSION, "records": {}})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Config;

    fn b(n: i64) -> Bucket {
        bucket([("n", &KeyValue::Int(n))])
    }

    #[test]
    fn buckets_round_up_to_powers_of_two() {
        assert_eq!(b(1000)["n"], 1024);
        assert_eq!(b(1)["n"], 1);
        assert_eq!(b(1024)["n"], 1024);
        assert_eq!(b(0)["n"], 0);
        assert_eq!(b(-5)["n"], -5);
        // Python: int(sha256(repr("f32")).hexdigest()[:8], 16).
        let o = bucket([("dt", &KeyValue::Opaque("'f32'".into()))]);
        assert_eq!(
            o["dt"],
            i64::from_str_radix(&hex(&sha256(b"'f32'"))[..8], 16).unwrap()
        );
        let two = bucket([("n", &KeyValue::Int(1000)), ("k", &KeyValue::Int(64))]);
        assert_eq!(record_key(&two, "sm_90", "v"), "k=64,n=1024|sm_90|v");
    }

    #[test]
    fn nearest_bucket_on_the_same_arch() {
        let recs = json!({
            "a": {"bucket": {"n": 1024}, "arch": "sm_90", "version": "v", "best": "x"},
            "b": {"bucket": {"n": 1 << 20}, "arch": "sm_90", "version": "v", "best": "y"},
            "c": {"bucket": {"n": 1 << 19}, "arch": "sm_80", "version": "v", "best": "z"},
            "d": {"bucket": {"n": 1 << 18}, "arch": "sm_90", "version": "v", "best": null},
            "e": "not a record",
        });
        let recs = recs.as_object().unwrap();
        let best = |n: i64, arch: &str| {
            nearest(recs, &b(n), arch, Some("v")).map(|r| r["best"].as_str().unwrap().to_string())
        };
        assert_eq!(best(1 << 18, "sm_90").as_deref(), Some("y"));
        assert_eq!(best(4096, "sm_90").as_deref(), Some("x"));
        assert_eq!(best(4096, "sm_90a"), None);
        assert_eq!(
            nearest(recs, &bucket([("m", &KeyValue::Int(4))]), "sm_90", None),
            None
        );
        assert_eq!(nearest(recs, &b(4096), "sm_90", Some("w")), None);
        // An installed table answers exactly, then by the nearest bucket of any version.
        assert_eq!(
            table_lookup(recs, "a", &b(1 << 20), "sm_90").unwrap()["best"],
            "x"
        );
        assert_eq!(
            table_lookup(recs, "zz", &b(1 << 20), "sm_90").unwrap()["best"],
            "y"
        );
    }

    #[test]
    fn tuned_config_from_bundle_tables() {
        let (rk, rec) = good();
        let tables = json!({
            "h1": {"kernel": "other", "records": {}},
            "h2": {"kernel": "k", "records": {rk: rec}},
        });
        let t = tables.as_object().unwrap();
        assert_eq!(
            tuned_config(t, "k", "sm_90", &b(12)),
            Some(Config::block(64))
        );
        assert_eq!(
            tuned_config(t, "k", "sm_90", &b(1 << 20)),
            Some(Config::block(64))
        );
        assert_eq!(tuned_config(t, "k", "sm_80", &b(16)), None);
        assert_eq!(tuned_config(t, "other", "sm_90", &b(16)), None);
        // A best config stored under another config's name is not used.
        let mut forged = tables.clone();
        let r = forged["h2"]["records"]
            .as_object_mut()
            .unwrap()
            .values_mut()
            .next()
            .unwrap();
        r["configs"]["block=64"] = Config::block(1024).to_json();
        assert_eq!(
            tuned_config(forged.as_object().unwrap(), "k", "sm_90", &b(16)),
            None
        );
    }

    fn good() -> (String, Value) {
        let bk = b(10);
        let cfgs: Map<String, Value> = [32, 64]
            .into_iter()
            .map(|n| (Config::block(n).name(), Config::block(n).to_json()))
            .collect();
        let rk = record_key(&bk, "sm_90", "1");
        let rec = json!({
            "bucket": bk, "arch": "sm_90", "version": "1", "kernel": "k",
            "times_ms": {"block=32": 0.5, "block=64": 0.25}, "pruned": {}, "failed": {},
            "best": "block=64", "complete": true, "configs": cfgs, "seconds": 1.5,
        });
        (rk, rec)
    }

    #[test]
    fn corrupted_records_are_rejected() {
        let (rk, rec) = good();
        check_record(&rk, &rec).unwrap();
        let doc = json!({"version": 2, "kernel": "k", "records": {rk.clone(): rec.clone()}});
        check_db(&doc).unwrap();
        let with = |f: &str, v: Value| {
            let mut r = rec.clone();
            r[f] = v;
            r
        };
        let cases = [
            with("best", json!(["block=64"])),
            with("best", json!("block=128")),
            with("times_ms", json!({"block=64": "fast"})),
            with("times_ms", json!({"block=64": -1.0})),
            with("times_ms", json!({"block=128": 1.0})),
            with("configs", json!({"block=64": {"block": "64"}})),
            with(
                "configs",
                json!({"block=64": {"block": 1024}, "block=32": {"block": 32}}),
            ),
            with("exec", json!("rm -rf /")),
            with("failed", json!({"block=32": "x".repeat(MAX_TEXT + 1)})),
            with("arch", json!("gfx90a")),
            with("bucket", json!({"n": 16.0})),
            with("complete", json!(1)),
            with("seconds", json!("1")),
            json!([1, 2]),
        ];
        for (i, bad) in cases.iter().enumerate() {
            assert!(check_record(&rk, bad).is_err(), "case {i}: {bad}");
        }
        // Under another key (bucket, arch or version) than its own.
        assert!(check_record("n=1|sm_80|1", &rec).is_err());
        for bad in [
            json!({"version": 1, "records": {}}),
            json!({"version": 2, "records": [1, 2]}),
            json!({"version": 2, "records": {}, "extra": 1}),
            json!({"version": "2", "records": {}}),
        ] {
            assert!(check_db(&bad).is_err(), "{bad}");
        }
    }
}
