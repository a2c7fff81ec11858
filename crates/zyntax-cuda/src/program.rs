//! Programs of kernels: a sequence of launches over named buffers, validated
//! against the tensors bound to it, with temporaries planned by liveness,
//! captured into a CUDA graph after a warm-up and replayed.
//!
//! The planning and checking half ([`ProgramSpec`]) needs no GPU. The
//! executor ([`Program::prepare`] → [`Executor`]) owns every buffer a replay
//! can touch: the temporaries it allocates and the owners of the bound
//! tensors, which it releases only after the work that used them has run.

use crate::device::Device;
use crate::error::{CudaError, Result};
use crate::graph::GraphExec;
use crate::keep::{KeepAlive, Retired};
use crate::kernel::{Kernel, KernelArg, LaunchConfig, ParamBuffer};
use crate::memory::DeviceBuffer;
use crate::stream::{CaptureMode, Stream};
use cudarc::driver::sys::CUdeviceptr;
use std::fmt;
use zyntax_hir::ScalarType;

/// What a buffer is to the program.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Bound by the caller, read by the program (rebinding is cheap).
    Input,
    /// Bound by the caller, like an input, but expected to stay the same.
    Parameter,
    /// Bound by the caller, written by the program.
    Output,
    /// Internal: allocated by the executor, memory shared by liveness.
    Temporary,
}

impl Role {
    pub fn name(self) -> &'static str {
        match self {
            Role::Input => "input",
            Role::Parameter => "parameter",
            Role::Output => "output",
            Role::Temporary => "temporary",
        }
    }
    pub fn parse(s: &str) -> Result<Role> {
        Ok(match s {
            "input" => Role::Input,
            "parameter" => Role::Parameter,
            "output" => Role::Output,
            "temporary" => Role::Temporary,
            _ => {
                return Err(CudaError::Invalid(format!(
                    "buffer role must be input, parameter, output or temporary, not '{s}'"
                )))
            }
        })
    }
}

/// How a launch uses a buffer argument.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    Read,
    Write,
    /// Read, then written (e.g. `y += x`).
    ReadWrite,
}

impl Access {
    fn reads(self) -> bool {
        matches!(self, Access::Read | Access::ReadWrite)
    }
    fn writes(self) -> bool {
        matches!(self, Access::Write | Access::ReadWrite)
    }
}

/// A named buffer of the program: element type and shape (C-contiguous).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BufferDecl {
    pub name: String,
    pub role: Role,
    pub elem: ScalarType,
    pub shape: Vec<usize>,
}

impl BufferDecl {
    pub fn bytes(&self) -> u64 {
        self.shape.iter().map(|&d| d as u64).product::<u64>() * self.elem.size_bytes()
    }
}

struct Shape<'a>(&'a [usize]);
impl fmt::Display for Shape<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => write!(f, "({one},)"),
            dims => {
                let parts: Vec<String> = dims.iter().map(ToString::to_string).collect();
                write!(f, "({})", parts.join(", "))
            }
        }
    }
}

/// The buffers a program declares and, per launch, which it touches and how.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProgramSpec {
    pub buffers: Vec<BufferDecl>,
    /// Per launch: its name (for messages) and `(buffer index, access)`.
    pub steps: Vec<(String, Vec<(usize, Access)>)>,
}

/// Where the temporaries live: `slot_bytes[i]` is allocation `i`, and
/// `assignment[b]` the allocation of buffer `b` (temporaries that some
/// launch touches; `None` for the rest).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MemoryPlan {
    pub slot_bytes: Vec<u64>,
    pub assignment: Vec<Option<usize>>,
    /// Sum of the allocations.
    pub planned_bytes: u64,
    /// What one allocation per temporary would take.
    pub naive_bytes: u64,
}

impl ProgramSpec {
    /// Index of the buffer called `name`.
    pub fn buffer_index(&self, name: &str) -> Option<usize> {
        self.buffers.iter().position(|b| b.name == name)
    }

