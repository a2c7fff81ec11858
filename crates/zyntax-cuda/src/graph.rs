//! CUDA graphs: capture work queued on a stream, instantiate, replay, and
//! update kernel arguments of an instantiated graph in place.
//!
//! A graph replays work on fixed addresses, so it owns the memory behind
//! them: a [`Graph`] keeps every owner registered during its capture
//! ([`Stream::keep_alive`]), a [`GraphExec`] keeps its graph plus, per kernel
//! node, the owners given to [`GraphExec::set_kernel_args`]. Owners a node no
//! longer uses are released once the replays queued before the update have
//! completed.

use crate::device::Device;
use crate::error::{check, CudaError, LaunchError, Result};
use crate::keep::{KeepAlive, Retired};
use crate::kernel::{stream_raw, Kernel, KernelArg, LaunchConfig};
use crate::stream::Stream;
use cudarc::driver::sys::{self, CUgraph, CUgraphExec, CUgraphNode, CUgraphNodeType};
use std::sync::{Arc, Mutex};

struct RawGraph(CUgraph);
// SAFETY: graph handles may be used from any thread when access is not
// concurrent; `Graph` is only mutated through the driver, which serialises.
unsafe impl Send for RawGraph {}
unsafe impl Sync for RawGraph {}

struct GraphInner {
    raw: RawGraph,
    device: Device,
    /// Owners of the memory the captured work touches. Declared after `raw`
    /// only for readability: `Drop` below destroys the graph first.
    owners: Vec<KeepAlive>,
}

impl Drop for GraphInner {
    fn drop(&mut self) {
        if self.device.bind().is_ok() {
            // SAFETY: we own the graph; executables made from it do not need it.
            unsafe {
                let _ = sys::cuGraphDestroy(self.raw.0);
            }
        }
    }
}

/// A captured (not yet executable) graph.
#[derive(Clone)]
pub struct Graph {
    inner: Arc<GraphInner>,
}

#[derive(Clone, Copy)]
struct RawNode(CUgraphNode);
// SAFETY: node handles are identifiers, only passed to the driver.
unsafe impl Send for RawNode {}
unsafe impl Sync for RawNode {}

impl Graph {
    /// # Safety
    /// `raw` must be a valid graph of `device`'s context that nobody else
    /// destroys; `owners` must keep alive all memory its nodes touch.
    pub(crate) unsafe fn from_raw(device: &Device, raw: CUgraph, owners: Vec<KeepAlive>) -> Graph {
        Graph {
            inner: Arc::new(GraphInner {
                raw: RawGraph(raw),
                device: device.clone(),
                owners,
            }),
        }
    }

    /// How many owners (buffers, tensors) the graph keeps alive.
    pub fn num_owners(&self) -> usize {
        self.inner.owners.len()
    }

    fn nodes(&self) -> Result<Vec<RawNode>> {
        self.inner.device.bind()?;
        let mut n = 0usize;
        // SAFETY: querying the count only.
        check(
            unsafe { sys::cuGraphGetNodes(self.inner.raw.0, std::ptr::null_mut(), &mut n) },
            "cuGraphGetNodes",
        )?;
        let mut v = vec![std::ptr::null_mut(); n];
        // SAFETY: `v` has room for `n` handles.
        check(
            unsafe { sys::cuGraphGetNodes(self.inner.raw.0, v.as_mut_ptr(), &mut n) },
            "cuGraphGetNodes",
        )?;
        v.truncate(n);
        Ok(v.into_iter().map(RawNode).collect())
    }

    /// Total nodes (kernels, copies, memsets, ...).
    pub fn num_nodes(&self) -> Result<usize> {
        Ok(self.nodes()?.len())
    }

    /// Kernel nodes in the order the driver lists them, which is the order
    /// they were captured in.
    fn kernel_nodes(&self) -> Result<Vec<RawNode>> {
        let mut out = Vec::new();
        for n in self.nodes()? {
            let mut t = CUgraphNodeType::CU_GRAPH_NODE_TYPE_EMPTY;
            // SAFETY: valid node; writes one enum.
            check(
                unsafe { sys::cuGraphNodeGetType(n.0, &mut t) },
                "cuGraphNodeGetType",
            )?;
            if t == CUgraphNodeType::CU_GRAPH_NODE_TYPE_KERNEL {
                out.push(n);
            }
        }
        Ok(out)
    }

    pub fn num_kernel_nodes(&self) -> Result<usize> {
        Ok(self.kernel_nodes()?.len())
    }

    /// Makes an executable graph.
    pub fn instantiate(&self) -> Result<GraphExec> {
        let kernel_nodes = self.kernel_nodes()?;
        self.inner.device.bind()?;
        let mut exec: CUgraphExec = std::ptr::null_mut();
        // SAFETY: valid graph; writes one handle we then own.
        check(
            unsafe { sys::cuGraphInstantiateWithFlags(&mut exec, self.inner.raw.0, 0) },
            "cuGraphInstantiate",
        )?;
        Ok(GraphExec {
            raw: RawExec(exec),
            graph: self.clone(),
            keep: Mutex::new(ExecKeep {
                nodes: vec![None; kernel_nodes.len()],
                ..ExecKeep::default()
            }),
            kernel_nodes,
        })
    }
}

struct RawExec(CUgraphExec);
// SAFETY: executable graph handles may be used from any thread.
unsafe impl Send for RawExec {}
unsafe impl Sync for RawExec {}

