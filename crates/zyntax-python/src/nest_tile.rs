//! `zyntax._native.nest_tile` and `nest_tiling_report`: the Rust nest
//! recognition and lowering (`zyntax_opt::nest_tile`, issue 26) for Python.
//! `python/zyntax/tiling.py` (`nest_to_tile`) builds the description and
//! wraps the result in a `zyntax.tile.Kernel`.
//!
//! A nest crosses the boundary as a dict of plain values (see
//! `nest_to_tile` in tiling.py for the format); every field is checked here
//! and a bad one is an `ArgumentError` naming it by its path
//! (`spec.loops[1].extent`). A nest the core refuses is not an error: the
//! result carries the report and no kernel.

use crate::checked::{self, Text};
use crate::errors::{guard, ArgumentError, BuildError, InternalError};
use crate::tile::TileSchedule;
use crate::types::{to_type, type_name};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyFloat, PyInt, PyList, PyString, PyTuple};
use zyntax_hir::{Arch, BinOp, UnOp};
use zyntax_opt::nest_tile as nt;

fn bad(at: &str, what: &str, got: &Bound<'_, PyAny>) -> PyErr {
    ArgumentError::new_err(format!(
        "argument '{at}': expected {what}, got {}",
        type_name(got)
    ))
}

/// The items of a list or tuple.
fn items<'py>(obj: &Bound<'py, PyAny>, at: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if !(obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()) {
        return Err(bad(at, "a list or tuple", obj));
    }
    obj.try_iter()?.collect()
}

/// The value of a required key of a dict.
fn key<'py>(d: &Bound<'py, PyDict>, name: &str, at: &str) -> PyResult<Bound<'py, PyAny>> {
    d.get_item(name)?
        .ok_or_else(|| ArgumentError::new_err(format!("argument '{at}': missing key '{name}'")))
}

/// A dict whose keys are all in `known` (a misspelt optional key, say
/// `epilog`, would otherwise be dropped without a word).
fn dict<'py>(obj: &Bound<'py, PyAny>, at: &str, known: &[&str]) -> PyResult<Bound<'py, PyDict>> {
    let d = obj
        .cast::<PyDict>()
        .map(|d| d.to_owned())
        .map_err(|_| bad(at, "a dict", obj))?;
    for k in d.keys() {
        let name = k.extract::<String>().unwrap_or_else(|_| k.to_string());
        if !known.contains(&name.as_str()) {
            return Err(ArgumentError::new_err(format!(
                "argument '{at}': unknown key '{name}' (expected: {})",
                known.join(", ")
            )));
        }
    }
    Ok(d)
}

fn text(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<String> {
    if !obj.is_instance_of::<PyString>() {
        return Err(bad(at, "a str", obj));
    }
    obj.extract()
}

/// A tuple whose first item is a str tag: (tag, the other items).
fn tagged<'py>(obj: &Bound<'py, PyAny>, at: &str) -> PyResult<(String, Vec<Bound<'py, PyAny>>)> {
    let all = items(obj, at)?;
    let Some(first) = all.first() else {
        return Err(ArgumentError::new_err(format!(
            "argument '{at}': expected a tuple starting with its kind, got an empty one"
        )));
    };
    let tag = text(first, &format!("{at}[0]"))?;
    Ok((tag, all[1..].to_vec()))
}

fn arity(at: &str, tag: &str, got: usize, want: usize) -> PyResult<()> {
    if got == want {
        return Ok(());
    }
    Err(ArgumentError::new_err(format!(
        "argument '{at}': ({tag:?}, ...) takes {want} items after its kind, got {got}"
    )))
}

fn unknown(at: &str, what: &str, value: &str, names: &[&str]) -> PyErr {
    ArgumentError::new_err(format!(
        "argument '{at}': unknown {what} {value:?} (expected one of: {})",
        names.join(", ")
    ))
}

fn pick<T: Copy>(at: &str, what: &str, value: &str, all: &[(&str, T)]) -> PyResult<T> {
    all.iter()
        .find(|(n, _)| *n == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
            unknown(at, what, value, &names)
        })
}