    /// Declares a buffer; names are unique and sizes non-zero.
    pub fn add_buffer(&mut self, decl: BufferDecl) -> Result<usize> {
        if self.buffer_index(&decl.name).is_some() {
            return Err(CudaError::Invalid(format!(
                "the program already has a buffer named '{}'",
                decl.name
            )));
        }
        if decl.shape.is_empty() || decl.shape.contains(&0) {
            return Err(CudaError::Invalid(format!(
                "buffer '{}': shape {} must have at least one dimension and no zero extent",
                decl.name,
                Shape(&decl.shape)
            )));
        }
        self.buffers.push(decl);
        Ok(self.buffers.len() - 1)
    }

    /// Adds a launch touching `uses`; every index must name a buffer.
    pub fn add_step(&mut self, name: &str, uses: Vec<(usize, Access)>) -> Result<()> {
        if let Some((b, _)) = uses.iter().find(|(b, _)| *b >= self.buffers.len()) {
            return Err(CudaError::Invalid(format!(
                "launch of `{name}` names buffer #{b}; the program has {}",
                self.buffers.len()
            )));
        }
        self.steps.push((name.to_owned(), uses));
        Ok(())
    }

    /// Rejects a launch that reads a temporary before any launch wrote it
    /// (its contents would be whatever the memory held before).
    pub fn check_reads(&self) -> Result<()> {
        let mut written = vec![false; self.buffers.len()];
        for (i, (name, uses)) in self.steps.iter().enumerate() {
            for &(b, a) in uses {
                let d = &self.buffers[b];
                if d.role == Role::Temporary && a.reads() && !written[b] {
                    return Err(CudaError::Invalid(format!(
                        "launch #{i} (`{name}`) reads temporary '{}' before any launch writes it",
                        d.name
                    )));
                }
            }
            for &(b, a) in uses {
                written[b] |= a.writes();
            }
        }
        Ok(())
    }

    /// Assigns temporaries to allocations: two temporaries share one when
    /// their lifetimes (first to last launch touching them) do not overlap.
    /// Greedy by start, best fit by size: as few allocations as the largest
    /// number of simultaneously live temporaries, each as large as the
    /// largest temporary it holds.
    pub fn plan(&self) -> MemoryPlan {
        let n = self.buffers.len();
        let mut life: Vec<Option<(usize, usize)>> = vec![None; n];
        for (i, (_, uses)) in self.steps.iter().enumerate() {
            for &(b, _) in uses {
                if self.buffers[b].role == Role::Temporary {
                    let l = life[b].get_or_insert((i, i));
                    l.1 = i;
                }
            }
        }
        let mut order: Vec<usize> = (0..n).filter(|&b| life[b].is_some()).collect();
        order.sort_by_key(|&b| {
            (
                life[b].map_or(0, |l| l.0),
                std::cmp::Reverse(self.buffers[b].bytes()),
            )
        });
        let mut plan = MemoryPlan {
            assignment: vec![None; n],
            ..MemoryPlan::default()
        };
        let mut busy_until: Vec<usize> = Vec::new();
        for b in order {
            let (start, end) = life[b].unwrap_or((0, 0));
            let need = self.buffers[b].bytes();
            plan.naive_bytes += need;
            let free = (0..plan.slot_bytes.len()).filter(|&s| busy_until[s] < start);
            // Smallest slot that fits; else the largest free one, grown.
            let fit = free
                .clone()
                .filter(|&s| plan.slot_bytes[s] >= need)
                .min_by_key(|&s| plan.slot_bytes[s])
                .or_else(|| free.max_by_key(|&s| plan.slot_bytes[s]));
            let s = match fit {
                Some(s) => s,
                None => {
                    plan.slot_bytes.push(0);
                    busy_until.push(0);
                    plan.slot_bytes.len() - 1
                }
            };
            plan.slot_bytes[s] = plan.slot_bytes[s].max(need);
            busy_until[s] = end;
            plan.assignment[b] = Some(s);
        }
        plan.planned_bytes = plan.slot_bytes.iter().sum();
        plan
    }
}

