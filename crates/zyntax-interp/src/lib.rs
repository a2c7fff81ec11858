//! # zyntax-interp
//!
//! The reference interpreter: it gives every verified HIR module an exact
//! meaning on any machine. Kernels run over a grid of blocks; a block's
//! threads run in warps of 32 in lockstep (shuffle/vote/match with PTX's
//! masks and widths, MMA fragments as warp-collective values), wait at
//! barriers, share per-block shared memory, and issue atomics and `cp.async`
//! copies. Host functions run as a single thread.
//!
//! Program faults (out-of-bounds access, `unreachable`, a data race or an
//! uninitialized read in shared memory, a divergent barrier or warp
//! collective) are [`InterpError::Trap`]s carrying the kernel, instruction,
//! thread and block; interpreter limits are [`InterpError::Unsupported`],
//! [`InterpError::FuelExhausted`] or [`InterpError::Internal`]. Nothing panics
//! on user input. The semantics are written down in `docs/semantics.md`.
//!
//! ```
//! use zyntax_hir::*;
//! use zyntax_interp::{Arg, Interpreter};
//! let mut b = FunctionBuilder::kernel("iota", &[Type::ptr(AddrSpace::Global, Type::U32)]);
//! let out = b.param(0);
//! let tid = b.thread_idx(Dim::X).unwrap();
//! let p = b.ptr_add(out, tid).unwrap();
//! b.store(p, tid).unwrap();
//! b.ret(&[]).unwrap();
//! let mut m = Module::new("demo");
//! m.functions.push(b.finish().unwrap());
//! let mut bufs = vec![vec![0u8; 4 * 64]];
//! Interpreter::new(&m).unwrap()
//!     .launch("iota", [1, 1, 1], [64, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
//!     .unwrap();
//! assert_eq!(bufs[0][4 * 5], 5);
//! ```

mod atomic;
mod cluster;
mod control;
mod cp_async;
pub mod decode;
mod exec;
mod frag_mma;
pub mod mbarrier;
pub mod memory;
pub mod pack;
pub mod scalar;
mod special;
pub mod tma;
mod warp;
pub mod warp_mma;
pub mod wgmma;

use std::fmt;
use zyntax_hir::{AddrSpace, FunctionKind, Module, ScalarType, Type, VerifyError};

pub type Result<T> = std::result::Result<T, InterpError>;

/// What kind of program fault a [`Trap`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TrapKind {
    OutOfBounds,
    Misaligned,
    NullPointer,
    InvalidPointer,
    /// A pointer used as (or cast to) an address space it does not point into.
    AddressSpace,
    /// A write to constant memory.
    ReadOnly,
    Unreachable,
    /// Integer `div`/`rem` by zero (the compiled code executes `trap;`).
    DivisionByZero,
    /// Recursion deeper than the interpreter's limit.
    StackOverflow,
    /// Two threads touched one shared-memory byte in one barrier interval, one of them writing.
    DataRace,
    /// A read of shared memory nothing wrote in this block.
    UninitializedRead,
    /// Threads of a block wait at different barriers (or a barrier some threads never reach).
    DivergentBarrier,
    /// A warp collective whose named lanes do not all arrive (deadlock).
    DivergentWarp,
    /// A malformed collective: mask without the executing lane, MMA in a partial
    /// warp, lanes disagreeing on a pointer that must be uniform.
    InvalidCollective,
    /// An `mbarrier` used before `init` or after `inval`, a bad count, or more arrivals than expected.
    InvalidMbarrier,
    /// A TMA or bulk copy the hardware would not do: misaligned box, bad byte count, reduction type.
    InvalidTma,
}

impl TrapKind {
    pub fn name(self) -> &'static str {
        match self {
            TrapKind::OutOfBounds => "out-of-bounds access",
            TrapKind::Misaligned => "misaligned access",
            TrapKind::NullPointer => "null pointer access",
            TrapKind::InvalidPointer => "invalid pointer",
            TrapKind::AddressSpace => "address space violation",
            TrapKind::ReadOnly => "write to read-only memory",
            TrapKind::Unreachable => "unreachable executed",
            TrapKind::DivisionByZero => "integer division by zero",
            TrapKind::StackOverflow => "stack overflow",
            TrapKind::DataRace => "shared memory data race",
            TrapKind::UninitializedRead => "uninitialized shared memory read",
            TrapKind::DivergentBarrier => "divergent barrier",
            TrapKind::DivergentWarp => "divergent warp collective",
            TrapKind::InvalidCollective => "invalid warp collective",
            TrapKind::InvalidMbarrier => "invalid mbarrier use",
            TrapKind::InvalidTma => "invalid TMA use",
        }
    }
}

