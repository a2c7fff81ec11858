//! `zyntax._native.TileBuilder` and `TileSchedule`: the tile layer
//! (`zyntax-tile`, docs/tile.md) for Python. `python/zyntax/tile.py` wraps
//! them in the friendly API (handles with operators, running a kernel).
//!
//! Handles cross the boundary as plain ints (tile, scalar and view ids); the
//! Rust builder checks that each names a value of its program, and the
//! Python wrapper that it comes from the same builder. Every other argument
//! is converted by the checked helpers; a `TileError` becomes a
//! `BuildError` (program misuse) or an `ArgumentError` (a bad schedule).

use crate::checked::{self, Checked, Flag, Text};
use crate::errors::{guard, ArgumentError, BuildError, InternalError};
use crate::hir::HirModule;
use crate::types::{to_type, type_name};
use pyo3::prelude::*;
use pyo3::types::{PyBool, PyDict, PyFloat, PyInt, PyList, PyTuple};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use zyntax_hir::{Arch, BinOp, CmpOp, Type, UnOp};
use zyntax_tile as zt;
use zyntax_tile::{Const, MapOp, ReduceOp, ScalarId, TileId, Value, ViewId};

/// A `TileError` as the Python exception for it.
fn tile_err(e: zt::TileError) -> PyErr {
    use zt::TileError as E;
    match e {
        E::BadSchedule { .. } | E::DoesNotFit { .. } => ArgumentError::new_err(e.to_string()),
        E::Internal(_) => InternalError::new_err(e.to_string()),
        _ => BuildError::new_err(e.to_string()),
    }
}

/// A list or tuple of ints in `u32` (a shape, grid extents), named `name`.
fn u32_list(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<u32>> {
    if !(obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()) {
        return Err(ArgumentError::new_err(format!(
            "argument '{name}': expected a list or tuple of ints, got {}",
            type_name(obj)
        )));
    }
    obj.try_iter()?
        .map(|item| checked::arg::<u32>(&item?, name))
        .collect()
}

/// A name from `names` (an op or reduction), else an `ArgumentError` listing them.
fn pick<T: Copy>(name: &str, what: &str, value: &str, all: &[(&str, T)]) -> PyResult<T> {
    all.iter()
        .find(|(n, _)| *n == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = all.iter().map(|(n, _)| *n).collect();
            ArgumentError::new_err(format!(
                "argument '{name}': unknown {what} {value:?} (expected one of: {})",
                names.join(", ")
            ))
        })
}

fn bin_op(op: &str) -> PyResult<BinOp> {
    let all: Vec<(&str, BinOp)> = BinOp::ALL.iter().map(|o| (o.name(), *o)).collect();
    pick("op", "binary op", op, &all)
}

fn cmp_op(op: &str) -> PyResult<CmpOp> {
    let all: Vec<(&str, CmpOp)> = CmpOp::ALL.iter().map(|o| (o.name(), *o)).collect();
    pick("op", "comparison", op, &all)
}

/// A constant for type `ty`: an int for integer types, an int or float for floats.
fn constant_of(obj: &Bound<'_, PyAny>, ty: &Type, name: &str) -> PyResult<Const> {
    if obj.is_instance_of::<PyInt>() && !obj.is_instance_of::<PyBool>() {
        let v = checked::arg::<i64>(obj, name)?;
        return Ok(if ty.is_float() {
            Const::Float(v as f64)
        } else {
            Const::Int(v)
        });
    }
    if obj.is_instance_of::<PyFloat>() && ty.is_float() {
        return Ok(Const::Float(obj.extract::<f64>()?));
    }
    Err(ArgumentError::new_err(format!(
        "argument '{name}': expected {} for a {ty} constant, got {}",
        if ty.is_float() {
            "an int or float"
        } else {
            "an int"
        },
        type_name(obj)
    )))
}