fn parse_loop(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<nt::Loop> {
    let d = dict(obj, at, &["name", "extent", "kind"])?;
    let name = text(&key(&d, "name", at)?, &format!("{at}.name"))?;
    let extent = checked::arg::<u64>(&key(&d, "extent", at)?, &format!("{at}.extent"))?;
    let kind_at = format!("{at}.kind");
    let kinds = [
        ("parallel", nt::LoopKind::Parallel),
        ("reduction", nt::LoopKind::Reduction),
    ];
    let kind = pick(
        &kind_at,
        "loop kind",
        &text(&key(&d, "kind", at)?, &kind_at)?,
        &kinds,
    )?;
    Ok(nt::Loop { name, extent, kind })
}

fn parse_buffer(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<nt::Buffer> {
    let d = dict(obj, at, &["name", "dtype", "shape"])?;
    let name = text(&key(&d, "name", at)?, &format!("{at}.name"))?;
    let elem = to_type(&key(&d, "dtype", at)?)
        .map_err(|e| ArgumentError::new_err(format!("argument '{at}.dtype': {e}")))?;
    let shape_at = format!("{at}.shape");
    let shape = items(&key(&d, "shape", at)?, &shape_at)?
        .iter()
        .enumerate()
        .map(|(i, n)| checked::arg::<u64>(n, &format!("{shape_at}[{i}]")))
        .collect::<PyResult<Vec<u64>>>()?;
    Ok(nt::Buffer { name, elem, shape })
}

/// `("affine", [(loop, coef), ...], constant)` or `("opaque", text)`.
fn parse_index(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<nt::Index> {
    let (tag, rest) = tagged(obj, at)?;
    match tag.as_str() {
        "affine" => {
            arity(at, &tag, rest.len(), 2)?;
            let terms_at = format!("{at}[1]");
            let mut terms = Vec::new();
            for (i, term) in items(&rest[0], &terms_at)?.iter().enumerate() {
                let term_at = format!("{terms_at}[{i}]");
                let pair = items(term, &term_at)?;
                if pair.len() != 2 {
                    return Err(ArgumentError::new_err(format!(
                        "argument '{term_at}': expected (loop, coefficient), got {} items",
                        pair.len()
                    )));
                }
                let l = checked::arg::<usize>(&pair[0], &format!("{term_at}[0]"))?;
                let c = checked::arg::<i64>(&pair[1], &format!("{term_at}[1]"))?;
                terms.push((l, c));
            }
            let constant = checked::arg::<i64>(&rest[1], &format!("{at}[2]"))?;
            Ok(nt::Index::Affine(nt::Affine { terms, constant }))
        }
        "opaque" => {
            arity(at, &tag, rest.len(), 1)?;
            Ok(nt::Index::Opaque(text(&rest[0], &format!("{at}[1]"))?))
        }
        _ => Err(unknown(at, "index kind", &tag, &["affine", "opaque"])),
    }
}

/// `(buffer, [index, ...])`.
fn parse_access(
    buffer: &Bound<'_, PyAny>,
    index: &Bound<'_, PyAny>,
    at: &str,
) -> PyResult<nt::Access> {
    let buffer = checked::arg::<usize>(buffer, &format!("{at}.buffer"))?;
    let index_at = format!("{at}.index");
    let index = items(index, &index_at)?
        .iter()
        .enumerate()
        .map(|(i, x)| parse_index(x, &format!("{index_at}[{i}]")))
        .collect::<PyResult<Vec<_>>>()?;
    Ok(nt::Access { buffer, index })
}

/// `("load", buffer, [index, ...])`, `("const", x)`, `("unary", op, e)`,
/// `("binary", op, a, b)` or `("reduced",)`.
fn parse_expr(obj: &Bound<'_, PyAny>, at: &str) -> PyResult<nt::Expr> {
    let (tag, rest) = tagged(obj, at)?;
    let sub = |i: usize| format!("{at}[{}]", i + 1);
    Ok(match tag.as_str() {
        "load" => {
            arity(at, &tag, rest.len(), 2)?;
            nt::Expr::Load(parse_access(&rest[0], &rest[1], at)?)
        }
        "const" => {
            arity(at, &tag, rest.len(), 1)?;
            let x = &rest[0];
            if !(x.is_instance_of::<PyFloat>() || x.is_instance_of::<PyInt>())
                || x.is_instance_of::<pyo3::types::PyBool>()
            {
                return Err(bad(&sub(0), "a float or int", x));
            }
            nt::Expr::Const(x.extract::<f64>()?)
        }
        "unary" => {
            arity(at, &tag, rest.len(), 2)?;
            let all: Vec<(&str, UnOp)> = UnOp::ALL.iter().map(|o| (o.name(), *o)).collect();
            let op = pick(&sub(0), "unary op", &text(&rest[0], &sub(0))?, &all)?;
            nt::Expr::unary(op, parse_expr(&rest[1], &sub(1))?)
        }
        "binary" => {
            arity(at, &tag, rest.len(), 3)?;
            let all: Vec<(&str, BinOp)> = BinOp::ALL.iter().map(|o| (o.name(), *o)).collect();
            let op = pick(&sub(0), "binary op", &text(&rest[0], &sub(0))?, &all)?;
            let a = parse_expr(&rest[1], &sub(1))?;
            nt::Expr::binary(op, a, parse_expr(&rest[2], &sub(2))?)
        }
        "reduced" => {
            arity(at, &tag, rest.len(), 0)?;
            nt::Expr::Reduced
        }
        _ => {
            let kinds = ["load", "const", "unary", "binary", "reduced"];
            return Err(unknown(at, "expression kind", &tag, &kinds));
        }
    })
}

/// The whole nest description (a dict; see `nest_to_tile` in tiling.py).
fn parse_spec(obj: &Bound<'_, PyAny>) -> PyResult<nt::NestSpec> {
    let known = ["name", "loops", "buffers", "output", "value", "epilogue"];
    let d = dict(obj, "spec", &known)?;
    let list = |name: &str| -> PyResult<Vec<Bound<'_, PyAny>>> {
        items(&key(&d, name, "spec")?, &format!("spec.{name}"))
    };
    let loops = list("loops")?
        .iter()
        .enumerate()
        .map(|(i, l)| parse_loop(l, &format!("spec.loops[{i}]")))
        .collect::<PyResult<Vec<_>>>()?;
    let buffers = list("buffers")?
        .iter()
        .enumerate()
        .map(|(i, b)| parse_buffer(b, &format!("spec.buffers[{i}]")))
        .collect::<PyResult<Vec<_>>>()?;
    let output = items(&key(&d, "output", "spec")?, "spec.output")?;
    if output.len() != 2 {
        return Err(ArgumentError::new_err(format!(
            "argument 'spec.output': expected (buffer, [index, ...]), got {} items",
            output.len()
        )));
    }
    let epilogue = match d.get_item("epilogue")? {
        Some(e) if !e.is_none() => Some(parse_expr(&e, "spec.epilogue")?),
        _ => None,
    };
    Ok(nt::NestSpec {
        name: text(&key(&d, "name", "spec")?, "spec.name")?,
        loops,
        buffers,
        output: parse_access(&output[0], &output[1], "spec.output")?,
        value: parse_expr(&key(&d, "value", "spec")?, "spec.value")?,
        epilogue,
    })
}

/// The one-line report of what the core recognises `spec` as, or why it
/// refuses it (`zyntax_opt::nest_tile::tiling_report`).
#[pyfunction]
pub fn nest_tiling_report(spec: &Bound<'_, PyAny>) -> PyResult<String> {
    guard(|| Ok(nt::tiling_report(&parse_spec(spec)?)))
}

/// Recognises and lowers a nest: a dict with `report`, `refusal` (the
/// refusal kind, or None) and, when lowered, `kind` (map, contraction or
/// reduction), `module`, `name`, `block`, `shared_bytes`, `params` (as
/// `TileBuilder.finish`), `schedule`, `grid` and `args` (per view:
/// `(buffer, offset, extents, strides, align)`: the kernel assumes the
/// view's first element aligned to `align` bytes), `tensor_maps` and
/// `persistent` (as `TileBuilder.finish`: a warp-specialised kernel) and
/// `pipeline` (which pipeline a contraction runs, and why). `sms`: the SM
/// count the warp-specialised tile is chosen for.
#[pyfunction]
#[pyo3(signature = (spec, *, arch=None, schedule=None, sms=checked::Checked(132)),
    text_signature = "(spec, *, arch=None, schedule=None, sms=132)")]