/// A program fault, with where it happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trap {
    pub kind: TrapKind,
    /// The launched kernel (or called host function).
    pub kernel: String,
    /// The function the instruction belongs to (differs from `kernel` inside a callee).
    pub function: String,
    /// The instruction, as `.zir` prints it.
    pub inst: String,
    pub thread: [u32; 3],
    pub block: [u32; 3],
    pub message: String,
}

impl fmt::Display for Trap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let [tx, ty, tz] = self.thread;
        let [bx, by, bz] = self.block;
        write!(
            f,
            "{}: {} in @{}",
            self.kind.name(),
            self.message,
            self.function
        )?;
        if self.function != self.kernel {
            write!(f, " (called from kernel @{})", self.kernel)?;
        }
        write!(
            f,
            ", `{}`, thread ({tx}, {ty}, {tz}), block ({bx}, {by}, {bz})",
            self.inst
        )
    }
}

#[derive(Debug, thiserror::Error)]
pub enum InterpError {
    /// The program faulted.
    #[error("{0}")]
    Trap(Box<Trap>),
    /// The instruction budget ran out (likely an endless loop or a spin-wait on another block).
    #[error("fuel exhausted: the program executed more than {fuel} thread-instructions")]
    FuelExhausted { fuel: u64 },
    #[error("{0}")]
    Verify(#[from] VerifyError),
    /// Bad grid/block, missing kernel, wrong arguments.
    #[error("invalid launch: {0}")]
    Launch(String),
    /// Valid HIR the interpreter does not implement.
    #[error("unsupported by the interpreter: {0}")]
    Unsupported(String),
    /// A bug in the interpreter.
    #[error("internal interpreter error: {0}")]
    Internal(String),
}

impl InterpError {
    pub fn trap(&self) -> Option<&Trap> {
        match self {
            InterpError::Trap(t) => Some(t),
            _ => None,
        }
    }
    pub fn trap_kind(&self) -> Option<TrapKind> {
        self.trap().map(|t| t.kind)
    }
}

/// Interpreter settings.
#[derive(Clone, Debug)]
pub struct Options {
    /// Shared-memory race and uninitialized-read checks (bounds are always checked).
    pub checks: bool,
    /// Instruction budget per launch or call, counted per thread-instruction.
    pub fuel: u64,
    /// Run the HIR verifier before executing.
    pub verify: bool,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            checks: true,
            fuel: 1 << 32,
            verify: true,
        }
    }
}

/// An argument of a launch or call. Scalars convert to the parameter's type
/// (integers must be representable; floats round to nearest even).
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Arg {
    /// A pointer to the start of `buffers[i]`.
    Buffer(usize),
    /// A pointer `offset` bytes into `buffers[i]`.
    BufferAt(usize, u64),
    Null,
    Int(i128),
    Float(f64),
    Bool(bool),
    /// `Interpreter::tensor_maps[i]`, for a `tensormap` parameter (issue 13).
    TensorMap(usize),
}

/// A returned value: its type and its bits (vectors: packed little-endian in 64-bit words).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Value {
    pub ty: Type,
    pub bits: Vec<u64>,
}

impl Value {
    fn scalar(&self) -> Option<(ScalarType, u64)> {
        Some((self.ty.as_scalar()?, *self.bits.first()?))
    }
    /// The value as an f64 (floats and integers up to 2^53 exactly; bool 0/1).
    pub fn as_f64(&self) -> Option<f64> {
        self.scalar().map(|(s, b)| scalar::to_f64(s, b))
    }
    /// An integer or bool value, sign-extended by its type.
    pub fn as_i128(&self) -> Option<i128> {
        let (s, b) = self.scalar()?;
        if s.is_float() {
            return None;
        }
        Some(if s.is_signed() {
            i128::from(scalar::sext(b, s.bits()))
        } else {
            i128::from(b)
        })
    }
    /// For a pointer into a caller's buffer: (buffer index, byte offset).
    pub fn as_buffer_ptr(&self) -> Option<(usize, i64)> {
        if !self.ty.is_ptr() {
            return None;
        }
        let p = *self.bits.first()?;
        let id = memory::ptr_id(p) as usize;
        (id >= 1).then(|| (id - 1, memory::ptr_offset(p)))
    }
}

