//! Parallel loop nests for Rust front-ends: a 1- to 3-D iteration space with
//! a workgroup shape, lowered as it is built to thread and block indices with
//! bounds guards (the same lowering as Python's `zyntax.nest.parallel_for`).
//!
//! The last index runs along `x` (consecutive indices are consecutive threads,
//! so their accesses coalesce), the one before along `y`, the first of three
//! along `z`; each index is `block_idx * block_dim + thread_idx` and the body
//! runs only where `index < size` in every dimension, so any grid covering the
//! sizes is correct; [`launch_grid`] computes one from the sizes at launch.
//!
//! ```
//! use zyntax_hir::*;
//! use zyntax_opt::nest;
//! let f32p = Type::ptr(AddrSpace::Global, Type::F32);
//! let mut b = FunctionBuilder::kernel("fill", &[f32p, Type::U32, Type::U32]);
//! let (out, rows, cols) = (b.param(0), b.param(1), b.param(2));
//! let nest = nest::begin_parallel_for(&mut b, &[rows, cols], &[16, 16]).unwrap();
//! let (i, j) = (nest.indices[0], nest.indices[1]);
//! let k = b.mul(i, cols).unwrap();
//! let k = b.add(k, j).unwrap();
//! let p = b.ptr_add(out, k).unwrap();
//! let one = b.fconst(Type::F32, 1.0).unwrap();
//! b.store(p, one).unwrap();
//! nest::end_parallel_for(&mut b, nest).unwrap();
//! b.ret(&[]).unwrap();
//! assert_eq!(nest::launch_grid(&[100, 1000], &[16, 16]).unwrap(), ([63, 7, 1], [16, 16, 1]));
//! ```

use zyntax_hir::{BinOp, BuildError, CmpOp, Dim, FunctionBuilder, IfFrame, Type, ValueId};

/// The largest workgroup extent per dimension (x, y, z) and in total that
/// every CUDA device zyntax targets (sm_70 and newer) allows.
pub const MAX_WORKGROUP: [u32; 3] = [1024, 1024, 64];
pub const MAX_WORKGROUP_THREADS: u32 = 1024;
/// The largest grid extent per dimension (x, y, z) devices launch.
pub const MAX_GRID: [u64; 3] = [(1 << 31) - 1, 65535, 65535];

/// `(16, 16)`, `(2048,)`: shapes as the Python front door writes them.
fn shape<T: std::fmt::Display>(xs: &[T]) -> String {
    let parts: Vec<String> = xs.iter().map(ToString::to_string).collect();
    match parts.len() {
        1 => format!("({},)", parts[0]),
        _ => format!("({})", parts.join(", ")),
    }
}

#[derive(Debug, thiserror::Error)]
pub enum NestError {
    /// A workgroup devices cannot run, or sizes that do not match it.
    #[error("{0}")]
    Shape(String),
    #[error(transparent)]
    Build(#[from] BuildError),
}

/// An open nest: its indices (outermost first, `u32`) are valid until
/// [`end_parallel_for`].
#[derive(Clone, Debug)]
pub struct NestFrame {
    pub indices: Vec<ValueId>,
    guard: IfFrame,
}

/// The `(x, y, z)` block shape of a workgroup given outermost first.
pub fn block_shape(workgroup: &[u32]) -> Result<[u32; 3], NestError> {
    if !(1..=3).contains(&workgroup.len()) {
        return Err(NestError::Shape(format!(
            "a workgroup has 1 to 3 dimensions, not {}",
            workgroup.len()
        )));
    }
    if workgroup.contains(&0) {
        return Err(NestError::Shape(format!(
            "workgroup {} has an extent below 1",
            shape(workgroup)
        )));
    }
    let mut xyz = [1u32; 3];
    for (slot, w) in xyz.iter_mut().zip(workgroup.iter().rev()) {
        *slot = *w;
    }
    for ((name, w), limit) in ["x", "y", "z"].iter().zip(xyz).zip(MAX_WORKGROUP) {
        if w > limit {
            return Err(NestError::Shape(format!(
                "workgroup {} is {w} threads along {name}; devices allow at most {limit}",
                shape(workgroup)
            )));
        }
    }
    let total: u64 = xyz.iter().map(|&w| u64::from(w)).product();
    if total > u64::from(MAX_WORKGROUP_THREADS) {
        return Err(NestError::Shape(format!(
            "workgroup {} has {total} threads; devices allow at most \
             {MAX_WORKGROUP_THREADS} per block",
            shape(workgroup)
        )));
    }
    Ok(xyz)
}

/// A nest of `n` sizes needs a workgroup of `n` extents.
pub fn dims_match(n: usize, workgroup: &[u32]) -> Result<(), NestError> {
    if n == workgroup.len() {
        return Ok(());
    }
    Err(NestError::Shape(format!(
        "the nest has {n} dimensions but the workgroup {} has {}",
        shape(workgroup),
        workgroup.len()
    )))
}

/// `(grid, block)` in `(x, y, z)` order covering `sizes` (outermost first);
/// a grid past the device limits ([`MAX_GRID`]) is an error.
pub fn launch_grid(sizes: &[u64], workgroup: &[u32]) -> Result<([u32; 3], [u32; 3]), NestError> {
    let block = block_shape(workgroup)?;
    dims_match(sizes.len(), workgroup)?;
    let mut grid = [1u32; 3];
    let slots = grid.iter_mut().zip(sizes.iter().rev()).zip(block);
    for (((g, s), b), (name, limit)) in slots.zip(["x", "y", "z"].iter().zip(MAX_GRID)) {
        let blocks = s.div_ceil(u64::from(b)).max(1);
        if blocks > limit {
            return Err(NestError::Shape(format!(
                "iteration space {} needs {blocks} blocks along {name} with workgroup {}; \
                 devices allow at most {limit}",
                shape(sizes),
                shape(workgroup)
            )));
        }
        *g = blocks as u32;
    }
    Ok((grid, block))
}

/// `index < size` for a `u32` index and a size of the caller's type.
pub(crate) type LessThan<'a> =
    dyn FnMut(&mut FunctionBuilder, ValueId, ValueId) -> Result<ValueId, BuildError> + 'a;

/// The index type of a nest's sizes, which decides how [`open`] builds each
/// dim's block extent and bound check.
pub(crate) enum IndexType<'a> {
    /// `u32` sizes: the `block_dim` register (any launch whose grid covers
    /// the sizes is correct) and a `u32` compare.
    U32,
    /// Sizes of any integer type (`nest_stage`, whose blocks are exactly
    /// the workgroup): the workgroup's extent as a constant, and `lt`
    /// compares the `u32` index with the size, meeting the two types.
    Typed(&'a mut LessThan<'a>),
}