/// A tensor bound to a program buffer, as the executor needs to know it.
pub struct Binding {
    pub ptr: CUdeviceptr,
    pub shape: Vec<usize>,
    /// Element type, when the tensor says (foreign tensors of unknown type: `None`).
    pub elem: Option<ScalarType>,
    pub device: u32,
    /// Byte strides, `None` for C-contiguous.
    pub strides: Option<Vec<isize>>,
    /// Keeps the memory alive while the executor may use it.
    pub owner: KeepAlive,
}

impl Binding {
    /// A whole pool buffer viewed as `shape` elements of `elem`.
    pub fn from_buffer(
        buf: std::sync::Arc<DeviceBuffer>,
        elem: ScalarType,
        shape: Vec<usize>,
    ) -> Binding {
        Binding {
            ptr: buf.ptr(),
            shape,
            elem: Some(elem),
            device: buf.device().ordinal(),
            strides: None,
            owner: buf,
        }
    }

    fn is_c_contiguous(&self, itemsize: usize) -> bool {
        let Some(strides) = &self.strides else {
            return true;
        };
        let mut want = itemsize as isize;
        for (d, s) in self.shape.iter().zip(strides).rev() {
            if *d > 1 && *s != want {
                return false;
            }
            want *= *d as isize;
        }
        true
    }
}

/// Checks a binding against its declaration: shape, element type, device
/// and layout, each mismatch named.
pub fn check_binding(decl: &BufferDecl, device: u32, b: &Binding) -> Result<()> {
    let bad = |message: String| CudaError::Binding {
        name: decl.name.clone(),
        message,
    };
    if b.shape != decl.shape {
        return Err(bad(format!(
            "shape {} does not match the program's {}",
            Shape(&b.shape),
            Shape(&decl.shape)
        )));
    }
    match b.elem {
        Some(e) if e != decl.elem => {
            return Err(bad(format!(
                "dtype {e} does not match the program's {}",
                decl.elem
            )))
        }
        None => {
            return Err(bad(format!(
                "the tensor's element type is unknown; the program needs {}",
                decl.elem
            )))
        }
        _ => {}
    }
    if b.device != device {
        return Err(bad(format!(
            "the tensor is on device {}, the program runs on device {device}",
            b.device
        )));
    }
    if !b.is_c_contiguous(decl.elem.size_bytes() as usize) {
        return Err(bad(format!(
            "layout: strides {:?} are not C-contiguous, which the program was built for",
            b.strides.as_deref().unwrap_or(&[])
        )));
    }
    Ok(())
}

/// One argument of a recorded launch.
#[derive(Debug, Clone, Copy)]
pub enum StepArg {
    /// The program buffer with this index, used as `Access`.
    Buffer(usize, Access),
    Int(i128),
    Float(f64),
    Bool(bool),
}

struct Step {
    kernel: Kernel,
    cfg: LaunchConfig,
    args: Vec<StepArg>,
}

/// A recorded program: buffers and launches on one device.
pub struct Program {
    device: Device,
    spec: ProgramSpec,
    steps: Vec<Step>,
}

/// How [`Program::prepare`] runs the program.
#[derive(Debug, Clone, Default)]
pub struct ExecOptions {
    /// Eager runs before the program is captured into a graph (0: capture on
    /// the first run). `None`: never capture.
    pub warmup: Option<u32>,
    /// The stream runs go to; a new blocking stream when `None`.
    pub stream: Option<Stream>,
}

impl Program {
    pub fn new(device: &Device) -> Program {
        Program {
            device: device.clone(),
            spec: ProgramSpec::default(),
            steps: Vec::new(),
        }
    }

    pub fn device(&self) -> &Device {
        &self.device
    }

    pub fn spec(&self) -> &ProgramSpec {
        &self.spec
    }

    pub fn buffer(
        &mut self,
        name: &str,
        role: Role,
        elem: ScalarType,
        shape: &[usize],
    ) -> Result<usize> {
        self.spec.add_buffer(BufferDecl {
            name: name.to_owned(),
            role,
            elem,
            shape: shape.to_vec(),
        })
    }

