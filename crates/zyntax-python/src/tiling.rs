//! The builder-level tiler (`zyntax_opt::nest_stage`) for Python.
//!
//! `tiling_begin` / `NativeTiledNest` run the Rust emitter
//! (`nest_stage::TiledNest`) on a `zyntax.hir.FunctionBuilder`'s own Rust
//! builder for `zyntax.tiling.TiledNest`, calling its Python callbacks back.
//! `tiling_plan` gives the plan alone: Python describes the nest and one
//! reduction with plain values (value ids and names, affine forms as nested
//! tuples; see `TiledNest._encode` in `python/zyntax/tiling.py`) and gets
//! back, per operand, whether it is staged, the tile's layout, and the
//! report lines. An explicit `tile_k` the hardware cannot hold is a
//! `BuildError`.

use crate::errors::{guard, ArgumentError, BuildError};
use crate::types::type_name;
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyInt, PyList, PyString, PyTuple};
use std::collections::HashMap;
use zyntax_hir::ValueId;
use zyntax_opt::nest_stage as ns;

fn bad(what: &str, got: &Bound<'_, PyAny>) -> PyErr {
    ArgumentError::new_err(format!(
        "tiling_plan: expected {what}, got {}",
        type_name(got)
    ))
}

fn items<'py>(obj: &Bound<'py, PyAny>, what: &str) -> PyResult<Vec<Bound<'py, PyAny>>> {
    if !(obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()) {
        return Err(bad(what, obj));
    }
    obj.try_iter()?.collect()
}

fn value_id(obj: &Bound<'_, PyAny>) -> PyResult<ValueId> {
    let id: u32 = obj.extract().map_err(|_| bad("a value id", obj))?;
    Ok(ValueId::from_index(id as usize))
}

/// `int`, `("v", id)` or `("*", a, b)`.
fn coef(obj: &Bound<'_, PyAny>) -> PyResult<ns::Coef> {
    if obj.is_instance_of::<PyInt>() {
        return obj.extract::<i64>().map(ns::Coef::Int).map_err(|_| {
            ArgumentError::new_err(format!("coefficient {obj} does not fit in 64 bits"))
        });
    }
    let t = items(obj, "a coefficient")?;
    match (t.first().map(|h| h.extract::<String>()), t.len()) {
        (Some(Ok(h)), 2) if h == "v" => Ok(ns::Coef::Value(value_id(&t[1])?)),
        (Some(Ok(h)), 3) if h == "*" => Ok(ns::Coef::Mul(
            Box::new(coef(&t[1])?),
            Box::new(coef(&t[2])?),
        )),
        _ => Err(bad("an int, ('v', id) or ('*', a, b)", obj)),
    }
}

fn sym(obj: &Bound<'_, PyAny>) -> PyResult<ns::Sym> {
    if obj.is_instance_of::<PyString>() && obj.extract::<String>()? == "k" {
        return Ok(ns::Sym::K);
    }
    obj.extract::<usize>()
        .map(ns::Sym::Index)
        .map_err(|_| bad("a nest index or 'k'", obj))
}

fn sym_obj(py: Python<'_>, s: ns::Sym) -> PyResult<Py<PyAny>> {
    Ok(match s {
        ns::Sym::K => "k".into_pyobject(py)?.into_any().unbind(),
        ns::Sym::Index(d) => d.into_pyobject(py)?.into_any().unbind(),
    })
}

/// `("affine", [(sym, [coef, ...]), ...], [coef, ...])` or `("not", why, text)`.
fn index(obj: &Bound<'_, PyAny>) -> PyResult<Result<ns::Affine, ns::NotAffine>> {
    let t = items(obj, "an index")?;
    let head: String = t
        .first()
        .ok_or_else(|| bad("an index", obj))?
        .extract()
        .map_err(|_| bad("an index", obj))?;
    match (head.as_str(), t.len()) {
        ("affine", 3) => {
            let mut terms = Vec::new();
            for term in items(&t[1], "the terms of an affine form")? {
                let st = items(&term, "a (symbol, coefficients) term")?;
                if st.len() != 2 {
                    return Err(bad("a (symbol, coefficients) term", &term));
                }
                let cs = items(&st[1], "coefficients")?
                    .iter()
                    .map(coef)
                    .collect::<PyResult<Vec<_>>>()?;
                terms.push((sym(&st[0])?, cs));
            }
            let konst = items(&t[2], "the offset of an affine form")?
                .iter()
                .map(coef)
                .collect::<PyResult<Vec<_>>>()?;
            Ok(Ok(ns::Affine { terms, konst }))
        }
        ("not", 3) => Ok(Err(ns::NotAffine::Opaque {
            why: t[1].extract()?,
            text: t[2].extract()?,
        })),
        _ => Err(bad("('affine', terms, const) or ('not', why, text)", obj)),
    }
}