/// What an executable graph keeps alive beyond its graph's owners.
#[derive(Default)]
struct ExecKeep {
    /// Per kernel node: the owners given by the last `set_kernel_args`.
    nodes: Vec<Option<Vec<KeepAlive>>>,
    /// Streams replays were queued on since the last update (usually one).
    streams: Vec<Stream>,
    /// Replaced owners, released once earlier replays have completed.
    retired: Retired,
}

/// An instantiated graph: replay it with [`GraphExec::launch`].
pub struct GraphExec {
    raw: RawExec,
    /// Kept alive: the kernel node handles below belong to it, and it owns
    /// the memory of the captured work.
    graph: Graph,
    kernel_nodes: Vec<RawNode>,
    keep: Mutex<ExecKeep>,
}

impl Drop for GraphExec {
    fn drop(&mut self) {
        if self.graph.inner.device.bind().is_ok() {
            // Replays may still be running on memory this executable keeps
            // (its graph's owners may go with it): wait for them first.
            let keep = self.keep.get_mut().unwrap_or_else(|p| p.into_inner());
            for s in &keep.streams {
                let _ = s.synchronize();
            }
            keep.retired.wait_all();
            // SAFETY: we own the executable graph.
            unsafe {
                let _ = sys::cuGraphExecDestroy(self.raw.0);
            }
        }
    }
}

impl GraphExec {
    fn keep(&self) -> std::sync::MutexGuard<'_, ExecKeep> {
        self.keep.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Queues one replay of the whole graph on `stream` (legacy default when `None`).
    pub fn launch(&self, stream: Option<&Stream>) -> Result<()> {
        let dev = &self.graph.inner.device;
        let s = stream_raw(dev, stream)?;
        {
            let mut keep = self.keep();
            if !keep.retired.is_empty() {
                keep.retired.drain();
            }
            // Remember where replays run, so that owners replaced later are
            // released only after these replays (handle comparison is cheap).
            if !keep.streams.iter().any(|k| k.raw() == s) {
                let st = stream
                    .cloned()
                    .unwrap_or_else(|| Stream::legacy_default(dev));
                keep.streams.push(st);
            }
        }
        dev.bind()?;
        let _host = crate::profile::span("graph", || "graph replay".to_owned());
        let timer = crate::profile::DeviceTimer::start(dev, s);
        // SAFETY: valid executable graph and stream of the same device.
        let r = check(
            unsafe { sys::cuGraphLaunch(self.raw.0, s) },
            "cuGraphLaunch",
        );
        if let Some(t) = timer {
            let n = crate::profile::ArgValue::Int(self.kernel_nodes.len() as i64);
            t.finish(
                "graph",
                "graph replay".to_owned(),
                vec![("kernel_nodes", n)],
            );
        }
        r
    }

    /// The graph this executable was made from.
    pub fn graph(&self) -> &Graph {
        &self.graph
    }

    pub fn num_kernel_nodes(&self) -> usize {
        self.kernel_nodes.len()
    }

    /// Replaces the arguments (and optionally the launch configuration) of
    /// the `index`-th captured kernel launch for future replays. The node
    /// must run `kernel`; arguments are validated like a launch. `owners`
    /// keep the new arguments' memory alive as long as this executable; they
    /// replace the node's previous owners, which are released once the
    /// replays queued before this call have completed.
    ///
    /// # Safety
    /// As for [`Kernel::launch`]: future replays read and write the new
    /// buffers, and `owners` must keep every one of them alive.
    pub unsafe fn set_kernel_args(
        &self,
        index: usize,
        kernel: &Kernel,
        cfg: Option<&LaunchConfig>,
        args: &[KernelArg<'_>],
        owners: Vec<KeepAlive>,
    ) -> Result<()> {
        let node = *self.kernel_nodes.get(index).ok_or_else(|| {
            CudaError::Invalid(format!(
                "graph has {} kernel node(s); index {index} is out of range",
                self.kernel_nodes.len()
            ))
        })?;
        let dev = &self.graph.inner.device;
        if kernel.device() != dev {
            return Err(CudaError::Invalid(
                "kernel and graph are on different devices".to_owned(),
            ));
        }
        dev.bind()?;
        let mut p: sys::CUDA_KERNEL_NODE_PARAMS = std::mem::zeroed();
        check(
            sys::cuGraphKernelNodeGetParams_v2(node.0, &mut p),
            "cuGraphKernelNodeGetParams",
        )?;
        if p.func != kernel.raw() {
            return Err(LaunchError::new(
                kernel.name(),
                format!("kernel node {index} of the graph runs a different kernel"),
            )
            .into());
        }
        if let Some(c) = cfg {
            kernel.check_config(c)?;
            p.gridDimX = c.grid[0];
            p.gridDimY = c.grid[1];
            p.gridDimZ = c.grid[2];
            p.blockDimX = c.block[0];
            p.blockDimY = c.block[1];
            p.blockDimZ = c.block[2];
            p.sharedMemBytes = c.shared_bytes;
        }
        let mut pb = kernel.marshal(args)?;
        p.kernelParams = pb.as_mut_ptr();
        p.extra = std::ptr::null_mut();
        // The driver copies the parameter values during this call.
        check(
            sys::cuGraphExecKernelNodeSetParams_v2(self.raw.0, node.0, &p),
            "cuGraphExecKernelNodeSetParams",
        )?;
        let mut keep = self.keep();
        let old = keep.nodes[index].replace(owners);
        let streams = std::mem::take(&mut keep.streams);
        let r = keep.retired.retire(old.unwrap_or_default(), &streams);
        keep.retired.drain();
        if r.is_err() {
            // No event to wait on: wait for the replays themselves.
            for s in &streams {
                s.synchronize()?;
            }
        }
        Ok(())
    }
}
