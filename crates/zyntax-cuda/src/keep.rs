//! Keeping memory alive for as long as the GPU may still touch it.
//!
//! A kernel launch names buffers by address only. Once a launch is captured
//! into a graph, every replay touches those addresses again, so the owners of
//! the memory (pool buffers, foreign tensors, registered host arrays) must
//! outlive the graph and every executable made from it. Owners are type-erased
//! [`KeepAlive`] handles: holding one keeps its memory from being freed or
//! handed out again by the pool.

use crate::error::Result;
use crate::stream::{Event, Stream};
use std::any::Any;
use std::sync::Arc;

/// A shared handle whose lifetime keeps some device-visible memory allocated
/// (e.g. `Arc<DeviceBuffer>`, or a binding's owner object).
pub type KeepAlive = Arc<dyn Any + Send + Sync>;

/// Owners that are no longer referenced by future work but may still be in
/// use by work already queued: each batch is released once an event recorded
/// after that work has completed.
#[derive(Default)]
pub(crate) struct Retired {
    batches: Vec<(Event, Vec<KeepAlive>)>,
}

impl Retired {
    /// Retires `owners`, used by work queued so far on `streams`: one event
    /// per stream marks the point after which they are free.
    pub(crate) fn retire(&mut self, owners: Vec<KeepAlive>, streams: &[Stream]) -> Result<()> {
        if owners.is_empty() {
            return Ok(());
        }
        // Never launched, or every stream idle: nothing queued can use them.
        if streams.iter().all(|s| s.query().unwrap_or(false)) {
            return Ok(());
        }
        let Some((last, rest)) = streams.split_last() else {
            return Ok(());
        };
        for s in rest {
            let e = Event::new(s.device(), false)?;
            e.record(s)?;
            self.batches.push((e, Vec::new()));
        }
        let e = Event::new(last.device(), false)?;
        e.record(last)?;
        self.batches.push((e, owners));
        Ok(())
    }

    /// Drops the batches whose work has completed (never blocks). A batch
    /// whose event cannot be queried is kept: leaking is safe, freeing is not.
    pub(crate) fn drain(&mut self) {
        // The owners of a later batch may be used by work before an earlier
        // batch's event on another stream, so only a completed prefix goes.
        let done = self
            .batches
            .iter()
            .take_while(|(e, _)| e.query().unwrap_or(false))
            .count();
        self.batches.drain(..done);
    }

    /// Waits for every batch's work, then releases all of them.
    pub(crate) fn wait_all(&mut self) {
        for (e, _) in &self.batches {
            let _ = e.synchronize();
        }
        self.batches.clear();
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.batches.is_empty()
    }
}