/// A float fill value (`load`'s `other`, `full`'s value): an int or a float.
fn number(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<f64> {
    if obj.is_instance_of::<PyBool>()
        || !(obj.is_instance_of::<PyInt>() || obj.is_instance_of::<PyFloat>())
    {
        return Err(ArgumentError::new_err(format!(
            "argument '{name}': expected an int or float, got {}",
            type_name(obj)
        )));
    }
    obj.extract::<f64>()
}

/// Loop values as `("tile" | "scalar", id)` pairs.
fn values(obj: &Bound<'_, PyAny>, name: &str) -> PyResult<Vec<Value>> {
    if !(obj.is_instance_of::<PyList>() || obj.is_instance_of::<PyTuple>()) {
        return Err(ArgumentError::new_err(format!(
            "argument '{name}': expected a list of (kind, id) pairs, got {}",
            type_name(obj)
        )));
    }
    let mut out = Vec::new();
    for item in obj.try_iter()? {
        let item = item?;
        let pair: Option<(Bound<'_, PyAny>, Bound<'_, PyAny>)> = item.extract().ok();
        let Some((kind, id)) = pair else {
            return Err(ArgumentError::new_err(format!(
                "argument '{name}': expected (kind, id) pairs, got {}",
                type_name(&item)
            )));
        };
        let id = checked::arg::<u32>(&id, name)?;
        let kind = checked::text(&kind, name)?;
        out.push(match kind.as_str() {
            "tile" => Value::Tile(TileId(id)),
            "scalar" => Value::Scalar(ScalarId(id)),
            other => {
                return Err(ArgumentError::new_err(format!(
                    "argument '{name}': kind {other:?} is neither 'tile' nor 'scalar'"
                )))
            }
        });
    }
    Ok(out)
}

fn value_pairs(vals: &[Value]) -> Vec<(&'static str, u32)> {
    vals.iter()
        .map(|v| match v {
            Value::Tile(t) => ("tile", t.0),
            Value::Scalar(s) => ("scalar", s.0),
        })
        .collect()
}

fn parse_arch(s: &str) -> PyResult<Arch> {
    Arch::from_name(s).ok_or_else(|| {
        let names: Vec<&str> = Arch::ALL.iter().map(|a| a.name()).collect();
        // Worded as zyntax.targets.check_arch words it.
        ArgumentError::new_err(format!(
            "argument 'arch': unknown arch '{s}'; expected one of {}",
            names.join(", ")
        ))
    })
}

/// The arch named by an optional `arch=` argument, else the default one
/// (`Arch::DEFAULT`, the target table's).
fn arch_or_default(arch: Option<Text>) -> PyResult<Arch> {
    Ok(arch
        .as_deref()
        .map(parse_arch)
        .transpose()?
        .unwrap_or(Arch::DEFAULT))
}

fn gemm_problem(
    m: Checked<u64>,
    n: Checked<u64>,
    k: Checked<u64>,
    bytes: Checked<u32>,
) -> zt::GemmProblem {
    zt::GemmProblem {
        m: m.0,
        n: n.0,
        k: k.0,
        operand_bytes: bytes.0,
    }
}

// ====================================================================== schedule

/// A tile schedule (`zyntax_tile::Schedule`): block tile, K step, warps,
/// pipeline stages, cluster size and arch. Immutable; `replace` gives a
/// changed copy. Fields are checked when a program is finished (or by
/// `validate`), each error naming its field.
#[pyclass(frozen, name = "TileSchedule", module = "zyntax.tile")]
#[derive(Clone)]
pub struct TileSchedule {
    pub inner: zt::Schedule,
}

#[pymethods]
impl TileSchedule {
    #[new]
    #[pyo3(signature = (block, *, k=Checked(16), warps=Checked(4), stages=Checked(1), cluster=Checked(1), arch=None, warp_specialize=Flag(false), persistent=Flag(false), wgmma_in_flight=Checked(0), pingpong=Flag(false), cluster_n=Flag(false), tma_store=Flag(false)),
        text_signature = "(block, *, k=16, warps=4, stages=1, cluster=1, arch=None, warp_specialize=False, persistent=False, wgmma_in_flight=0, pingpong=False, cluster_n=False, tma_store=False)")]
    #[allow(clippy::too_many_arguments)]
    fn new(
        block: &Bound<'_, PyAny>,
        k: Checked<u32>,
        warps: Checked<u32>,
        stages: Checked<u32>,
        cluster: Checked<u32>,
        arch: Option<Text>,
        warp_specialize: Flag,
        persistent: Flag,
        wgmma_in_flight: Checked<u32>,
        pingpong: Flag,
        cluster_n: Flag,
        tma_store: Flag,
    ) -> PyResult<Self> {
        Ok(TileSchedule {
            inner: zt::Schedule::block(&u32_list(block, "block")?)
                .k(k.0)
                .warps(warps.0)
                .stages(stages.0)
                .cluster(cluster.0)
                .arch(arch_or_default(arch)?)
                .warp_specialize(warp_specialize.0)
                .persistent(persistent.0)
                .wgmma_in_flight(wgmma_in_flight.0)
                .pingpong(pingpong.0)
                .cluster_n(cluster_n.0)
                .tma_store(tma_store.0),
        })
    }

    #[getter]
    fn block(&self) -> Vec<u32> {
        self.inner.block.clone()
    }
    #[getter]
    fn k(&self) -> u32 {
        self.inner.k
    }
    #[getter]
    fn warps(&self) -> u32 {
        self.inner.warps
    }
    #[getter]
    fn stages(&self) -> u32 {
        self.inner.stages
    }
    #[getter]
    fn cluster(&self) -> u32 {
        self.inner.cluster
    }
    /// The cluster's CTAs are adjacent along N (sharing `a`), not along M.
    #[getter]
    fn cluster_n(&self) -> bool {
        self.inner.cluster_n
    }
    #[getter]
    fn arch(&self) -> &'static str {
        self.inner.arch.name()
    }
    /// sm_90a GEMM loops on a TMA producer warpgroup and wgmma consumers.
    #[getter]
    fn warp_specialize(&self) -> bool {
        self.inner.warp_specialize
    }
    /// About one CTA per SM walking the program's grid (warp-specialised).
    #[getter]
    fn persistent(&self) -> bool {
        self.inner.persistent
    }
    /// wgmma groups a warp-specialised consumer keeps in flight (0 or 1).
    #[getter]
    fn wgmma_in_flight(&self) -> u32 {
        self.inner.wgmma_in_flight
    }
    /// Two consumer sets of `warps` warps take a persistent CTA's program
    /// instances in turn (one's epilogue under the other's wgmmas).
    #[getter]
    fn pingpong(&self) -> bool {
        self.inner.pingpong
    }
    /// The epilogue stores the output tile through shared memory and TMA.
    #[getter]
    fn tma_store(&self) -> bool {
        self.inner.tma_store
    }
    /// Threads per CTA (`warps * 32`).
    #[getter]
    fn threads(&self) -> u32 {
        self.inner.warps.saturating_mul(32)
    }

    /// Checks each field on its own (`ArgumentError` naming the field).
    fn validate(&self) -> PyResult<()> {
        self.inner.validate().map_err(tile_err)
    }

    /// Also checks that a GEMM with `operand_bytes`-byte operands fits shared
    /// memory and registers.
    fn validate_gemm(&self, operand_bytes: Checked<u32>) -> PyResult<()> {
        self.inner.validate_gemm(operand_bytes.0).map_err(tile_err)
    }

    /// The launch grid for a problem of `extents` (one per block dim).
    fn grid(&self, extents: &Bound<'_, PyAny>) -> PyResult<(u32, u32, u32)> {
        let ext = u32_list(extents, "extents")?;
        let ext: Vec<u64> = ext.into_iter().map(u64::from).collect();
        let g = self.inner.grid(&ext).map_err(tile_err)?;
        Ok((g[0], g[1], g[2]))
    }

    fn __repr__(&self) -> String {
        let s = &self.inner;
        format!(
            "Schedule(block={:?}, k={}, warps={}, stages={}, cluster={}, arch='{}'{}{}{}{}{}{})",
            s.block,
            s.k,
            s.warps,
            s.stages,
            s.cluster,
            s.arch.name(),
            if s.warp_specialize {
                ", warp_specialize=True"
            } else {
                ""
            },
            if s.persistent {
                ", persistent=True"
            } else {
                ""
            },
            if s.wgmma_in_flight == zt::Schedule::block(&[]).wgmma_in_flight {
                String::new()
            } else {
                format!(", wgmma_in_flight={}", s.wgmma_in_flight)
            },
            if s.pingpong { ", pingpong=True" } else { "" },
            if s.cluster_n { ", cluster_n=True" } else { "" },
            if s.tma_store { ", tma_store=True" } else { "" }
        )
    }
}