pub fn nest_tile<'py>(
    py: Python<'py>,
    spec: &Bound<'py, PyAny>,
    arch: Option<Text>,
    schedule: Option<checked::Is<'py, TileSchedule>>,
    sms: checked::Checked<u64>,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let spec = parse_spec(spec)?;
        let mut options = nt::NestTileOptions::default();
        if sms.0 == 0 {
            return Err(ArgumentError::new_err(
                "argument 'sms': expected at least 1 SM, got 0",
            ));
        }
        options.sms = sms.0;
        if let Some(a) = arch.as_deref() {
            let all: Vec<(&str, Arch)> = Arch::ALL.iter().map(|a| (a.name(), *a)).collect();
            options.arch = pick("arch", "arch", a, &all)?;
        }
        options.schedule = schedule.map(|s| s.get().inner.clone());
        let d = PyDict::new(py);
        d.set_item("report", nt::tiling_report(&spec))?;
        let nk = match nt::lower(&spec, &options) {
            Ok(nk) => nk,
            Err(nt::NestTileError::Refused(r)) => {
                d.set_item("refusal", format!("{:?}", r.kind))?;
                d.set_item("reason", r.message)?;
                return Ok(d);
            }
            Err(nt::NestTileError::Tile(e)) => return Err(tile_err(e)),
        };
        d.set_item("refusal", py.None())?;
        let kind = match nk.recognition {
            nt::Recognition::Map(_) => "map",
            nt::Recognition::Contraction(_) => "contraction",
            nt::Recognition::Reduction(_) => "reduction",
        };
        d.set_item("kind", kind)?;
        // The module itself, not a JSON round trip (which took two thirds of
        // nest_to_tile's time at bf16 4096: 600 KB of JSON parsed again).
        let module = crate::hir::module_from(nk.kernel.module.clone()).into_pyobject(py)?;
        let params = PyList::empty(py);
        for p in &nk.kernel.launch.params {
            let item = match p {
                zyntax_tile::KernelParam::View { name, elem, rank } => {
                    ("view", name.clone(), elem.to_string(), *rank).into_pyobject(py)?
                }
                zyntax_tile::KernelParam::Scalar { name, ty } => {
                    ("scalar", name.clone(), ty.to_string(), 0usize).into_pyobject(py)?
                }
            };
            params.append(item)?;
        }
        d.set_item("module", module)?;
        d.set_item("name", &nk.kernel.name)?;
        d.set_item("block", nk.kernel.launch.block.to_vec())?;
        d.set_item("shared_bytes", nk.kernel.launch.shared_bytes)?;
        d.set_item("params", params)?;
        d.set_item("schedule", TileSchedule { inner: nk.schedule })?;
        d.set_item("grid", nk.grid.to_vec())?;
        let args = PyList::empty(py);
        for a in &nk.args {
            let view = (
                a.buffer,
                a.offset,
                a.extents.clone(),
                a.strides.clone(),
                a.align,
            );
            args.append(view)?;
        }
        d.set_item("args", args)?;
        let maps = PyList::empty(py);
        for m in &nk.kernel.launch.tensor_maps {
            let item = (
                m.view.clone(),
                m.param,
                m.inner_dim,
                m.outer_dim,
                m.box_dims.to_vec(),
            );
            maps.append(item.into_pyobject(py)?)?;
        }
        d.set_item("tensor_maps", maps)?;
        d.set_item("persistent", nk.kernel.launch.persistent)?;
        d.set_item("pipeline", &nk.pipeline)?;
        Ok(d)
    })
}

