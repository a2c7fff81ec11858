//! Text generated from the instruction table ([`crate::table::OPS`]).
//!
//! Each output is a region of a committed file between a `BEGIN GENERATED`
//! and an `END GENERATED` marker line, so hand-written parts of the same file
//! stay where they are. `crates/zyntax-hir/tests/generated.rs` fails when a
//! committed region differs from what the table renders; run it with
//! `ZYNTAX_BLESS=1` to rewrite the regions.

use crate::op::OpClass;
use crate::table::{fx, OpDef, Py, OPS};
use std::fmt::Write;

/// One generated region: the file (relative to the repository root), the
/// comment prefix of its marker lines, and the text between them.
pub struct Region {
    pub path: &'static str,
    pub comment: &'static str,
    pub render: fn() -> String,
}

/// Every generated region.
pub const REGIONS: &[Region] = &[
    Region {
        path: "docs/hir.md",
        comment: "<!--",
        render: docs_table,
    },
    Region {
        path: "python/zyntax/_native.pyi",
        comment: "    #",
        render: pyi_methods,
    },
    Region {
        path: "crates/zyntax-python/src/hir.rs",
        comment: "    //",
        render: pyo3_methods,
    },
];

fn marker(comment: &str, what: &str) -> String {
    let close = if comment == "<!--" { " -->" } else { "" };
    format!(
        "{comment} {what} GENERATED from crates/zyntax-hir/src/table.rs; \
         edit the table, then run `ZYNTAX_BLESS=1 cargo test -p zyntax-hir --test generated`{close}"
    )
}

/// `text` with the region between its markers replaced by `body`; `None` if
/// the markers are missing.
pub fn splice(text: &str, region: &Region, body: &str) -> Option<String> {
    let begin = marker(region.comment, "BEGIN");
    let end = marker(region.comment, "END");
    let b = text.find(&begin)? + begin.len();
    let e = text[b..].find(&end)? + b;
    // The region starts after the begin marker's line and ends at the start of the end marker's line.
    let b = b + text[b..].find('\n')? + 1;
    let e = text[..e].rfind('\n')? + 1;
    Some(format!("{}{}{}", &text[..b], body, &text[e..]))
}

/// Begin and end marker lines of a region (for inserting it the first time).
pub fn markers(region: &Region) -> (String, String) {
    (
        marker(region.comment, "BEGIN"),
        marker(region.comment, "END"),
    )
}

fn effects(d: &OpDef) -> String {
    let mut out = Vec::new();
    for (flag, name) in [
        (fx::READ, "read"),
        (fx::WRITE, "write"),
        (fx::SYNC, "sync"),
        (fx::WARP, "warp"),
        (fx::CALL, "call"),
    ] {
        if d.effects & flag != 0 {
            out.push(name);
        }
    }
    if d.class == OpClass::Terminator {
        out.push("terminator");
    }
    if out.is_empty() {
        "–".into()
    } else {
        out.join(", ")
    }
}

fn md(s: &str) -> String {
    s.replace('|', "\\|")
}

/// The instruction reference table of `docs/hir.md`.
pub fn docs_table() -> String {
    let mut out = String::from(
        "| mnemonic | operands | immediates | results | placement | effects | needs | Rust builder | Python | |\n\
         |---|---|---|---|---|---|---|---|---|---|\n",
    );
    for d in OPS {
        let operands = match d.operands {
            Some([]) => "–".to_string(),
            Some(ops) => ops.join(", "),
            None if d.mnemonic == "br" => "cond".into(),
            None => "…".into(),
        };
        let results = match d.results {
            Some(0) => "–".to_string(),
            Some(_) => d.result.to_string(),
            None => d.result.to_string(),
        };
        let place = match d.class {
            OpClass::Gpu => "GPU",
            _ => "any",
        };
        let needs = d
            .feature
            .map(|f| format!("sm_{}, PTX {}", f.arch.sm(), f.ptx))
            .unwrap_or_else(|| "–".into());
        let imm = if d.immediates.is_empty() {
            "–".to_string()
        } else {
            d.immediates.to_string()
        };
        let py =
            d.py.name()
                .map(|n| format!("`{n}`"))
                .unwrap_or_else(|| "–".into());
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} | `{}` | {} | {} |",
            d.mnemonic,
            md(&operands),
            md(&imm),
            md(&results),
            place,
            effects(d),
            needs,
            md(d.builder),
            py,
            md(d.doc),
        );
    }
    out
}