/// A reasonable FFMA schedule for an `m x n x k` GEMM on `arch`
/// (`zyntax_tile::heuristic`); with `warp_specialize` on sm_90a, the
/// warp-specialised persistent schedule for `sms` SMs
/// (`zyntax_tile::ws_heuristic`) where one fits the shape.
#[pyfunction]
#[pyo3(signature = (m, n, k, *, operand_bytes=Checked(4), arch=None, warp_specialize=Flag(false), sms=Checked(132)),
    text_signature = "(m, n, k, *, operand_bytes=4, arch=None, warp_specialize=False, sms=132)")]
#[allow(clippy::too_many_arguments)]
pub fn tile_heuristic(
    m: Checked<u64>,
    n: Checked<u64>,
    k: Checked<u64>,
    operand_bytes: Checked<u32>,
    arch: Option<Text>,
    warp_specialize: Flag,
    sms: Checked<u64>,
) -> PyResult<TileSchedule> {
    let arch = arch_or_default(arch)?;
    let p = gemm_problem(m, n, k, operand_bytes);
    let ws = if warp_specialize.0 && arch == Arch::Sm90a {
        zt::ws_heuristic(&p, sms.0)
    } else {
        None
    };
    Ok(TileSchedule {
        inner: ws.unwrap_or_else(|| zt::heuristic(&p, arch)),
    })
}