    /// Records a launch. The kernel must be loaded on the program's device.
    pub fn launch(&mut self, kernel: &Kernel, cfg: LaunchConfig, args: Vec<StepArg>) -> Result<()> {
        if kernel.device() != &self.device {
            return Err(CudaError::Invalid(format!(
                "kernel `{}` is loaded on device {}, the program runs on device {}",
                kernel.name(),
                kernel.device().ordinal(),
                self.device.ordinal()
            )));
        }
        kernel.check_arg_count(args.len())?;
        kernel.check_config(&cfg)?;
        let uses = args
            .iter()
            .filter_map(|a| match a {
                StepArg::Buffer(b, acc) => Some((*b, *acc)),
                _ => None,
            })
            .collect();
        self.spec.add_step(kernel.name(), uses)?;
        self.steps.push(Step {
            kernel: kernel.clone(),
            cfg,
            args,
        });
        Ok(())
    }

    /// Validates the program and `bindings` (one per input, parameter and
    /// output), allocates the planned temporaries and encodes every launch.
    pub fn prepare(&self, bindings: Vec<(String, Binding)>, opts: ExecOptions) -> Result<Executor> {
        self.spec.check_reads()?;
        let plan = self.spec.plan();
        let mut bound: Vec<Option<Binding>> = (0..self.spec.buffers.len()).map(|_| None).collect();
        for (name, b) in bindings {
            let i = self.bindable(&name)?;
            check_binding(&self.spec.buffers[i], self.device.ordinal(), &b)?;
            bound[i] = Some(b);
        }
        if let Some(d) = self
            .spec
            .buffers
            .iter()
            .zip(&bound)
            .find(|(d, b)| d.role != Role::Temporary && b.is_none())
        {
            return Err(CudaError::Binding {
                name: d.0.name.clone(),
                message: format!("no tensor bound to this {}", d.0.role.name()),
            });
        }
        let stream = match opts.stream {
            Some(s) if s.device() != &self.device => {
                return Err(CudaError::Invalid(format!(
                    "stream is on device {}, the program runs on device {}",
                    s.device().ordinal(),
                    self.device.ordinal()
                )))
            }
            Some(s) => s,
            None => Stream::new(&self.device, false)?,
        };
        let slots = plan
            .slot_bytes
            .iter()
            .map(|&n| DeviceBuffer::alloc(&self.device, n, Some(&stream)))
            .collect::<Result<Vec<_>>>()?;
        let mut ex = Executor {
            graph: None,
            params: Vec::new(),
            ptrs: vec![0; self.spec.buffers.len()],
            program: self.clone_steps(),
            spec: self.spec.clone(),
            device: self.device.clone(),
            plan,
            warmup: opts.warmup,
            runs: 0,
            replays: 0,
            updates: 0,
            retired: Retired::default(),
            bound,
            slots,
            stream,
        };
        for (i, p) in ex.ptrs.iter_mut().enumerate() {
            *p = match (&ex.bound[i], ex.plan.assignment[i]) {
                (Some(b), _) => b.ptr,
                (None, Some(s)) => ex.slots[s].ptr(),
                (None, None) => 0,
            };
        }
        ex.params = (0..ex.program.len())
            .map(|i| ex.encode(i))
            .collect::<Result<Vec<_>>>()?;
        Ok(ex)
    }

    fn bindable(&self, name: &str) -> Result<usize> {
        let Some(i) = self.spec.buffer_index(name) else {
            let names: Vec<&str> = self
                .spec
                .buffers
                .iter()
                .filter(|b| b.role != Role::Temporary)
                .map(|b| b.name.as_str())
                .collect();
            return Err(CudaError::Binding {
                name: name.to_owned(),
                message: format!(
                    "the program has no such buffer (bindable: {})",
                    names.join(", ")
                ),
            });
        };
        if self.spec.buffers[i].role == Role::Temporary {
            return Err(CudaError::Binding {
                name: name.to_owned(),
                message: "is a temporary: the executor allocates it".to_owned(),
            });
        }
        Ok(i)
    }

    fn clone_steps(&self) -> Vec<Step> {
        self.steps
            .iter()
            .map(|s| Step {
                kernel: s.kernel.clone(),
                cfg: s.cfg,
                args: s.args.clone(),
            })
            .collect()
    }
}

