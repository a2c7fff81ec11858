//! The fusion planner: what fuses, and one refusal per legality rule.

use zyntax_opt::fusion::{
    plan, plan_json, Access, Budget, Buffer, Index, Kind, Measured, Sequence, Stage,
};

fn acc(buffer: &str, index: Index) -> Access {
    Access {
        buffer: buffer.into(),
        index,
    }
}

fn map(name: &str, reads: &[(&str, Index)], write: &str) -> Stage {
    Stage {
        name: name.into(),
        kind: Kind::Map,
        space: vec![64, 32],
        reads: reads.iter().map(|(b, i)| acc(b, *i)).collect(),
        writes: vec![acc(write, Index::Point)],
        registers: 16,
        shared_bytes: 0,
    }
}

fn buffers(names: &[&str], outputs: &[&str]) -> Vec<Buffer> {
    names
        .iter()
        .map(|n| Buffer {
            name: (*n).into(),
            live_out: outputs.contains(n),
            alias_of: None,
        })
        .collect()
}

fn seq(stages: Vec<Stage>, bufs: Vec<Buffer>) -> Sequence {
    Sequence {
        buffers: bufs,
        stages,
        budget: Budget::default(),
        measured: Vec::new(),
    }
}

const P: Index = Index::Point;
const O: Index = Index::Other;

#[test]
fn an_elementwise_chain_fuses_into_one_kernel_and_elides_temporaries() {
    let s = seq(
        vec![
            map("a", &[("x", P)], "t0"),
            map("b", &[("t0", P), ("bias", O)], "t1"),
            map("c", &[("t1", P), ("x", P)], "y"),
        ],
        buffers(&["x", "bias", "t0", "t1", "y"], &["y"]),
    );
    let p = plan(&s).unwrap();
    assert_eq!(p.groups.len(), 1);
    assert_eq!(p.groups[0].stages, vec![0, 1, 2]);
    assert_eq!(p.groups[0].elided, vec!["t0".to_string(), "t1".to_string()]);
    assert!(p.decisions.iter().all(|d| d.fused && d.rule == "fused"));
}

#[test]
fn elementwise_fuses_into_a_reduction_but_not_out_of_one() {
    let mut red = map("rowsum", &[("t", P)], "sums");
    red.kind = Kind::Reduce;
    let after = map("after", &[("sums", P)], "z");
    let s = seq(
        vec![map("gelu", &[("x", P)], "t"), red, after],
        buffers(&["x", "t", "sums", "z"], &["t", "z"]),
    );
    let p = plan(&s).unwrap();
    assert_eq!(p.groups.len(), 2);
    assert_eq!(p.groups[0].stages, vec![0, 1]);
    // `t` is an output: stored even though it is fused.
    assert!(p.groups[0].elided.is_empty());
    assert!(p.decisions[0].fused);
    assert_eq!(p.decisions[1].rule, "reduction_producer");
    assert!(p.decisions[1].why.contains("rowsum"));
}

#[test]
fn a_consumer_reading_another_point_is_refused() {
    let s = seq(
        vec![map("a", &[("x", P)], "t"), map("stencil", &[("t", O)], "y")],
        buffers(&["x", "t", "y"], &["y"]),
    );
    let p = plan(&s).unwrap();
    assert_eq!(p.groups.len(), 2);
    assert_eq!(p.decisions[0].rule, "dependence");
    assert!(
        p.decisions[0].why.contains("\"t\""),
        "{}",
        p.decisions[0].why
    );
    // `t` is read by the next kernel, so it is stored.
    assert!(p.groups[0].elided.is_empty());
}

#[test]
fn a_consumer_overwriting_what_the_producer_gathers_is_refused() {
    // a reads x at other points; b writes x: fused, b's stores would race a's loads.
    let s = seq(
        vec![map("a", &[("x", O)], "t"), map("b", &[("t", P)], "x")],
        buffers(&["x", "t"], &["x"]),
    );
    let p = plan(&s).unwrap();
    assert_eq!(p.decisions[0].rule, "dependence");
}