/// The library matmul's schedule for a `batch` of `m x n x k` products on
/// `arch` with `sms` SMs, and its K splits (`zyntax_tile::schedule::gemm_schedule`).
#[pyfunction]
#[pyo3(signature = (m, n, k, *, batch=Checked(1), operand_bytes=Checked(2), arch=None, sms=Checked(132)),
    text_signature = "(m, n, k, *, batch=1, operand_bytes=2, arch=None, sms=132)")]
pub fn tile_gemm_schedule(
    m: Checked<u64>,
    n: Checked<u64>,
    k: Checked<u64>,
    batch: Checked<u64>,
    operand_bytes: Checked<u32>,
    arch: Option<Text>,
    sms: Checked<u64>,
) -> PyResult<(TileSchedule, u32)> {
    let arch = arch_or_default(arch)?;
    let p = gemm_problem(m, n, k, operand_bytes);
    let (inner, splits) = zt::schedule::gemm_schedule(&p, batch.0, arch, sms.0.max(1));
    Ok((TileSchedule { inner }, splits))
}

/// The swapped-operand schedule of an `m x n x k` bf16/f16 product on sm_90a
/// with `sms` SMs (`zyntax_tile::swapped_schedule`: block `[weight rows,
/// tokens]` of `C^T = B^T A^T`) and its K splits, or `None` where the
/// swapped form does not apply.
#[pyfunction]
#[pyo3(signature = (m, n, k, *, sms=Checked(132)), text_signature = "(m, n, k, *, sms=132)")]
pub fn tile_swapped_schedule(
    m: Checked<u64>,
    n: Checked<u64>,
    k: Checked<u64>,
    sms: Checked<u64>,
) -> PyResult<Option<(TileSchedule, u32)>> {
    let p = gemm_problem(m, n, k, Checked(2));
    Ok(zt::swapped_schedule(&p, sms.0).map(|(inner, splits)| (TileSchedule { inner }, splits)))
}

/// The gemv program's schedule (`zyntax_tile::schedule::gemv_schedule`:
/// block `[1, bn]`, K step `bk`, warps) for an `m x n x k` product on `arch`
/// with `sms` SMs and its K splits, or `None` above its rows. `tile`
/// (`[bk, bn, warps]`) and `ctas_per_sm` replace the table's (benches).
#[pyfunction]
#[pyo3(signature = (m, n, k, *, arch=None, sms=Checked(132), tile=None, ctas_per_sm=None),
    text_signature = "(m, n, k, *, arch=None, sms=132, tile=None, ctas_per_sm=None)")]
pub fn tile_gemv_schedule(
    m: Checked<u64>,
    n: Checked<u64>,
    k: Checked<u64>,
    arch: Option<Text>,
    sms: Checked<u64>,
    tile: Option<[Checked<u32>; 3]>,
    ctas_per_sm: Option<Checked<u64>>,
) -> PyResult<Option<(TileSchedule, u32)>> {
    let arch = arch_or_default(arch)?;
    let p = gemm_problem(m, n, k, Checked(2));
    let sms = sms.0.max(1);
    let Some((mut inner, mut splits)) = zt::schedule::gemv_schedule(&p, arch, sms) else {
        return Ok(None);
    };
    if tile.is_some() || ctas_per_sm.is_some() {
        if let Some([bk, bn, warps]) = tile {
            inner = zt::Schedule::block(&[1, bn.0])
                .k(bk.0)
                .warps(warps.0)
                .arch(arch);
            inner.validate().map_err(tile_err)?;
        }
        let ctas = ctas_per_sm.map_or(zt::schedule::GEMV_CTAS_PER_SM, |c| c.0.max(1));
        splits = zt::schedule::gemv_splits(&p, &inner, ctas, sms);
    }
    Ok(Some((TileSchedule { inner }, splits)))
}

