//! A candidate launch configuration and its schema check.

use crate::pyjson::py_str;
use crate::{Rejected, Result};
use serde_json::{json, Map, Value};

/// One candidate launch configuration: the block size (also the kernel's launch
/// bound), kernel arguments by parameter name (JSON scalars), and optional
/// register cap and minimum resident blocks.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub block: u32,
    pub args: Map<String, Value>,
    pub max_registers: Option<u32>,
    pub min_blocks: Option<u32>,
}

impl Config {
    /// A config of `block` threads and nothing else.
    pub fn block(block: u32) -> Config {
        Config {
            block,
            ..Config::default()
        }
    }

    /// With kernel argument `name` set to `value`.
    pub fn arg(mut self, name: &str, value: impl Into<Value>) -> Config {
        self.args.insert(name.into(), value.into());
        self
    }

    /// `block=128,per_thread=2,max_registers=64`: the key of the config in a
    /// record, as Python's `Config.name()` writes it (arguments sorted).
    pub fn name(&self) -> String {
        let mut parts = vec![format!("block={}", self.block)];
        let mut keys: Vec<&String> = self.args.keys().collect();
        keys.sort();
        parts.extend(
            keys.into_iter()
                .map(|k| format!("{k}={}", py_str(&self.args[k]))),
        );
        if let Some(r) = self.max_registers {
            parts.push(format!("max_registers={r}"));
        }
        if let Some(b) = self.min_blocks {
            parts.push(format!("min_blocks={b}"));
        }
        parts.join(",")
    }

    /// The record form: `{"block", "args", "max_registers", "min_blocks"}`.
    pub fn to_json(&self) -> Value {
        json!({
            "block": self.block,
            "args": Value::Object(self.args.clone()),
            "max_registers": self.max_registers,
            "min_blocks": self.min_blocks,
        })
    }
}

/// The config a record stores under `name`; rejected unless well-formed and
/// named as [`Config::name`] names it.
pub fn check_config(name: &str, d: &Value) -> Result<Config> {
    let short: String = name.chars().take(80).collect();
    let where_ = format!("config {short:?}");
    let bad = |what: &str| Rejected(format!("{where_}{what}"));
    let Some(m) = d.as_object() else {
        return Err(bad(" is not a config object"));
    };
    const FIELDS: [&str; 4] = ["block", "args", "max_registers", "min_blocks"];
    if m.keys().any(|k| !FIELDS.contains(&k.as_str())) {
        return Err(bad(" is not a config object"));
    }
    let block = match m.get("block").and_then(Value::as_u64) {
        Some(b) if (1..=1 << 16).contains(&b) => b as u32,
        _ => return Err(bad(": block is not an integer in 1..65536")),
    };
    let args = match m.get("args") {
        None | Some(Value::Null) => Map::new(),
        Some(a) => crate::record::table(a, &format!("{where_} args"), 64)?.clone(),
    };
    for (k, v) in &args {
        let ok = match v {
            Value::Null | Value::Bool(_) | Value::Number(_) => true,
            Value::String(s) => s.len() <= 4096,
            _ => false,
        };
        if !ok {
            let k: String = k.chars().take(80).collect();
            return Err(bad(&format!(
                ": argument {k:?} is not a number, bool or string"
            )));
        }
    }
    let opt = |field: &str| -> Result<Option<u32>> {
        match m.get(field) {
            None | Some(Value::Null) => Ok(None),
            Some(v) => match v.as_u64() {
                Some(x) if (1..1 << 31).contains(&x) => Ok(Some(x as u32)),
                _ => Err(bad(&format!(": {field} is not null or a positive integer"))),
            },
        }
    };
    let cfg = Config {
        block,
        args,
        max_registers: opt("max_registers")?,
        min_blocks: opt("min_blocks")?,
    };
    if cfg.name() != name {
        return Err(bad(&format!(
            " is stored under another name than its own ({:?})",
            cfg.name()
        )));
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_checks() {
        let c = Config::block(128)
            .arg("per_thread", 2)
            .arg("fast", true)
            .arg("alpha", 0.5);
        assert_eq!(c.name(), "block=128,alpha=0.5,fast=True,per_thread=2");
        assert_eq!(check_config(&c.name(), &c.to_json()).unwrap(), c);
        // Stored under another config's name: a forged entry.
        let e = check_config("block=64", &Config::block(1024).to_json()).unwrap_err();
        assert!(e.0.contains("another name"), "{e}");
        for bad in [
            json!({"block": "64"}),
            json!({"block": 0}),
            json!({"block": 64, "exec": 1}),
            json!({"block": 64, "args": {"a": [1]}}),
            json!({"block": 64, "max_registers": -1}),
            json!({"block": 64, "min_blocks": true}),
            json!([64]),
        ] {
            assert!(check_config("block=64", &bad).is_err(), "{bad}");
        }
    }
}