/// A tile-layer error while lowering: a given schedule that does not fit is
/// the caller's (`ArgumentError`); anything else is a bug in the lowering.
fn tile_err(e: zyntax_tile::TileError) -> PyErr {
    use zyntax_tile::TileError as E;
    match e {
        E::BadSchedule { .. } | E::DoesNotFit { .. } => ArgumentError::new_err(e.to_string()),
        E::Internal(_) => InternalError::new_err(e.to_string()),
        _ => BuildError::new_err(e.to_string()),
    }
}

// ------------------------------------------------------------ fusion of nests

fn index_to_py<'py>(py: Python<'py>, ix: &nt::Index) -> PyResult<Bound<'py, PyAny>> {
    Ok(match ix {
        nt::Index::Affine(a) => ("affine", a.terms.clone(), a.constant)
            .into_pyobject(py)?
            .into_any(),
        nt::Index::Opaque(t) => ("opaque", t.clone()).into_pyobject(py)?.into_any(),
    })
}

fn access_to_py<'py>(py: Python<'py>, a: &nt::Access) -> PyResult<Bound<'py, PyAny>> {
    let index = a
        .index
        .iter()
        .map(|ix| index_to_py(py, ix))
        .collect::<PyResult<Vec<_>>>()?;
    Ok((a.buffer, PyList::new(py, index)?)
        .into_pyobject(py)?
        .into_any())
}