// ====================================================================== builder

enum State {
    Open(Box<zt::TileBuilder>),
    /// Why the builder can no longer be used.
    Closed(&'static str),
}

/// Builds one tile program (`zyntax_tile::TileBuilder`). Methods return
/// integer handles; the first misuse is raised by `finish()` as a
/// `BuildError` naming the op and operand (ops after it are not checked).
#[pyclass(frozen, name = "TileBuilder", module = "zyntax.tile")]
pub struct TileBuilder {
    state: Mutex<State>,
    /// `for_range` bodies running now (`finish` is refused inside one).
    open_loops: AtomicUsize,
}

impl TileBuilder {
    fn lock(&self) -> PyResult<MutexGuard<'_, State>> {
        self.state
            .lock()
            .map_err(|_| InternalError::new_err("tile builder lock poisoned"))
    }

    /// Runs `f` on the open builder.
    fn with<T>(&self, f: impl FnOnce(&mut zt::TileBuilder) -> T) -> PyResult<T> {
        guard(|| match &mut *self.lock()? {
            State::Open(b) => Ok(f(b)),
            State::Closed(why) => Err(BuildError::new_err(format!(
                "the tile builder is closed: {why}"
            ))),
        })
    }

    fn take(&self, why: &'static str) -> PyResult<zt::TileBuilder> {
        let mut st = self.lock()?;
        match std::mem::replace(&mut *st, State::Closed(why)) {
            State::Open(b) => Ok(*b),
            State::Closed(old) => {
                *st = State::Closed(old);
                Err(BuildError::new_err(format!(
                    "the tile builder is closed: {old}"
                )))
            }
        }
    }

    fn put(&self, b: zt::TileBuilder) -> PyResult<()> {
        *self.lock()? = State::Open(Box::new(b));
        Ok(())
    }
}

fn origin(obj: &Bound<'_, PyAny>) -> PyResult<Vec<ScalarId>> {
    Ok(u32_list(obj, "origin")?.into_iter().map(ScalarId).collect())
}

#[pymethods]
impl TileBuilder {
    #[new]
    fn new(name: Text, schedule: checked::Is<'_, TileSchedule>) -> PyResult<Self> {
        let name = name.0;
        let ok = name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !ok {
            return Err(ArgumentError::new_err(format!(
                "argument 'name': {name:?} is not an identifier (letters, digits, '_')"
            )));
        }
        let s = schedule.get().inner.clone();
        Ok(TileBuilder {
            state: Mutex::new(State::Open(Box::new(zt::TileBuilder::new(name, s)))),
            open_loops: AtomicUsize::new(0),
        })
    }

    /// The schedule the program is built for.
    #[getter]
    fn schedule(&self) -> PyResult<TileSchedule> {
        self.with(|b| TileSchedule {
            inner: b.schedule().clone(),
        })
    }

    /// `(shape, elem)` of tile `tile`.
    fn tile_type(&self, tile: Checked<u32>) -> PyResult<(Vec<u32>, String)> {
        self.with(|b| {
            b.program()
                .tiles
                .get(tile.0 as usize)
                .map(|t| (t.shape.clone(), t.elem.to_string()))
        })?
        .ok_or_else(|| ArgumentError::new_err(format!("argument 'tile': no tile {}", tile.0)))
    }

    /// `(name, elem, rank)` of view `view`.
    fn view_type(&self, view: Checked<u32>) -> PyResult<(String, String, usize)> {
        self.with(|b| {
            b.program()
                .views
                .get(view.0 as usize)
                .map(|v| (v.name.clone(), v.elem.to_string(), v.rank))
        })?
        .ok_or_else(|| ArgumentError::new_err(format!("argument 'view': no view {}", view.0)))
    }

    /// The type of scalar `scalar`.
    fn scalar_type(&self, scalar: Checked<u32>) -> PyResult<String> {
        self.with(|b| {
            b.program()
                .scalars
                .get(scalar.0 as usize)
                .map(|t| t.to_string())
        })?
        .ok_or_else(|| ArgumentError::new_err(format!("argument 'scalar': no scalar {}", scalar.0)))
    }