/// A prepared program: runs eagerly for the warm-up, then replays a graph.
/// Holds every buffer a run can touch (declared after `graph` so that the
/// executable graph goes first).
pub struct Executor {
    graph: Option<GraphExec>,
    params: Vec<ParamBuffer>,
    ptrs: Vec<CUdeviceptr>,
    program: Vec<Step>,
    spec: ProgramSpec,
    device: Device,
    plan: MemoryPlan,
    warmup: Option<u32>,
    runs: u64,
    replays: u64,
    updates: u64,
    retired: Retired,
    bound: Vec<Option<Binding>>,
    slots: Vec<DeviceBuffer>,
    stream: Stream,
}

impl Drop for Executor {
    fn drop(&mut self) {
        // Queued runs use the bound tensors and temporaries released below.
        let _ = self.stream.synchronize();
        self.graph = None;
    }
}

impl Executor {
    fn encode(&self, step: usize) -> Result<ParamBuffer> {
        let s = &self.program[step];
        let dev = self.device.ordinal();
        let args: Vec<KernelArg<'_>> = s
            .args
            .iter()
            .map(|a| match *a {
                StepArg::Buffer(b, _) => KernelArg::Ptr {
                    ptr: self.ptrs[b],
                    device: Some(dev),
                    elem: Some(self.spec.buffers[b].elem),
                },
                StepArg::Int(v) => KernelArg::Int(v),
                StepArg::Float(v) => KernelArg::Float(v),
                StepArg::Bool(v) => KernelArg::Bool(v),
            })
            .collect();
        Ok(s.kernel.marshal(&args)?)
    }

    /// Queues one run of the program on its stream: eager launches during
    /// the warm-up, then a graph captured once and replayed.
    pub fn run(&mut self) -> Result<()> {
        if !self.retired.is_empty() {
            self.retired.drain();
        }
        let capture_now =
            self.graph.is_none() && self.warmup.is_some_and(|w| self.runs >= u64::from(w));
        if capture_now {
            self.stream.begin_capture(CaptureMode::ThreadLocal)?;
            let r = self.launch_all();
            let g = self.stream.end_capture();
            r?;
            self.graph = Some(g?.instantiate()?);
        }
        match &self.graph {
            Some(g) => {
                g.launch(Some(&self.stream))?;
                self.replays += 1;
            }
            None => self.launch_all()?,
        }
        self.runs += 1;
        Ok(())
    }

    fn launch_all(&mut self) -> Result<()> {
        let raw = self.stream.raw();
        for (s, p) in self.program.iter().zip(self.params.iter_mut()) {
            // SAFETY: arguments were validated when encoded; every buffer is
            // owned by this executor (bindings' owners, planned temporaries)
            // and sized as declared, which the caller's kernels rely on.
            unsafe { s.kernel.launch_raw(&s.cfg, raw, p.as_mut_ptr())? };
        }
        Ok(())
    }

    /// Binds a new tensor to an input, parameter or output. The launches
    /// that use it are re-encoded; a captured graph has those kernel nodes
    /// updated in place instead of being captured again.
    pub fn bind(&mut self, name: &str, b: Binding) -> Result<()> {
        let i = self
            .spec
            .buffer_index(name)
            .filter(|&i| self.spec.buffers[i].role != Role::Temporary);
        let Some(i) = i else {
            return Err(CudaError::Binding {
                name: name.to_owned(),
                message: "not an input, parameter or output of the program".to_owned(),
            });
        };
        check_binding(&self.spec.buffers[i], self.device.ordinal(), &b)?;
        let old_ptr = self.ptrs[i];
        self.ptrs[i] = b.ptr;
        let users: Vec<usize> = (0..self.program.len())
            .filter(|&s| self.spec.steps[s].1.iter().any(|(x, _)| *x == i))
            .collect();
        for &s in &users {
            match self.encode(s) {
                Ok(p) => self.params[s] = p,
                Err(e) => {
                    self.ptrs[i] = old_ptr;
                    return Err(e);
                }
            }
        }
        if let Some(g) = &self.graph {
            for &s in &users {
                let st = &self.program[s];
                let args: Vec<KernelArg<'_>> = st
                    .args
                    .iter()
                    .map(|a| match *a {
                        StepArg::Buffer(b, _) => KernelArg::Ptr {
                            ptr: self.ptrs[b],
                            device: Some(self.device.ordinal()),
                            elem: Some(self.spec.buffers[b].elem),
                        },
                        StepArg::Int(v) => KernelArg::Int(v),
                        StepArg::Float(v) => KernelArg::Float(v),
                        StepArg::Bool(v) => KernelArg::Bool(v),
                    })
                    .collect();
                // SAFETY: node `s` is launch `s` (the graph holds only this
                // program's launches, captured in order); the executor owns
                // every buffer, so the graph needs no owners of its own.
                unsafe { g.set_kernel_args(s, &st.kernel, None, &args, Vec::new())? };
            }
            self.updates += 1;
        }
        if let Some(old) = self.bound[i].replace(b) {
            self.retired
                .retire(vec![old.owner], std::slice::from_ref(&self.stream))?;
        }
        Ok(())
    }