/// `(tile_k, operand plans, report lines, shared bytes claimed so far)`.
type Plan = (u64, Vec<Py<PyDict>>, Vec<String>, u64);
/// A shape in `(x, y, z)` order.
type Xyz = (u32, u32, u32);

/// Plans one reduction of a tiled nest (`zyntax_opt::nest_stage::plan_reduction`).
///
/// `operands`: `(ptr_id, elem_bytes or None, index)` each; `extent`: an int
/// or `("v", id)`; `names`: `[(value_id, name), ...]` for the report.
/// Returns `(tile_k, [operand plan dict, ...], report lines, shared_bytes)`.
#[pyfunction]
#[pyo3(signature = (workgroup, first_id, writes, shared_bytes, index_names, names, extent, operands, tile_k=None))]
#[allow(clippy::too_many_arguments)]
pub fn tiling_plan(
    py: Python<'_>,
    workgroup: Vec<u32>,
    first_id: u32,
    writes: Vec<u32>,
    shared_bytes: u64,
    index_names: Vec<String>,
    names: Vec<(u32, String)>,
    extent: &Bound<'_, PyAny>,
    operands: &Bound<'_, PyAny>,
    tile_k: Option<i128>,
) -> PyResult<Plan> {
    guard(|| {
        let id = |i: u32| ValueId::from_index(i as usize);
        let mut nest = ns::StageNest {
            workgroup,
            first_id: id(first_id),
            writes: writes.into_iter().map(id).collect(),
            shared_bytes,
            names: ns::Names {
                indices: index_names,
                values: names
                    .into_iter()
                    .map(|(v, n)| (id(v), n))
                    .collect::<HashMap<_, _>>(),
            },
        };
        if nest.workgroup.is_empty() {
            return Err(ArgumentError::new_err("tiling_plan: an empty workgroup"));
        }
        let extent = if extent.is_instance_of::<PyInt>() {
            ns::Extent::Const(extent.extract().map_err(|_| bad("a size", extent))?)
        } else {
            match coef(extent)? {
                ns::Coef::Value(v) => ns::Extent::Value(v),
                _ => return Err(bad("an int or ('v', id)", extent)),
            }
        };
        let mut ops = Vec::new();
        for op in items(operands, "a list of operands")? {
            let t = items(&op, "an operand")?;
            if t.len() != 3 {
                return Err(bad("(ptr_id, elem_bytes, index)", &op));
            }
            ops.push(ns::StageOperand {
                ptr: value_id(&t[0])?,
                elem_bytes: t[1].extract()?,
                index: index(&t[2])?,
            });
        }
        if let Some(t) = tile_k.filter(|t| *t < 1) {
            return Err(BuildError::new_err(format!(
                "tile_k must be at least 1, not {t}"
            )));
        }
        // Past u64 saturates (the limits refuse it either way).
        let tile_k = tile_k.map(|t| u64::try_from(t).unwrap_or(u64::MAX));
        let plan = ns::plan_reduction(&mut nest, extent, &ops, tile_k)
            .map_err(|e| BuildError::new_err(e.to_string()))?;
        let mut out = Vec::new();
        for p in &plan.operands {
            let d = PyDict::new(py);
            d.set_item("why", p.why.clone())?;
            d.set_item("dims", p.dims.clone())?;
            let layout = p
                .layout
                .iter()
                .map(|s| sym_obj(py, *s))
                .collect::<PyResult<Vec<_>>>()?;
            let order = p
                .stage_order
                .iter()
                .map(|s| sym_obj(py, *s))
                .collect::<PyResult<Vec<_>>>()?;
            d.set_item("layout", layout)?;
            d.set_item("extents", p.extents.clone())?;
            d.set_item("strides", p.strides.clone())?;
            d.set_item("stage_order", order)?;
            d.set_item("pad", p.pad)?;
            d.set_item("size", p.size)?;
            out.push(d.unbind());
        }
        Ok((plan.tile_k, out, plan.report, nest.shared_bytes))
    })
}

/// The tiler's limits: `(MAX_SHARED_BYTES, MAX_STAGED_PER_THREAD, DEFAULT_TILE_K)`.
#[pyfunction]
pub fn tiling_limits() -> (u64, u64, u64) {
    (
        ns::MAX_SHARED_BYTES,
        ns::MAX_STAGED_PER_THREAD,
        ns::DEFAULT_TILE_K,
    )
}

fn shape_err(e: zyntax_opt::nest::NestError) -> PyErr {
    BuildError::new_err(e.to_string())
}