    // ---------------------------------------------------------------- parameters and scalars

    /// `align_bytes` (with `unit_stride_dim`) promises the base pointer's
    /// alignment, which lets loads and stores along that dim be vectors.
    #[pyo3(signature = (name, elem, rank, *, unit_stride_dim=None, align_bytes=None))]
    fn view(
        &self,
        name: Text,
        elem: &Bound<'_, PyAny>,
        rank: Checked<usize>,
        unit_stride_dim: Option<Checked<usize>>,
        align_bytes: Option<Checked<u32>>,
    ) -> PyResult<u32> {
        let elem = to_type(elem)?;
        match (unit_stride_dim, align_bytes) {
            (Some(d), Some(a)) => {
                self.with(|b| b.view_param_aligned(&name, elem, rank.0, d.0, a.0).0)
            }
            (Some(d), None) => self.with(|b| b.view_param_unit_stride(&name, elem, rank.0, d.0).0),
            (None, None) => self.with(|b| b.view_param(&name, elem, rank.0).0),
            (None, Some(_)) => Err(ArgumentError::new_err(
                "argument 'align_bytes': needs unit_stride_dim (the dim the vectors run along)",
            )),
        }
    }

    fn scalar_param(&self, name: Text, ty: &Bound<'_, PyAny>) -> PyResult<u32> {
        let ty = to_type(ty)?;
        self.with(|b| b.scalar_param(&name, ty).0)
    }

    fn program_id(&self, axis: Checked<u32>) -> PyResult<u32> {
        self.with(|b| b.program_id(axis.0).0)
    }

    /// A constant of scalar type `ty`.
    fn constant(&self, ty: &Bound<'_, PyAny>, value: &Bound<'_, PyAny>) -> PyResult<u32> {
        let ty = to_type(ty)?;
        let c = constant_of(value, &ty, "value")?;
        self.with(|b| b.constant(ty, c).0)
    }

    fn dim(&self, view: Checked<u32>, dim: Checked<usize>) -> PyResult<u32> {
        self.with(|b| b.dim(ViewId(view.0), dim.0).0)
    }

    fn scalar_binary(&self, op: Text, a: Checked<u32>, b: Checked<u32>) -> PyResult<u32> {
        let op = bin_op(&op)?;
        self.with(|t| t.scalar_binary(op, ScalarId(a.0), ScalarId(b.0)).0)
    }

    fn scalar_cmp(&self, op: Text, a: Checked<u32>, b: Checked<u32>) -> PyResult<u32> {
        let op = cmp_op(&op)?;
        self.with(|t| t.scalar_cmp(op, ScalarId(a.0), ScalarId(b.0)).0)
    }

    // ---------------------------------------------------------------- tiles and memory

    fn splat(&self, shape: &Bound<'_, PyAny>, value: Checked<u32>) -> PyResult<u32> {
        let shape = u32_list(shape, "shape")?;
        self.with(|b| b.splat(&shape, ScalarId(value.0)).0)
    }