    pub fn stream(&self) -> &Stream {
        &self.stream
    }
    pub fn plan(&self) -> &MemoryPlan {
        &self.plan
    }
    pub fn spec(&self) -> &ProgramSpec {
        &self.spec
    }
    /// Whether runs now replay a captured graph.
    pub fn is_captured(&self) -> bool {
        self.graph.is_some()
    }
    /// Runs queued so far, of which graph replays, and graph updates by `bind`.
    pub fn counters(&self) -> (u64, u64, u64) {
        (self.runs, self.replays, self.updates)
    }
    /// Device address of a buffer (bound tensor or planned temporary).
    pub fn buffer_ptr(&self, name: &str) -> Option<CUdeviceptr> {
        self.spec.buffer_index(name).map(|i| self.ptrs[i])
    }
    pub fn synchronize(&self) -> Result<()> {
        self.stream.synchronize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    fn decl(name: &str, role: Role, n: usize) -> BufferDecl {
        BufferDecl {
            name: name.to_owned(),
            role,
            elem: ScalarType::F32,
            shape: vec![n],
        }
    }

    /// x -> t0 -> t1 -> ... -> t{n-1} -> y, each launch reading the previous.
    fn chain(n: usize, len: usize) -> ProgramSpec {
        let mut p = ProgramSpec::default();
        let x = p.add_buffer(decl("x", Role::Input, len)).unwrap();
        let ts: Vec<usize> = (0..n)
            .map(|i| {
                p.add_buffer(decl(&format!("t{i}"), Role::Temporary, len))
                    .unwrap()
            })
            .collect();
        let y = p.add_buffer(decl("y", Role::Output, len)).unwrap();
        let mut prev = x;
        for &t in &ts {
            p.add_step("k", vec![(prev, Access::Read), (t, Access::Write)])
                .unwrap();
            prev = t;
        }
        p.add_step("k", vec![(prev, Access::Read), (y, Access::Write)])
            .unwrap();
        p
    }

    #[test]
    fn a_chain_needs_two_allocations_whatever_its_length() {
        for n in [2, 3, 10, 80] {
            let plan = chain(n, 1000).plan();
            assert_eq!(plan.slot_bytes.len(), 2, "{n} temporaries");
            assert_eq!(plan.planned_bytes, 8000);
            assert_eq!(plan.naive_bytes, 4000 * n as u64);
        }
    }

    #[test]
    fn overlapping_lifetimes_never_share_and_sizes_fit() {
        // Random-ish programs: check the plan's invariants directly.
        let mut seed = 12345u64;
        let mut next = |m: usize| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as usize % m
        };
        for _ in 0..200 {
            let mut p = ProgramSpec::default();
            let nb = 2 + next(12);
            for i in 0..nb {
                let role = if i == 0 { Role::Input } else { Role::Temporary };
                p.add_buffer(decl(&format!("b{i}"), role, 1 + next(5000)))
                    .unwrap();
            }
            for s in 0..1 + next(15) {
                let uses = (0..1 + next(3))
                    .map(|_| (next(nb), Access::Write))
                    .collect();
                p.add_step(&format!("s{s}"), uses).unwrap();
            }
            let plan = p.plan();
            let life = |b: usize| {
                let steps: Vec<usize> = p
                    .steps
                    .iter()
                    .enumerate()
                    .filter(|(_, (_, u))| u.iter().any(|(x, _)| *x == b))
                    .map(|(i, _)| i)
                    .collect();
                (steps.first().copied(), steps.last().copied())
            };
            for a in 0..nb {
                let Some(sa) = plan.assignment[a] else {
                    assert!(p.buffers[a].role != Role::Temporary || life(a).0.is_none());
                    continue;
                };
                assert!(plan.slot_bytes[sa] >= p.buffers[a].bytes());
                for b in a + 1..nb {
                    if plan.assignment[b] == Some(sa) {
                        let (la, lb) = (life(a), life(b));
                        let disjoint = la.1 < lb.0 || lb.1 < la.0;
                        assert!(disjoint, "{a} and {b} overlap but share slot {sa}");
                    }
                }
            }
            assert!(plan.planned_bytes <= plan.naive_bytes);
        }
    }

