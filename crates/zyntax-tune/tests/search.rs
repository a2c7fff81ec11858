//! The search loop on the CPU with a fake timer: warm starts, pruning and
//! failures recorded, saves after each measurement, resuming an interrupted
//! search, installed tables, and forged or corrupted files re-tuned.

use serde_json::{json, Value};
use std::collections::BTreeMap;
use zyntax_tune::{
    bucket, empty_db, read_db, tune, write_db, Bench, Config, Failure, KeyValue, Limits, ReadError,
    Request, Resources, SearchError, Source,
};

const H: &str = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

/// A kernel whose time per config is a table; configs can fail to compile or
/// launch, and the search can be interrupted at the n-th measurement.
#[derive(Default)]
struct Fake {
    time: BTreeMap<u32, f64>,
    no_compile: Vec<u32>,
    no_launch: Vec<u32>,
    interrupt_at: Option<usize>,
    measured: Vec<u32>,
    saved: Vec<Value>,
    started: usize,
}

impl Bench for Fake {
    type Abort = &'static str;
    fn prepare(&mut self, c: &Config) -> Result<Resources, Failure<&'static str>> {
        if self.no_compile.contains(&c.block) {
            return Err(Failure::Skip(
                "CompileError: below the register floor".into(),
            ));
        }
        Ok(Resources {
            registers: 32,
            threads: c.block,
            ..Resources::default()
        })
    }
    fn limits(&mut self) -> Result<Limits, &'static str> {
        Ok(Limits::default())
    }
    fn start(&mut self) -> Result<(), &'static str> {
        self.started += 1;
        Ok(())
    }
    fn measure(&mut self, c: &Config) -> Result<f64, Failure<&'static str>> {
        if self.interrupt_at == Some(self.measured.len()) {
            return Err(Failure::Abort("interrupted"));
        }
        self.measured.push(c.block);
        if self.no_launch.contains(&c.block) {
            return Err(Failure::Skip("LaunchError: empty grid".into()));
        }
        Ok(self.time[&c.block])
    }
    fn save(&mut self, doc: &Value) {
        self.saved.push(doc.clone());
    }
}

fn configs() -> Vec<Config> {
    [64, 96, 128, 256, 2048].map(Config::block).to_vec()
}

fn fake() -> Fake {
    Fake {
        time: [(64, 3.0), (96, 9.0), (128, 2.0), (256, 1.5), (2048, 0.1)].into(),
        ..Fake::default()
    }
}

fn request(configs: &[Config], n: i64) -> Request<'_> {
    Request {
        kernel: "k",
        configs,
        bucket: bucket([("n", &KeyValue::Int(n))]),
        arch: "sm_90",
        version: "1",
        min_occupancy_ratio: 0.25,
        measure: true,
    }
}

#[test]
fn measures_prunes_and_records_failures() {
    let cfgs = configs();
    let mut b = Fake {
        no_launch: vec![96],
        ..fake()
    };
    let mut doc = empty_db();
    let out = tune(&request(&cfgs, 1000), None, &mut doc, &mut b).unwrap();
    assert_eq!((cfgs[out.best].block, out.source), (256, Source::Measured));
    let rec = &doc["records"]["n=1024|sm_90|1"];
    assert!(rec["pruned"]["block=2048"]
        .as_str()
        .unwrap()
        .contains("threads per block"));
    assert!(rec["failed"]["block=96"]
        .as_str()
        .unwrap()
        .starts_with("launch: LaunchError"));
    assert_eq!(rec["times_ms"].as_object().unwrap().len(), 3);
    assert_eq!(rec["complete"], true);
    // Saved after each successful measurement and at the end; the inputs made once.
    assert_eq!((b.saved.len(), b.started), (4, 1));
    zyntax_tune::check_db(&doc).unwrap();

    // The same bucket again: from the document, nothing measured.
    let mut again = fake();
    let out = tune(&request(&cfgs, 1023), None, &mut doc, &mut again).unwrap();
    assert_eq!((out.source, again.measured.len()), (Source::Database, 0));

    // A new bucket starts with the nearest bucket's best (warm start).
    let mut warm = fake();
    let out = tune(&request(&cfgs, 3000), None, &mut doc, &mut warm).unwrap();
    assert_eq!(warm.measured[0], 256);
    assert_eq!(doc["records"][&out.record_key]["warm_start"], "block=256");
}