/// Out-of-range Python ints (negative, past u32) as the nearest u32: the
/// limits refuse them with the rest of the shape in the message.
fn clamp_u32(xs: &[i128]) -> Vec<u32> {
    xs.iter()
        .map(|&x| x.clamp(0, i128::from(u32::MAX)) as u32)
        .collect()
}

/// The `(x, y, z)` block shape of a workgroup (`zyntax_opt::nest::block_shape`).
#[pyfunction]
pub fn nest_block_shape(workgroup: Vec<i128>) -> PyResult<Xyz> {
    guard(|| {
        let [x, y, z] = zyntax_opt::nest::block_shape(&clamp_u32(&workgroup)).map_err(shape_err)?;
        Ok((x, y, z))
    })
}

/// `(grid, block)` covering `sizes` (`zyntax_opt::nest::launch_grid`).
#[pyfunction]
pub fn nest_launch_grid(sizes: Vec<u64>, workgroup: Vec<i128>) -> PyResult<(Xyz, Xyz)> {
    guard(|| {
        let (g, b) =
            zyntax_opt::nest::launch_grid(&sizes, &clamp_u32(&workgroup)).map_err(shape_err)?;
        Ok(((g[0], g[1], g[2]), (b[0], b[1], b[2])))
    })
}

// ====================================================================== the Rust emitter

/// An open tiled nest emitted by the Rust core (`nest_stage::TiledNest`) on
/// the `zyntax.hir.FunctionBuilder` it was begun on: `zyntax.tiling.TiledNest`
/// drives it. The user's `combine` (and the tiler's evaluation of indices it
/// cannot analyse) are Python callables called back from Rust with the
/// builder lent back to the Python builder object, so they emit through it.
#[pyclass(module = "zyntax._native")]
pub struct NativeTiledNest {
    sh: std::sync::Arc<crate::hir::FnShared>,
    nest: ns::TiledNest,
}

fn tile_err(e: ns::TileError) -> PyErr {
    BuildError::new_err(e.to_string())
}

fn value_ids(
    sh: &std::sync::Arc<crate::hir::FnShared>,
    objs: &Bound<'_, PyAny>,
    what: &str,
) -> PyResult<Vec<ValueId>> {
    items(objs, what)?
        .iter()
        .map(|o| sh.value(o, what).map(|(v, _)| v))
        .collect()
}

/// Opens a tiled nest on `b` over `sizes` (values, outermost first) with
/// `workgroup` threads per block; operands reading `writes` are never staged.
#[pyfunction]
pub fn tiling_begin(
    py: Python<'_>,
    b: &Bound<'_, crate::hir::FunctionBuilder>,
    sizes: &Bound<'_, PyAny>,
    workgroup: Vec<u32>,
    writes: &Bound<'_, PyAny>,
) -> PyResult<NativeTiledNest> {
    let sh = b.get().shared().clone();
    let sizes = value_ids(&sh, sizes, "a nest size")?;
    let writes = value_ids(&sh, writes, "a written buffer")?;
    let nest = sh.lend(py, |fb| {
        ns::TiledNest::begin(fb, &sizes, &workgroup, &writes).map_err(tile_err)
    })?;
    Ok(NativeTiledNest { sh, nest })
}

impl NativeTiledNest {
    fn wrap(
        &self,
        py: Python<'_>,
        fb: &zyntax_hir::FunctionBuilder,
        v: ValueId,
    ) -> PyResult<Py<PyAny>> {
        let ty = fb
            .value_type(v)
            .map_err(|e| BuildError::new_err(e.to_string()))?
            .clone();
        Ok(Py::new(py, self.sh.wrap(v, ty))?.into_any())
    }
}

/// A Python callback's failure, kept while the Rust emitter unwinds.
fn callback_failed(fb: &zyntax_hir::FunctionBuilder) -> zyntax_hir::BuildError {
    zyntax_hir::BuildError {
        function: fb.name().into(),
        message: "a callback of the tiler failed".into(),
    }
}

#[pymethods]
impl NativeTiledNest {
    /// The nest indices (`u32` values, outermost first).
    fn values(&self, py: Python<'_>) -> PyResult<Vec<Py<PyAny>>> {
        self.sh.lend(py, |fb| {
            self.nest
                .values
                .iter()
                .map(|&v| self.wrap(py, fb, v))
                .collect()
        })
    }

    /// Every index below its size (a `bool` value).
    fn in_range(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        self.sh.lend(py, |fb| self.wrap(py, fb, self.nest.in_range))
    }

    /// Bytes of shared memory the tiles of this nest's reductions take so far.
    #[getter]
    fn shared_bytes(&self) -> u64 {
        self.nest.stage.shared_bytes
    }