    #[test]
    fn reading_a_temporary_before_it_is_written_is_reported() {
        let mut p = ProgramSpec::default();
        let x = p.add_buffer(decl("x", Role::Input, 4)).unwrap();
        let t = p.add_buffer(decl("tmp", Role::Temporary, 4)).unwrap();
        p.add_step("first", vec![(x, Access::Read), (t, Access::ReadWrite)])
            .unwrap();
        let e = p.check_reads().unwrap_err().to_string();
        assert!(
            e.contains("launch #0 (`first`) reads temporary 'tmp'"),
            "{e}"
        );
        let mut q = ProgramSpec::default();
        let x = q.add_buffer(decl("x", Role::Input, 4)).unwrap();
        let t = q.add_buffer(decl("tmp", Role::Temporary, 4)).unwrap();
        q.add_step("w", vec![(x, Access::Read), (t, Access::Write)])
            .unwrap();
        q.add_step("r", vec![(t, Access::ReadWrite)]).unwrap();
        q.check_reads().unwrap();
        assert!(q.add_buffer(decl("x", Role::Output, 4)).is_err());
        assert!(q.add_buffer(decl("z", Role::Output, 0)).is_err());
        assert!(q.add_step("bad", vec![(9, Access::Read)]).is_err());
    }

    fn binding(
        shape: &[usize],
        elem: Option<ScalarType>,
        device: u32,
        strides: Option<Vec<isize>>,
    ) -> Binding {
        Binding {
            ptr: 0x1000,
            shape: shape.to_vec(),
            elem,
            device,
            strides,
            owner: Arc::new(()),
        }
    }

    #[test]
    fn bindings_are_checked_for_shape_dtype_device_and_layout() {
        let d = BufferDecl {
            name: "w".to_owned(),
            role: Role::Parameter,
            elem: ScalarType::F32,
            shape: vec![4, 8],
        };
        let ok = binding(&[4, 8], Some(ScalarType::F32), 0, Some(vec![32, 4]));
        check_binding(&d, 0, &ok).unwrap();
        let msg = |b: Binding| check_binding(&d, 0, &b).unwrap_err().to_string();
        let e = msg(binding(&[8, 4], Some(ScalarType::F32), 0, None));
        assert!(
            e.contains("binding 'w'")
                && e.contains("shape (8, 4) does not match the program's (4, 8)"),
            "{e}"
        );
        let e = msg(binding(&[4, 8], Some(ScalarType::F64), 0, None));
        assert!(
            e.contains("dtype f64 does not match the program's f32"),
            "{e}"
        );
        let e = msg(binding(&[4, 8], Some(ScalarType::F32), 1, None));
        assert!(
            e.contains("on device 1, the program runs on device 0"),
            "{e}"
        );
        let e = msg(binding(
            &[4, 8],
            Some(ScalarType::F32),
            0,
            Some(vec![4, 16]),
        ));
        assert!(e.contains("not C-contiguous"), "{e}");
        let e = msg(binding(&[4, 8], None, 0, None));
        assert!(e.contains("element type is unknown"), "{e}");
    }
}