#[test]
fn an_interrupted_search_resumes() {
    let cfgs = configs();
    let mut doc = empty_db();
    let mut b = Fake {
        interrupt_at: Some(1),
        ..fake()
    };
    let err = tune(&request(&cfgs, 1000), None, &mut doc, &mut b).unwrap_err();
    assert!(matches!(err, SearchError::Abort("interrupted")));
    // What was saved holds the one measurement, incomplete, with its best.
    let saved = b.saved.last().unwrap().clone();
    let rec = &saved["records"]["n=1024|sm_90|1"];
    assert_eq!(
        (rec["complete"].clone(), rec["best"].clone()),
        (json!(false), json!("block=64"))
    );
    // Resumed from the saved document: only the configs left are measured.
    let mut doc = saved;
    let mut rest = fake();
    let out = tune(&request(&cfgs, 1000), None, &mut doc, &mut rest).unwrap();
    assert_eq!(rest.measured, vec![96, 128, 256]);
    assert_eq!(cfgs[out.best].block, 256);
}

#[test]
fn nothing_runs_is_an_error_naming_every_config() {
    let cfgs = [Config::block(64), Config::block(4096)];
    let mut b = Fake {
        no_compile: vec![64],
        ..fake()
    };
    let mut doc = empty_db();
    match tune(&request(&cfgs, 8), None, &mut doc, &mut b) {
        Err(SearchError::NothingRan(why)) => {
            assert!(
                why.contains("block=64: compile:") && why.contains("block=4096"),
                "{why}"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn installed_tables_and_measuring_off_never_measure() {
    let cfgs = configs();
    let b = bucket([("n", &KeyValue::Int(5000))]);
    let table = json!({
        zyntax_tune::record_key(&b, "sm_90", "0"):
            {"bucket": b, "arch": "sm_90", "version": "0", "best": "block=128"}
    });
    let never = || Fake {
        interrupt_at: Some(0),
        no_compile: vec![64, 96, 128, 256, 2048],
        ..fake()
    };
    for n in [5000, 100_000] {
        let mut f = never();
        let out = tune(
            &request(&cfgs, n),
            table.as_object(),
            &mut empty_db(),
            &mut f,
        )
        .unwrap();
        assert_eq!((cfgs[out.best].block, out.source), (128, Source::Table));
    }
    let off = Request {
        measure: false,
        ..request(&cfgs, 10)
    };
    let out = tune(&off, None, &mut empty_db(), &mut never()).unwrap();
    assert_eq!((out.best, out.source), (0, Source::Default));
}

#[test]
fn forged_and_corrupted_files_are_retuned_never_trusted() {
    let dir = tempfile::tempdir().unwrap();
    let secret = [42u8; 32];
    let cfgs = configs();
    let mut doc = empty_db();
    tune(&request(&cfgs, 1000), None, &mut doc, &mut fake()).unwrap();
    write_db(dir.path(), H, &doc, Some(&secret)).unwrap();
    assert_eq!(read_db(dir.path(), H, Some(&secret)).unwrap(), doc);

    let load = || match read_db(dir.path(), H, Some(&secret)) {
        Ok(d) => d,
        Err(ReadError::Missing | ReadError::Rejected(_)) => empty_db(),
    };
    let path = dir.path().join(format!("{H}.json"));
    let text = std::fs::read_to_string(&path).unwrap();
    // Forged: the best flipped to the slowest config, the old MAC kept.
    let mut forged: Value = serde_json::from_str(&text).unwrap();
    forged["records"]["n=1024|sm_90|1"]["best"] = "block=96".into();
    forged["records"]["n=1024|sm_90|1"]["times_ms"]["block=96"] = json!(0.01);
    std::fs::write(&path, forged.to_string()).unwrap();
    // Corrupted: cut in the middle. Unsigned: MAC removed.
    let mut unsigned: Value = serde_json::from_str(&text).unwrap();
    unsigned.as_object_mut().unwrap().remove("mac");
    for bad in [
        forged.to_string(),
        text[..text.len() / 2].to_string(),
        unsigned.to_string(),
    ] {
        std::fs::write(&path, bad).unwrap();
        let mut doc = load();
        assert_eq!(doc, empty_db());
        let mut b = fake();
        let out = tune(&request(&cfgs, 1000), None, &mut doc, &mut b).unwrap();
        assert_eq!((out.source, cfgs[out.best].block), (Source::Measured, 256));
        assert_eq!(b.measured.len(), 4);
    }
    // Signed but malformed (a time that is text): the schema catches it.
    let mut bad = doc.clone();
    bad["records"]["n=1024|sm_90|1"]["times_ms"]["block=64"] = "fast".into();
    write_db(dir.path(), H, &bad, Some(&secret)).unwrap();
    assert!(matches!(
        read_db(dir.path(), H, Some(&secret)),
        Err(ReadError::Rejected(r)) if r.0.contains("finite number")
    ));
}