const OPND: &str = "_Operand";

/// `(name, stub type with default)` of the parameters, and the stub return type.
fn py_params(d: &OpDef) -> Option<(&'static str, Vec<String>, &'static str)> {
    let v = |s: &str| s.to_string();
    Some(match d.py {
        Py::Bits(n) => (
            n,
            d.operands
                .unwrap_or_default()
                .iter()
                .enumerate()
                .map(|(i, o)| {
                    // The first operand fixes the type: it must be a Value.
                    let t = if i == 0 { "Value" } else { OPND };
                    format!("{o}: {t}")
                })
                .collect(),
            "Value",
        ),
        Py::Red(n) => (
            n,
            vec![
                v("ptr: Value"),
                format!("value: {OPND}"),
                v("scope: _ScopeName | str = \"device\""),
            ],
            "None",
        ),
        Py::Binary(n) | Py::Cmp(n) => (n, vec![v("a: _Operand"), v("b: _Operand")], "Value"),
        Py::Unary(n) => (n, vec![v("a: Value")], "Value"),
        Py::Atomic(n) => (
            n,
            vec![
                v("ptr: Value"),
                format!("value: {OPND}"),
                v("scope: _ScopeName | str = \"device\""),
            ],
            "Value",
        ),
        Py::Shfl(n, lane) => (
            n,
            vec![
                format!("value: {OPND}"),
                format!("{lane}: {OPND}"),
                v("*"),
                format!("mask: {OPND} | None = None"),
                v("width: int = 32"),
            ],
            "Value",
        ),
        Py::Vote(n) => (
            n,
            vec![
                format!("pred: {OPND}"),
                v("*"),
                format!("mask: {OPND} | None = None"),
            ],
            "Value",
        ),
        Py::Index(n) => (
            n,
            vec![v("dim: _DimName | str | int | None = None")],
            "Value",
        ),
        Py::Nullary(n) => (n, vec![], "Value"),
        Py::None | Py::Hand(_) => return None,
    })
}

fn generated_rows() -> impl Iterator<Item = &'static OpDef> {
    OPS.iter().filter(|d| py_params(d).is_some())
}

/// Stubs of the generated `FunctionBuilder` methods (inside `class FunctionBuilder`).
pub fn pyi_methods() -> String {
    let mut out = String::from("    # fmt: off\n");
    for d in generated_rows() {
        let (name, params, mut ret) = py_params(d).expect("generated row");
        if d.results == Some(0) {
            ret = "None";
        }
        let mut all = vec!["self".to_string()];
        all.extend(params);
        let _ = writeln!(out, "    def {name}({}) -> {ret}: ...", all.join(", "));
    }
    out.push_str("    # fmt: on\n");
    out
}

/// `Add` from `add`: the variant of a sub-op enum.
fn variant(sub: &str) -> String {
    let mut c = sub.chars();
    match c.next() {
        Some(f) => f.to_ascii_uppercase().to_string() + c.as_str(),
        None => String::new(),
    }
}

/// `ShfLWrap` from `shf.l.wrap`: the variant of a dotted sub-op.
fn variant_of(sub: &str) -> String {
    sub.split('.').map(variant).collect()
}

/// A method signature as rustfmt writes it (one line if it fits in 100 columns).
fn rust_sig(name: &str, params: &[String], ret: &str) -> String {
    let one = format!("    fn {name}({}) -> {ret} {{", params.join(", "));
    if one.len() <= 100 {
        return one + "\n";
    }
    let mut s = format!("    fn {name}(\n");
    for p in params {
        let _ = writeln!(s, "        {p},");
    }
    let _ = writeln!(s, "    ) -> {ret} {{");
    s
}