/// Launch options beyond the grid (h13-cluster).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LaunchOptions {
    /// Blocks per cluster; `None`: the kernel's declared `cluster(..)`, else no clusters.
    pub cluster: Option<[u32; 3]>,
}

/// Most blocks per cluster (the hardware's non-portable maximum).
pub const MAX_CLUSTER_BLOCKS: u32 = 16;

/// What a launch did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Thread-instructions executed.
    pub instructions: u64,
    /// Warp steps (one instruction for a group of lanes in lockstep).
    pub warp_steps: u64,
}

/// Runs functions of one module.
pub struct Interpreter<'m> {
    module: &'m Module,
    pub options: Options,
    /// The tensor maps `Arg::TensorMap` refers to (issue 13 item 2).
    pub tensor_maps: Vec<tma::InterpTensorMap>,
    /// Bytes of each module global, in `Module::globals` order: initialized
    /// once, kept across launches and calls like a loaded module's.
    globals: std::sync::Mutex<Vec<Vec<u8>>>,
}

/// Hardware limits checked at launch (those of sm_70 … sm_90).
const MAX_BLOCK: [u32; 3] = [1024, 1024, 64];
const MAX_THREADS: u32 = 1024;
const MAX_GRID: [u32; 3] = [i32::MAX as u32, 65535, 65535];
const MAX_SHARED: u64 = 227 * 1024;
/// Stack of the thread that runs programs with recursive calls (reserved, not committed).
const RECURSION_STACK: usize = 512 << 20;