    /// Emits one reduction (`nest_stage::TiledNest::reduce`): `operands` are
    /// `(ptr, index)` with `ptr` a value and `index` as for `tiling_plan`;
    /// `combine(acc, *xs)` folds one step, `opaque(pos, k)` computes an index
    /// given as `('not', ...)`; `names` / `index_names` name values and nest
    /// indices in the report. Returns `(acc, report lines)`.
    #[pyo3(signature = (extent, init, operands, names, index_names, combine, opaque, tile_k=None))]
    #[allow(clippy::too_many_arguments)]
    fn reduce(
        &mut self,
        py: Python<'_>,
        extent: &Bound<'_, PyAny>,
        init: &Bound<'_, PyAny>,
        operands: &Bound<'_, PyAny>,
        names: Vec<(u32, String)>,
        index_names: Vec<String>,
        combine: &Bound<'_, PyAny>,
        opaque: &Bound<'_, PyAny>,
        tile_k: Option<i128>,
    ) -> PyResult<(Py<PyAny>, Vec<String>)> {
        let sh = self.sh.clone();
        let extent = if extent.is_instance_of::<PyInt>() {
            ns::Extent::Const(extent.extract().map_err(|_| bad("a size", extent))?)
        } else {
            ns::Extent::Value(sh.value(extent, "the reduction bound")?.0)
        };
        let (init, _) = sh.value(init, "the reduction's initial value")?;
        let mut ops = Vec::new();
        for op in items(operands, "a list of operands")? {
            let t = items(&op, "an operand")?;
            if t.len() != 2 {
                return Err(bad("(ptr, index)", &op));
            }
            ops.push(ns::Operand {
                ptr: sh.value(&t[0], "an operand's pointer")?.0,
                index: index(&t[1])?,
            });
        }
        if let Some(t) = tile_k.filter(|t| *t < 1) {
            return Err(BuildError::new_err(format!(
                "tile_k must be at least 1, not {t}"
            )));
        }
        let tile_k = tile_k.map(|t| u64::try_from(t).unwrap_or(u64::MAX));
        self.nest.stage.names = ns::Names {
            indices: index_names,
            values: names
                .into_iter()
                .map(|(v, n)| (ValueId::from_index(v as usize), n))
                .collect(),
        };
        let before = self.nest.report.len();
        // A Python callback's exception, raised once the emitter unwound.
        let failed: std::cell::RefCell<Option<PyErr>> = std::cell::RefCell::new(None);
        let this = &mut self.nest;
        let wrap = |fb: &zyntax_hir::FunctionBuilder, v: ValueId| -> PyResult<Py<PyAny>> {
            let ty = fb
                .value_type(v)
                .map_err(|e| BuildError::new_err(e.to_string()))?
                .clone();
            Ok(Py::new(py, sh.wrap(v, ty))?.into_any())
        };
        let call = |fb: &mut zyntax_hir::FunctionBuilder,
                    f: &Bound<'_, PyAny>,
                    args: Vec<Py<PyAny>>,
                    what: &str|
         -> Result<ValueId, zyntax_hir::BuildError> {
            let r = sh.lent_back(fb, || {
                let out = f.call1(PyTuple::new(py, args)?)?;
                sh.value(&out, what).map(|(v, _)| v)
            });
            r.map_err(|e| {
                failed.borrow_mut().get_or_insert(e);
                callback_failed(fb)
            })
        };
        let out = sh.lend(py, |fb| {
            let mut comb = |fb: &mut zyntax_hir::FunctionBuilder,
                            acc: ValueId,
                            xs: &[ValueId]|
             -> Result<ValueId, zyntax_hir::BuildError> {
                let mut args = Vec::with_capacity(xs.len() + 1);
                for &v in std::iter::once(&acc).chain(xs) {
                    args.push(wrap(fb, v).map_err(|e| {
                        failed.borrow_mut().get_or_insert(e);
                        callback_failed(fb)
                    })?);
                }
                call(fb, combine, args, "combine's result")
            };
            let mut opq = |fb: &mut zyntax_hir::FunctionBuilder,
                           pos: usize,
                           _values: &[ValueId],
                           k: ValueId|
             -> Result<ValueId, zyntax_hir::BuildError> {
                let kv = wrap(fb, k).map_err(|e| {
                    failed.borrow_mut().get_or_insert(e);
                    callback_failed(fb)
                })?;
                let pos = pos.into_pyobject(py).unwrap_or_else(|e| match e {});
                call(fb, opaque, vec![pos.into_any().unbind(), kv], "an index")
            };
            let r = this.reduce(fb, extent, init, &ops, tile_k, &mut comb, &mut opq);
            match (r, failed.borrow_mut().take()) {
                (_, Some(e)) => Err(e),
                (Err(e), None) => Err(tile_err(e)),
                (Ok((acc, _)), None) => wrap(fb, acc),
            }
        })?;
        Ok((out, self.nest.report[before..].to_vec()))
    }
}