/// An expression in the tuple form `nest_to_tile` reads.
fn expr_to_py<'py>(py: Python<'py>, e: &nt::Expr) -> PyResult<Bound<'py, PyAny>> {
    Ok(match e {
        nt::Expr::Load(a) => {
            let acc = access_to_py(py, a)?;
            let (b, ix): (usize, Bound<'py, PyAny>) = acc.extract()?;
            ("load", b, ix).into_pyobject(py)?.into_any()
        }
        nt::Expr::Const(x) => ("const", *x).into_pyobject(py)?.into_any(),
        nt::Expr::Unary(op, a) => ("unary", op.name(), expr_to_py(py, a)?)
            .into_pyobject(py)?
            .into_any(),
        nt::Expr::Binary(op, a, b) => ("binary", op.name(), expr_to_py(py, a)?, expr_to_py(py, b)?)
            .into_pyobject(py)?
            .into_any(),
        nt::Expr::Reduced => PyTuple::new(py, ["reduced"])?.into_any(),
    })
}

/// A nest as the dict `nest_to_tile` reads (the inverse of `parse_spec`).
fn spec_to_py<'py>(py: Python<'py>, s: &nt::NestSpec) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("name", &s.name)?;
    let loops = PyList::empty(py);
    for l in &s.loops {
        let ld = PyDict::new(py);
        ld.set_item("name", &l.name)?;
        ld.set_item("extent", l.extent)?;
        let kind = match l.kind {
            nt::LoopKind::Parallel => "parallel",
            nt::LoopKind::Reduction => "reduction",
        };
        ld.set_item("kind", kind)?;
        loops.append(ld)?;
    }
    d.set_item("loops", loops)?;
    let buffers = PyList::empty(py);
    for b in &s.buffers {
        let bd = PyDict::new(py);
        bd.set_item("name", &b.name)?;
        bd.set_item("dtype", b.elem.to_string())?;
        bd.set_item("shape", b.shape.clone())?;
        buffers.append(bd)?;
    }
    d.set_item("buffers", buffers)?;
    d.set_item("output", access_to_py(py, &s.output)?)?;
    d.set_item("value", expr_to_py(py, &s.value)?)?;
    if let Some(e) = &s.epilogue {
        d.set_item("epilogue", expr_to_py(py, e)?)?;
    }
    Ok(d)
}