/// A nest's opening, per dim outermost first: the thread index, the
/// block's first index (`block_idx * block extent`), the index, and every
/// index below its size; `first` is the first value it defined.
pub(crate) struct Opened {
    pub tid: Vec<ValueId>,
    pub base: Vec<ValueId>,
    pub indices: Vec<ValueId>,
    pub inside: ValueId,
    pub first: ValueId,
}

/// The opening both builder nests share ([`begin_parallel_for`] and
/// `nest_stage::TiledNest::begin`): checks the workgroup, sets the kernel's
/// `max_threads` to its block shape and computes the indices (the last
/// along `x`) and their bound check.
pub(crate) fn open(
    b: &mut FunctionBuilder,
    sizes: &[ValueId],
    workgroup: &[u32],
    mut index_type: IndexType<'_>,
) -> Result<Opened, NestError> {
    dims_match(sizes.len(), workgroup)?;
    let block = block_shape(workgroup)?;
    if let Some(info) = b.kernel_info_mut() {
        info.max_threads = Some(block);
    }
    let dims = [Dim::X, Dim::Y, Dim::Z];
    let n = sizes.len();
    let (mut tid, mut base, mut indices) = (Vec::new(), Vec::new(), Vec::new());
    let (mut first, mut inside) = (None, None);
    for (k, &size) in sizes.iter().enumerate() {
        let d = dims[n - 1 - k];
        let bid = b.block_idx(d)?;
        first.get_or_insert(bid);
        let extent = match index_type {
            IndexType::U32 => b.block_dim(d)?,
            IndexType::Typed(_) => b.iconst(Type::U32, i64::from(workgroup[k]))?,
        };
        let t = b.thread_idx(d)?;
        let bs = b.mul(bid, extent)?;
        let i = b.add(bs, t)?;
        let below = match &mut index_type {
            IndexType::U32 => b.cmp(CmpOp::Lt, i, size)?,
            IndexType::Typed(lt) => lt(b, i, size)?,
        };
        inside = Some(match inside {
            None => below,
            Some(c) => b.binary(BinOp::And, c, below)?,
        });
        tid.push(t);
        base.push(bs);
        indices.push(i);
    }
    let (Some(inside), Some(first)) = (inside, first) else {
        return Err(NestError::Shape("a nest needs a dimension".into()));
    };
    Ok(Opened {
        tid,
        base,
        indices,
        inside,
        first,
    })
}

/// Opens a nest over `sizes` (`u32` values, outermost first) in kernel `b`,
/// and sets the kernel's `max_threads` to the workgroup's block shape.
pub fn begin_parallel_for(
    b: &mut FunctionBuilder,
    sizes: &[ValueId],
    workgroup: &[u32],
) -> Result<NestFrame, NestError> {
    let opened = open(b, sizes, workgroup, IndexType::U32)?;
    let guard = b.begin_if(opened.inside, &[])?;
    Ok(NestFrame {
        indices: opened.indices,
        guard,
    })
}

/// Closes the nest opened by [`begin_parallel_for`].
pub fn end_parallel_for(b: &mut FunctionBuilder, frame: NestFrame) -> Result<(), NestError> {
    b.end_if(frame.guard, &[])?;
    Ok(())
}