/// The generated `#[pymethods]` of `PyFunctionBuilder`: each delegates to
/// the hand-written helper of its family.
pub fn pyo3_methods() -> String {
    let any = "&Bound<'_, PyAny>";
    let opt = "Option<&Bound<'_, PyAny>>";
    let mut out = String::new();
    for d in generated_rows() {
        let base = vec!["&self".to_string(), "py: Python<'_>".to_string()];
        let p = |names: &[&str]| -> Vec<String> {
            let mut v = base.clone();
            v.extend(names.iter().map(|n| format!("{n}: {any}")));
            v
        };
        let (name, attr, params, ret, body) = match d.py {
            Py::Binary(n) => (
                n,
                String::new(),
                p(&["a", "b"]),
                "PyResult<PyValue>",
                format!("self.sh.binary(py, BinOp::{}, a, b)", variant(d.sub)),
            ),
            Py::Cmp(n) => (
                n,
                String::new(),
                p(&["a", "b"]),
                "PyResult<PyValue>",
                format!("self.sh.cmp(py, CmpOp::{}, a, b)", variant(d.sub)),
            ),
            Py::Unary(n) => (
                n,
                String::new(),
                p(&["a"]),
                "PyResult<PyValue>",
                format!("self.sh.unary(py, UnOp::{}, a)", variant(d.sub)),
            ),
            Py::Atomic(n) => {
                let mut v = p(&["ptr", "value"]);
                v.push("scope: &str".into());
                (
                    n,
                    "    #[pyo3(signature = (ptr, value, scope=\"device\"))]\n".to_string(),
                    v,
                    "PyResult<PyValue>",
                    format!(
                        "self.atomic_op(py, AtomicOp::{}, ptr, value, scope)",
                        variant(d.sub)
                    ),
                )
            }
            Py::Shfl(n, lane) => {
                let mut v = p(&["value", lane]);
                v.push(format!("mask: {opt}"));
                v.push("width: Checked<u32>".into());
                (
                    n,
                    format!(
                        "    #[pyo3(signature = (value, {lane}, *, mask=None, width=Checked(32)),\n    \
                         text_signature = \"($self, value, {lane}, *, mask=None, width=32)\")]\n"
                    ),
                    v,
                    "PyResult<PyValue>",
                    format!(
                        "self.shfl_op(py, ShflMode::{}, value, {lane}, mask, width.0)",
                        variant(d.sub)
                    ),
                )
            }
            Py::Vote(n) => {
                let mut v = p(&["pred"]);
                v.push(format!("mask: {opt}"));
                (
                    n,
                    "    #[pyo3(signature = (pred, *, mask=None))]\n".to_string(),
                    v,
                    "PyResult<PyValue>",
                    format!("self.vote_op(py, VoteMode::{}, pred, mask)", variant(d.sub)),
                )
            }
            Py::Index(n) => {
                let mut v = base.clone();
                v.push(format!("dim: {opt}"));
                (
                    n,
                    "    #[pyo3(signature = (dim=None))]\n".to_string(),
                    v,
                    "PyResult<PyValue>",
                    format!(
                        "let d = dim.map(to_dim).transpose()?.unwrap_or(Dim::X);\n        \
                         self.sh.run1(py, |fb| fb.{}(d))",
                        d.family
                    ),
                )
            }
            Py::Bits(n) => {
                let names = d.operands.unwrap_or_default();
                (
                    n,
                    String::new(),
                    p(names),
                    "PyResult<PyValue>",
                    format!(
                        "self.bits_op(py, BitOp::{}, &[{}])",
                        variant_of(d.sub),
                        names.join(", ")
                    ),
                )
            }
            Py::Red(n) => {
                let mut v = p(&["ptr", "value"]);
                v.push("scope: &str".into());
                (
                    n,
                    "    #[pyo3(signature = (ptr, value, scope=\"device\"))]\n".to_string(),
                    v,
                    "PyResult<()>",
                    format!(
                        "self.red_op(py, AtomicOp::{}, ptr, value, scope)",
                        variant(d.sub)
                    ),
                )
            }
            Py::Nullary(n) if d.results == Some(0) => (
                n,
                String::new(),
                base.clone(),
                "PyResult<()>",
                format!("self.sh.run(py, |fb| fb.{n}())"),
            ),
            Py::Nullary(n) => (
                n,
                String::new(),
                base.clone(),
                "PyResult<PyValue>",
                format!("self.sh.run1(py, |fb| fb.{n}())"),
            ),
            Py::None | Py::Hand(_) => continue,
        };
        let _ = writeln!(out, "    /// {}", d.doc);
        out.push_str(&attr);
        out.push_str(&rust_sig(name, &params, ret));
        let _ = writeln!(out, "        {body}");
        out.push_str("    }\n");
    }
    out
}