/// Fuses a sequence of nests (`zyntax_opt::nest_tile::fuse`): a dict with
/// `nests` (the fused descriptions, in the form `nest_tile` reads),
/// `members` (the input nests each runs), `decisions` (dicts: producer,
/// consumer, fused, rule, why) and `report`. `measure(module, name)`, when
/// given, returns `(registers, shared_bytes)` of a lowered fused kernel
/// (ptxas) or None; the core refuses a fusion over the budget.
#[pyfunction]
#[pyo3(signature = (specs, temporaries, *, arch=None, measure=None, registers=255, shared_bytes=232448))]
pub fn nest_fuse<'py>(
    py: Python<'py>,
    specs: &Bound<'py, PyAny>,
    temporaries: &Bound<'py, PyAny>,
    arch: Option<Text>,
    measure: Option<Bound<'py, PyAny>>,
    registers: u32,
    shared_bytes: u32,
) -> PyResult<Bound<'py, PyDict>> {
    guard(|| {
        let nests = items(specs, "specs")?
            .iter()
            .enumerate()
            .map(|(i, s)| {
                parse_spec(s)
                    .map_err(|e| ArgumentError::new_err(format!("specs[{i}]: {}", e.value(py))))
            })
            .collect::<PyResult<Vec<_>>>()?;
        let temps = items(temporaries, "temporaries")?
            .iter()
            .enumerate()
            .map(|(i, t)| text(t, &format!("temporaries[{i}]")))
            .collect::<PyResult<Vec<_>>>()?;
        let temp_refs: Vec<&str> = temps.iter().map(String::as_str).collect();
        let mut lower = nt::NestTileOptions::default();
        if let Some(a) = arch.as_deref() {
            let all: Vec<(&str, Arch)> = Arch::ALL.iter().map(|a| (a.name(), *a)).collect();
            lower.arch = pick("arch", "arch", a, &all)?;
        }
        let failed: std::cell::RefCell<Option<PyErr>> = std::cell::RefCell::new(None);
        let call = |k: &nt::NestKernel| -> Option<nt::Resources> {
            let m = measure.as_ref()?;
            let run = || -> PyResult<Option<nt::Resources>> {
                let module = crate::hir::module_from(k.kernel.module.clone()).into_pyobject(py)?;
                let r = m.call1((module, &k.kernel.name))?;
                if r.is_none() {
                    return Ok(None);
                }
                let (registers, shared_bytes): (u32, u32) = r.extract().map_err(|_| {
                    ArgumentError::new_err(
                        "argument 'measure': must return (registers, shared_bytes) or None",
                    )
                })?;
                Ok(Some(nt::Resources {
                    registers,
                    shared_bytes,
                }))
            };
            run().unwrap_or_else(|e| {
                failed.borrow_mut().get_or_insert(e);
                None
            })
        };
        let options = nt::FuseOptions {
            lower,
            budget: zyntax_opt::fusion::Budget {
                registers,
                shared_bytes,
            },
            measure: if measure.is_some() { Some(&call) } else { None },
        };
        let fused = nt::fuse(&nests, &temp_refs, &options);
        if let Some(e) = failed.into_inner() {
            return Err(e);
        }
        let d = PyDict::new(py);
        let out = PyList::empty(py);
        for s in &fused.nests {
            out.append(spec_to_py(py, s)?)?;
        }
        d.set_item("nests", out)?;
        d.set_item("members", fused.members.clone())?;
        let decisions = PyList::empty(py);
        for x in &fused.decisions {
            let dd = PyDict::new(py);
            dd.set_item("producer", &x.producer)?;
            dd.set_item("consumer", &x.consumer)?;
            dd.set_item("fused", x.fused)?;
            dd.set_item("rule", &x.rule)?;
            dd.set_item("why", &x.why)?;
            decisions.append(dd)?;
        }
        d.set_item("decisions", decisions)?;
        d.set_item("report", fused.report())?;
        Ok(d)
    })
}