#[test]
fn aliasing_buffers_are_one_buffer_for_the_dependence_check() {
    let mut bufs = buffers(&["x", "t", "y"], &["y"]);
    bufs[2].alias_of = Some("x".into());
    let s = seq(
        vec![map("a", &[("x", O)], "t"), map("b", &[("t", P)], "y")],
        bufs.clone(),
    );
    let p = plan(&s).unwrap();
    assert_eq!(p.decisions[0].rule, "alias");
    assert!(
        p.decisions[0].why.contains("aliases"),
        "{}",
        p.decisions[0].why
    );
    // Without the alias the same pair fuses.
    bufs[2].alias_of = None;
    let s = seq(
        vec![map("a", &[("x", O)], "t"), map("b", &[("t", P)], "y")],
        bufs,
    );
    assert!(plan(&s).unwrap().decisions[0].fused);
}

#[test]
fn different_spaces_and_independent_stages_are_refused() {
    let mut b = map("b", &[("t", P)], "y");
    b.space = vec![32, 64];
    let s = seq(
        vec![map("a", &[("x", P)], "t"), b],
        buffers(&["x", "t", "y"], &["y"]),
    );
    assert_eq!(plan(&s).unwrap().decisions[0].rule, "space");
    let s = seq(
        vec![map("a", &[("x", P)], "t"), map("b", &[("x", P)], "y")],
        buffers(&["x", "t", "y"], &["t", "y"]),
    );
    assert_eq!(plan(&s).unwrap().decisions[0].rule, "no_dependence");
}

#[test]
fn register_and_shared_memory_budgets_are_enforced() {
    let mut a = map("a", &[("x", P)], "t");
    let mut b = map("b", &[("t", P)], "y");
    a.registers = 200;
    b.registers = 100;
    let bufs = buffers(&["x", "t", "y"], &["y"]);
    let p = plan(&seq(vec![a.clone(), b.clone()], bufs.clone())).unwrap();
    assert_eq!(p.decisions[0].rule, "registers");
    assert!(p.decisions[0].why.contains("300"), "{}", p.decisions[0].why);
    a.registers = 20;
    b.registers = 20;
    a.shared_bytes = 40_000;
    b.shared_bytes = 20_000;
    let p = plan(&seq(vec![a, b], bufs)).unwrap();
    assert_eq!(p.decisions[0].rule, "shared_memory");
}

#[test]
fn a_measured_fused_kernel_replaces_the_sum_of_its_stages() {
    let mut a = map("a", &[("x", P)], "t");
    let mut b = map("b", &[("t", P)], "y");
    a.registers = 200;
    b.registers = 100;
    let mut s = seq(vec![a, b], buffers(&["x", "t", "y"], &["y"]));
    // The sum (300) is over budget, but the fused kernel really needs 180.
    s.measured.push(Measured {
        stages: vec![0, 1],
        registers: 180,
        shared_bytes: 0,
    });
    let p = plan(&s).unwrap();
    assert!(p.decisions[0].fused, "{:?}", p.decisions[0]);
    assert_eq!(p.groups[0].registers, 180);
    // A measurement over budget refuses even when the sum would not.
    s.stages[0].registers = 10;
    s.stages[1].registers = 10;
    s.measured[0].registers = 256;
    let p = plan(&s).unwrap();
    assert_eq!(p.decisions[0].rule, "registers");
    assert!(p.decisions[0].why.contains("256"), "{}", p.decisions[0].why);
}

#[test]
fn json_round_trip_and_bad_input() {
    let s = seq(
        vec![map("a", &[("x", P)], "t"), map("b", &[("t", P)], "y")],
        buffers(&["x", "t", "y"], &["y"]),
    );
    let out = plan_json(&serde_json::to_string(&s).unwrap()).unwrap();
    assert!(out.contains("\"fused\":true"), "{out}");
    let e = plan_json("{\"buffers\": []}").unwrap_err().to_string();
    assert!(e.contains("bad sequence"), "{e}");
    let bad = seq(vec![map("a", &[("nope", P)], "t")], buffers(&["t"], &[]));
    let e = plan(&bad).unwrap_err().to_string();
    assert!(e.contains("unknown buffer \"nope\""), "{e}");
}