impl<'m> Interpreter<'m> {
    /// An interpreter with default options; verifies the module.
    pub fn new(module: &'m Module) -> Result<Interpreter<'m>> {
        Self::with_options(module, Options::default())
    }

    pub fn with_options(module: &'m Module, options: Options) -> Result<Interpreter<'m>> {
        if options.verify {
            zyntax_hir::verify_module(module)?;
        }
        let globals = module.globals.iter().map(initial_bytes).collect();
        Ok(Interpreter {
            module,
            options,
            tensor_maps: Vec::new(),
            globals: std::sync::Mutex::new(globals),
        })
    }

    fn global_index(&self, name: &str) -> Result<usize> {
        self.module
            .globals
            .iter()
            .position(|g| g.name == name)
            .ok_or_else(|| {
                InterpError::Launch(format!("no global @{name} in module {}", self.module.name))
            })
    }

    /// The current bytes of module global `name`.
    pub fn global_bytes(&self, name: &str) -> Result<Vec<u8>> {
        let k = self.global_index(name)?;
        Ok(self.lock_globals()[k].clone())
    }

    /// Overwrite module global `name` (as the host does before a launch);
    /// `bytes` must be exactly its size.
    pub fn set_global_bytes(&self, name: &str, bytes: &[u8]) -> Result<()> {
        let k = self.global_index(name)?;
        let mut g = self.lock_globals();
        if g[k].len() != bytes.len() {
            return Err(InterpError::Launch(format!(
                "global @{name} has {} bytes, got {}",
                g[k].len(),
                bytes.len()
            )));
        }
        g[k].copy_from_slice(bytes);
        Ok(())
    }

    fn lock_globals(&self) -> std::sync::MutexGuard<'_, Vec<Vec<u8>>> {
        // A panic in a run cannot leave the bytes half-written in a way that matters more than the panic.
        self.globals.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn find(&self, name: &str) -> Result<usize> {
        self.module
            .functions
            .iter()
            .position(|f| f.name == name)
            .ok_or_else(|| {
                InterpError::Launch(format!(
                    "no function @{name} in module {}",
                    self.module.name
                ))
            })
    }

    /// Launch kernel `name` over `grid` blocks of `block` threads with
    /// `shared_bytes` of dynamic shared memory (0: the kernel's declared
    /// default). Pointer arguments refer to `buffers`, which the kernel reads
    /// and writes in place.
    pub fn launch(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u64,
        args: &[Arg],
        buffers: &mut [Vec<u8>],
    ) -> Result<Stats> {
        let opts = LaunchOptions::default();
        self.launch_with(name, grid, block, shared_bytes, args, buffers, &opts)
    }

    /// [`Interpreter::launch`] with options: a cluster shape (the grid must
    /// be a whole number of clusters; a kernel that declares `cluster(..)`
    /// runs with that shape only).
    #[allow(clippy::too_many_arguments)]
    pub fn launch_with(
        &self,
        name: &str,
        grid: [u32; 3],
        block: [u32; 3],
        shared_bytes: u64,
        args: &[Arg],
        buffers: &mut [Vec<u8>],
        opts: &LaunchOptions,
    ) -> Result<Stats> {
        let fi = self.find(name)?;
        let f = &self.module.functions[fi];
        let FunctionKind::Kernel(info) = &f.kind else {
            return Err(InterpError::Launch(format!(
                "@{name} is a {} function, not a kernel (use call)",
                f.kind.keyword()
            )));
        };
        for d in 0..3 {
            if grid[d] == 0 || block[d] == 0 {
                return Err(InterpError::Launch(format!(
                    "grid {grid:?} and block {block:?} must be at least 1 in every dimension"
                )));
            }
            if block[d] > MAX_BLOCK[d] || grid[d] > MAX_GRID[d] {
                return Err(InterpError::Launch(format!(
                    "grid {grid:?} / block {block:?} exceed the limits (block {MAX_BLOCK:?}, grid {MAX_GRID:?})"
                )));
            }
        }
        let threads = u64::from(block[0]) * u64::from(block[1]) * u64::from(block[2]);
        if threads > u64::from(MAX_THREADS) {
            return Err(InterpError::Launch(format!(
                "block {block:?} has {threads} threads; at most {MAX_THREADS}"
            )));
        }
        if let Some(et) = info.exact_threads {
            if block != et {
                return Err(InterpError::Launch(format!(
                    "block {block:?} differs from the kernel's exact_threads {et:?}"
                )));
            }
        }
        if let Some(mt) = info.max_threads {
            if block.iter().zip(mt.iter()).any(|(b, m)| b > m) {
                return Err(InterpError::Launch(format!(
                    "block {block:?} exceeds the kernel's max_threads {mt:?}"
                )));
            }
        }
        let cluster = launch_cluster(grid, info.cluster, opts.cluster)?;
        let shared_bytes = if shared_bytes == 0 {
            u64::from(info.shared_bytes)
        } else {
            shared_bytes
        };
        let prog = decode::decode(self.module, fi)?;
        let static_shared: u64 = prog.shared.iter().map(|s| s.0).sum();
        if static_shared + shared_bytes > MAX_SHARED {
            return Err(InterpError::Launch(format!(
                "{static_shared} bytes of static and {shared_bytes} of dynamic shared memory exceed {MAX_SHARED}"
            )));
        }
        self.run(&prog, [grid, block], cluster, shared_bytes, args, buffers)
            .map(|(s, _)| s)
    }

    /// Call host (or device) function `name` as a single thread and return its results.
    pub fn call(&self, name: &str, args: &[Arg], buffers: &mut [Vec<u8>]) -> Result<Vec<Value>> {
        let fi = self.find(name)?;
        let f = &self.module.functions[fi];
        if f.is_kernel() {
            return Err(InterpError::Launch(format!(
                "@{name} is a kernel (use launch)"
            )));
        }
        let prog = decode::decode(self.module, fi)?;
        let (_, ret) = self.run(&prog, [[1, 1, 1], [1, 1, 1]], None, 0, args, buffers)?;
        let ret = ret.unwrap_or_default();
        Ok(f.returns
            .iter()
            .zip(ret)
            .map(|(ty, bits)| Value {
                ty: ty.clone(),
                bits,
            })
            .collect())
    }

    #[allow(clippy::type_complexity)]
    fn run(
        &self,
        prog: &decode::Program,
        dims: [[u32; 3]; 2],
        cluster: Option<[u32; 3]>,
        shared_bytes: u64,
        args: &[Arg],
        buffers: &mut [Vec<u8>],
    ) -> Result<(Stats, Option<Vec<Vec<u64>>>)> {
        let fname = &self.module.functions[prog.entry].name;
        if args.len() != prog.params.len() {
            return Err(InterpError::Launch(format!(
                "@{fname} takes {} arguments, got {}",
                prog.params.len(),
                args.len()
            )));
        }
        // Buffer spaces and names from the parameters that point at them.
        let mut spaces = vec![AddrSpace::Global; buffers.len()];
        let mut names: Vec<Option<String>> = vec![None; buffers.len()];
        let mut bits = Vec::with_capacity(args.len());
        for (k, (arg, (_, ty))) in args.iter().zip(&prog.params).enumerate() {
            bits.push(arg_bits(
                fname,
                k,
                *arg,
                ty,
                buffers.len(),
                self.tensor_maps.len(),
            )?);
            if let (Arg::Buffer(i) | Arg::BufferAt(i, _), Some(space)) = (arg, ty.addr_space()) {
                if space == AddrSpace::Constant {
                    spaces[*i] = AddrSpace::Constant;
                }
                if names[*i].is_none() {
                    names[*i] = Some(format!("{} buffer of parameter {k}", spaces[*i]));
                }
            }
        }
        self.check_tensor_maps(buffers)?;
        let tensor_maps = self.tensor_maps.clone();
        let checks = self.options.checks;
        let fuel = self.options.fuel;
        let module = self.module;
        let mut globals = self.lock_globals();
        let globals: &mut Vec<Vec<u8>> = &mut globals;
        let work = move || -> Result<(Stats, Option<Vec<Vec<u64>>>)> {
            let nbuf = buffers.len();
            // Module globals follow the buffers (allocation 0 is null).
            let allocs = buffers
                .iter_mut()
                .enumerate()
                .map(|(i, b)| {
                    memory::Alloc::new(
                        std::mem::take(b),
                        spaces[i],
                        names[i].take().unwrap_or_else(|| format!("buffer #{i}")),
                    )
                })
                .chain(globals.iter_mut().zip(&module.globals).map(|(b, g)| {
                    memory::Alloc::new(std::mem::take(b), g.space, format!("global @{}", g.name))
                }))
                .collect();
            let launch = exec::Launch {
                grid: dims[0],
                block: dims[1],
                shared_bytes,
                tensor_maps: std::rc::Rc::new(tensor_maps),
                cluster: cluster.unwrap_or([1, 1, 1]),
                explicit_cluster: cluster.is_some(),
                global_base: nbuf as u32 + 1,
            };
            let mut ex = exec::Exec::new(module, prog, allocs, &launch, checks, fuel);
            let res = ex.run(&bits);
            // Hand the buffers and globals back whatever happened.
            for (i, b) in buffers.iter_mut().chain(globals.iter_mut()).enumerate() {
                if let Some(a) = ex.mem.allocs.get_mut(i + 1) {
                    *b = std::mem::take(&mut a.data);
                }
            }
            res?;
            let stats = Stats {
                instructions: fuel - ex.fuel_left(),
                warp_steps: ex.steps,
            };
            Ok((stats, ex.returned.take()))
        };
        if prog.rec_calls.is_empty() {
            return work();
        }
        // Recursive activations nest on the Rust stack: give them room.
        std::thread::scope(|s| {
            std::thread::Builder::new()
                .name("zyntax-interp".into())
                .stack_size(RECURSION_STACK)
                .spawn_scoped(s, work)
                .map_err(|e| {
                    InterpError::Internal(format!("cannot start the interpreter thread: {e}"))
                })?
                .join()
                .unwrap_or_else(|_| {
                    Err(InterpError::Internal(
                        "the interpreter thread panicked".into(),
                    ))
                })
        })
    }
}

/// A global's initial bytes: its initializer lane by lane, little-endian, or zeros.
fn initial_bytes(g: &zyntax_hir::GlobalVar) -> Vec<u8> {
    let size = g.size_bytes().unwrap_or(0) as usize;
    let Some(lane) = g.elem.elem_scalar() else {
        return vec![0; size];
    };
    let mut out = Vec::with_capacity(size);
    for c in &g.init {
        let bits = scalar::const_bits(lane, *c);
        out.extend_from_slice(&bits.to_le_bytes()[..lane.size_bytes() as usize]);
    }
    out.resize(size, 0);
    out
}

impl Interpreter<'_> {
    /// Each tensor map is valid and lies inside its buffer.
    fn check_tensor_maps(&self, buffers: &[Vec<u8>]) -> Result<()> {
        for (i, t) in self.tensor_maps.iter().enumerate() {
            let bad = |m: String| InterpError::Launch(format!("tensor map #{i}: {m}"));
            let Some(buf) = buffers.get(t.buffer) else {
                return Err(bad(format!("buffer #{} does not exist", t.buffer)));
            };
            t.desc.validate(t.offset).map_err(|e| bad(e.to_string()))?;
            // The last element's end: the tensor's extent in bytes.
            let d = &t.desc;
            let extent = (0..d.rank())
                .map(|k| (d.dims[k] - 1).saturating_mul(d.stride(k)))
                .fold(d.elem_bytes(), u64::saturating_add);
            if t.offset.saturating_add(extent) > buf.len() as u64 {
                return Err(bad(format!(
                    "the tensor spans {extent} bytes from offset {}, past the end of buffer #{} ({} bytes)",
                    t.offset,
                    t.buffer,
                    buf.len()
                )));
            }
        }
        Ok(())
    }
}

/// The cluster shape of a launch (`None`: no clusters) from the kernel's
/// declaration and the launch option, checked against the grid.
fn launch_cluster(
    grid: [u32; 3],
    declared: Option<[u32; 3]>,
    asked: Option<[u32; 3]>,
) -> Result<Option<[u32; 3]>> {
    let c = match (declared, asked) {
        (Some(d), Some(a)) if d != a => {
            return Err(InterpError::Launch(format!(
                "cluster {a:?} differs from the kernel's declared cluster {d:?}"
            )))
        }
        (d, a) => a.or(d),
    };
    let Some(c) = c else { return Ok(None) };
    let n = u64::from(c[0]) * u64::from(c[1]) * u64::from(c[2]);
    if n == 0 || n > u64::from(MAX_CLUSTER_BLOCKS) {
        return Err(InterpError::Launch(format!(
            "cluster {c:?} has {n} blocks; a cluster has 1..={MAX_CLUSTER_BLOCKS}"
        )));
    }
    if (0..3).any(|d| !grid[d].is_multiple_of(c[d])) {
        return Err(InterpError::Launch(format!(
            "grid {grid:?} is not a whole number of clusters {c:?} (each grid dimension must be a multiple of the cluster's)"
        )));
    }
    Ok(Some(c))
}

/// The slot bits of an argument for a parameter of type `ty`.
fn arg_bits(
    fname: &str,
    k: usize,
    arg: Arg,
    ty: &Type,
    nbuf: usize,
    nmaps: usize,
) -> Result<Vec<u64>> {
    let bad = |what: String| InterpError::Launch(format!("@{fname} argument {k} ({ty}): {what}"));
    match (ty, arg) {
        (Type::TensorMap, Arg::TensorMap(i)) => {
            if i >= nmaps {
                return Err(bad(format!(
                    "tensor map #{i} does not exist ({nmaps} given)"
                )));
            }
            Ok(vec![i as u64 + 1])
        }
        (Type::Ptr(..), Arg::Buffer(i) | Arg::BufferAt(i, _)) => {
            if i >= nbuf {
                return Err(bad(format!("buffer #{i} does not exist ({nbuf} given)")));
            }
            let off = if let Arg::BufferAt(_, o) = arg { o } else { 0 };
            if off >= 1 << (memory::OFFSET_BITS - 1) {
                return Err(bad("offset too large".into()));
            }
            Ok(vec![memory::make_ptr(i as u32 + 1, off as i64)])
        }
        (Type::Ptr(..), Arg::Null) => Ok(vec![0]),
        (Type::Scalar(s), Arg::Bool(b)) if s.is_bool() => Ok(vec![u64::from(b)]),
        (Type::Scalar(s), Arg::Int(v)) if s.is_int() || s.is_bool() => {
            let bitsz = s.bits();
            let (lo, hi): (i128, i128) = if s.is_bool() {
                (0, 1)
            } else if s.is_signed() {
                (-(1i128 << (bitsz - 1)), (1i128 << (bitsz - 1)) - 1)
            } else {
                (0, (1i128 << bitsz) - 1)
            };
            if v < lo || v > hi {
                return Err(bad(format!("{v} is out of range")));
            }
            Ok(vec![(v as u64) & scalar::mask(bitsz)])
        }
        (Type::Scalar(s), Arg::Int(v)) if s.is_float() => {
            Ok(vec![scalar::float_from_f64(*s, v as f64)])
        }
        (Type::Scalar(s), Arg::Float(x)) if s.is_float() => Ok(vec![scalar::float_from_f64(*s, x)]),
        (_, a) => Err(bad(format!("cannot pass {a:?}"))),
    }
}