    fn full(
        &self,
        shape: &Bound<'_, PyAny>,
        elem: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<u32> {
        let shape = u32_list(shape, "shape")?;
        let elem = to_type(elem)?;
        let value = number(value, "value")?;
        self.with(|b| b.full(&shape, elem, value).0)
    }

    fn iota(&self, shape: &Bound<'_, PyAny>, axis: Checked<usize>) -> PyResult<u32> {
        let shape = u32_list(shape, "shape")?;
        self.with(|b| b.iota(&shape, axis.0).0)
    }

    #[pyo3(signature = (view, origin, shape, other=None))]
    fn load(
        &self,
        view: Checked<u32>,
        origin: &Bound<'_, PyAny>,
        shape: &Bound<'_, PyAny>,
        other: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<u32> {
        let o = self::origin(origin)?;
        let shape = u32_list(shape, "shape")?;
        let other = other.map(|v| number(v, "other")).transpose()?;
        self.with(|b| {
            b.load_or(ViewId(view.0), &o, &shape, other.unwrap_or(0.0))
                .0
        })
    }

    fn store(
        &self,
        view: Checked<u32>,
        origin: &Bound<'_, PyAny>,
        tile: Checked<u32>,
    ) -> PyResult<()> {
        let o = self::origin(origin)?;
        self.with(|b| b.store(ViewId(view.0), &o, TileId(tile.0)))
    }

    fn atomic_add(
        &self,
        view: Checked<u32>,
        origin: &Bound<'_, PyAny>,
        tile: Checked<u32>,
    ) -> PyResult<()> {
        let o = self::origin(origin)?;
        self.with(|b| b.atomic_add(ViewId(view.0), &o, TileId(tile.0)))
    }

    // ---------------------------------------------------------------- tile ops

    /// `op`: a HIR unary op's name, or `<name>_approx` for a fast f32
    /// approximation (`tanh_approx`, `ex2_approx`, `rcp_approx`,
    /// `ex2_ftz_approx`: `MapOp::Approx`).
    fn unary(&self, op: Text, a: Checked<u32>) -> PyResult<u32> {
        let names: Vec<String> = UnOp::ALL
            .iter()
            .map(|o| o.name().to_string())
            .chain(
                zyntax_hir::ApproxOp::ALL
                    .iter()
                    .map(|o| format!("{}_approx", o.name())),
            )
            .collect();
        let all: Vec<(&str, MapOp)> = names
            .iter()
            .map(String::as_str)
            .zip(
                UnOp::ALL
                    .iter()
                    .map(|&o| MapOp::Unary(o))
                    .chain(zyntax_hir::ApproxOp::ALL.iter().map(|&o| MapOp::Approx(o))),
            )
            .collect();
        let op = pick("op", "unary op", &op, &all)?;
        self.with(|b| b.map(op, &[TileId(a.0)]).0)
    }

    fn binary(&self, op: Text, a: Checked<u32>, b: Checked<u32>) -> PyResult<u32> {
        let op = bin_op(&op)?;
        self.with(|t| t.binary(op, TileId(a.0), TileId(b.0)).0)
    }

    fn cmp(&self, op: Text, a: Checked<u32>, b: Checked<u32>) -> PyResult<u32> {
        let op = cmp_op(&op)?;
        self.with(|t| t.cmp(op, TileId(a.0), TileId(b.0)).0)
    }

    fn fma(&self, a: Checked<u32>, b: Checked<u32>, c: Checked<u32>) -> PyResult<u32> {
        self.with(|t| {
            t.map(MapOp::Fma, &[TileId(a.0), TileId(b.0), TileId(c.0)])
                .0
        })
    }

    fn where_(&self, cond: Checked<u32>, a: Checked<u32>, b: Checked<u32>) -> PyResult<u32> {
        self.with(|t| t.where_(TileId(cond.0), TileId(a.0), TileId(b.0)).0)
    }

    fn broadcast(&self, tile: Checked<u32>, shape: &Bound<'_, PyAny>) -> PyResult<u32> {
        let shape = u32_list(shape, "shape")?;
        self.with(|b| b.broadcast(TileId(tile.0), &shape).0)
    }

    fn cast(&self, tile: Checked<u32>, elem: &Bound<'_, PyAny>) -> PyResult<u32> {
        let elem = to_type(elem)?;
        self.with(|b| b.cast(TileId(tile.0), elem).0)
    }

    fn reduce(&self, tile: Checked<u32>, axis: Checked<usize>, op: Text) -> PyResult<u32> {
        let all = [
            ("sum", ReduceOp::Sum),
            ("max", ReduceOp::Max),
            ("min", ReduceOp::Min),
        ];
        let op = pick("op", "reduction", &op, &all)?;
        self.with(|b| b.reduce(TileId(tile.0), axis.0, op).0)
    }

    /// `inputs`: how the dot reads `a` and `b` (`native`, `tf32` for f32
    /// operands, `e4m3` / `e5m2` for u8 fp8 bytes).
    #[pyo3(signature = (a, b, acc, inputs = None))]
    fn dot(
        &self,
        a: Checked<u32>,
        b: Checked<u32>,
        acc: Checked<u32>,
        inputs: Option<Text>,
    ) -> PyResult<u32> {
        let all = [
            ("native", zt::DotInputs::Native),
            ("tf32", zt::DotInputs::Tf32),
            ("e4m3", zt::DotInputs::E4m3),
            ("e5m2", zt::DotInputs::E5m2),
        ];
        let inputs = match inputs {
            Some(name) => pick("inputs", "dot input format", &name, &all)?,
            None => zt::DotInputs::Native,
        };
        self.with(|t| t.dot_as(TileId(a.0), TileId(b.0), TileId(acc.0), inputs).0)
    }

    /// A counted loop: `body(iv, carried)` (scalar id, `(kind, id)` pairs)
    /// adds the loop body's ops to this builder and returns the yielded
    /// `(kind, id)` pairs; returns the values after the last iteration. If
    /// `body` raises, the builder is closed and the exception propagates.
    fn for_range(
        &self,
        py: Python<'_>,
        lo: Checked<u32>,
        hi: Checked<u32>,
        step: Checked<u32>,
        inits: &Bound<'_, PyAny>,
        body: &Bound<'_, PyAny>,
    ) -> PyResult<Vec<(&'static str, u32)>> {
        let inits = values(inits, "inits")?;
        if !body.is_callable() {
            return Err(ArgumentError::new_err(format!(
                "argument 'body': expected a callable, got {}",
                type_name(body)
            )));
        }
        let mut b = self.take("a for_range body raised or finished the builder")?;
        let mut failure: Option<PyErr> = None;
        let results = b.for_range(
            ScalarId(lo.0),
            ScalarId(hi.0),
            ScalarId(step.0),
            &inits,
            |t, iv, carried| {
                // The body's calls reach this object: lend it the builder.
                let placeholder = zt::TileBuilder::new("", t.schedule().clone());
                let real = std::mem::replace(t, placeholder);
                if let Err(e) = self.put(real) {
                    failure = Some(e);
                    return Vec::new();
                }
                self.open_loops.fetch_add(1, Ordering::SeqCst);
                let yields = body
                    .call1((iv.0, PyList::new(py, value_pairs(carried)).ok()))
                    .and_then(|y| values(&y, "yields"));
                self.open_loops.fetch_sub(1, Ordering::SeqCst);
                match self.take("a for_range body raised or finished the builder") {
                    Ok(real) => *t = real,
                    Err(e) => failure = Some(e),
                }
                yields.unwrap_or_else(|e| {
                    failure.get_or_insert(e);
                    Vec::new()
                })
            },
        );
        if let Some(e) = failure {
            return Err(e);
        }
        self.put(b)?;
        Ok(value_pairs(&results))
    }

    /// Lowers the program to a verified HIR kernel: a dict with `module`
    /// (`zyntax.hir.Module`), `name`, `block`, `shared_bytes` and `params`
    /// (`("view", name, elem, rank)` or `("scalar", name, type)`),
    /// `tensor_maps` (`(view, param index, inner dim, outer dim, [box
    /// inner, box outer])`, parameters after `params`), `persistent`,
    /// `cluster` (CTAs per cluster along x, 1: none) and
    /// `dynamic_shared_bytes`. The builder is closed afterwards.
    fn finish<'py>(&self, py: Python<'py>) -> PyResult<Bound<'py, PyDict>> {
        if self.open_loops.load(Ordering::SeqCst) > 0 {
            return Err(BuildError::new_err(
                "finish() inside a for_range body: finish the program after its loops",
            ));
        }
        let b = self.take("finish() was called")?;
        let kernel = guard(|| b.finish().map_err(tile_err))?;
        let json = kernel
            .module
            .to_json()
            .map_err(|e| InternalError::new_err(format!("module to JSON: {e}")))?;
        let module = py
            .get_type::<HirModule>()
            .call_method1("from_json", (json,))?;
        let params = PyList::empty(py);
        for p in &kernel.launch.params {
            let item = match p {
                zt::KernelParam::View { name, elem, rank } => {
                    ("view", name.clone(), elem.to_string(), *rank).into_pyobject(py)?
                }
                zt::KernelParam::Scalar { name, ty } => {
                    ("scalar", name.clone(), ty.to_string(), 0usize).into_pyobject(py)?
                }
            };
            params.append(item)?;
        }
        let d = PyDict::new(py);
        d.set_item("module", module)?;
        d.set_item("name", &kernel.name)?;
        d.set_item("block", kernel.launch.block.to_vec())?;
        d.set_item("shared_bytes", kernel.launch.shared_bytes)?;
        d.set_item("params", params)?;
        let maps = PyList::empty(py);
        for m in &kernel.launch.tensor_maps {
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
        d.set_item("persistent", kernel.launch.persistent)?;
        d.set_item("cluster", kernel.launch.cluster)?;
        d.set_item("dynamic_shared_bytes", kernel.launch.dynamic_shared_bytes)?;
        Ok(d)
    }
}
