//! Kernel fusion over a sequence of launches on named buffers.
//!
//! The input is what a front-end knows about each launch (a [`Stage`]): its
//! iteration space, whether it maps every point or reduces the last dimension,
//! which buffers it reads and writes and at which index, and its resources
//! (from the ptxas resource report). [`plan`] groups consecutive producer →
//! consumer stages into fused kernels where that is provably safe and records
//! every decision with its reason; the front-end then emits one kernel per
//! group, keeping the values of elided buffers in registers.
//!
//! Two stages fuse only when all of these hold (each refusal is reported):
//! - the consumer reads a buffer the group writes (a real producer → consumer
//!   edge; independent launches are left alone);
//! - the group does not end in a reduction (its result needs every point, so
//!   no thread can consume it early);
//! - both cover the same iteration space;
//! - every access to a buffer the group writes, by either side, is at the
//!   thread's own point: any other index is a dependence between threads or
//!   blocks that one kernel cannot order. Buffers declared to alias are one
//!   buffer for this check;
//! - the fused kernel's registers and shared memory stay within the budget:
//!   the front-end's measurement of that fused kernel (ptxas) where it gave
//!   one ([`Sequence::measured`]), else the sum of the stages' (an upper bound:
//!   fusing removes the intermediates' loads and stores).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Where a stage accesses a buffer, relative to its own iteration point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Index {
    /// The element at the thread's own point (for a reduction: the point of
    /// the inner loop, or the row for its result).
    Point,
    /// Any other element (a neighbour, a transpose, a broadcast, a gather).
    Other,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// One output element per point.
    Map,
    /// Reduces the last dimension of the space: one output element per row.
    Reduce,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Access {
    pub buffer: String,
    pub index: Index,
}

/// One launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stage {
    pub name: String,
    pub kind: Kind,
    /// The iteration space, outermost first.
    pub space: Vec<u64>,
    pub reads: Vec<Access>,
    pub writes: Vec<Access>,
    /// Registers per thread and static shared memory per block (ptxas).
    #[serde(default)]
    pub registers: u32,
    #[serde(default)]
    pub shared_bytes: u32,
}

/// A buffer of the sequence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Buffer {
    pub name: String,
    /// Read after the sequence (an output): its stores are never elided.
    #[serde(default)]
    pub live_out: bool,
    /// The buffer whose memory this one shares (may overlap), if any.
    #[serde(default)]
    pub alias_of: Option<String>,
}

/// Limits a fused kernel must respect.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Budget {
    pub registers: u32,
    pub shared_bytes: u32,
}

impl Default for Budget {
    /// sm_70+: 255 registers per thread, 48 KiB static shared memory per block.
    fn default() -> Self {
        Budget {
            registers: 255,
            shared_bytes: 48 * 1024,
        }
    }
}

/// The resources of one candidate fused kernel, measured by the front-end.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    /// The stages the kernel runs, in order.
    pub stages: Vec<usize>,
    pub registers: u32,
    pub shared_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Sequence {
    pub buffers: Vec<Buffer>,
    pub stages: Vec<Stage>,
    #[serde(default)]
    pub budget: Budget,
    /// Fused kernels already compiled and measured; a group without an entry
    /// is charged the sum of its stages' resources.
    #[serde(default)]
    pub measured: Vec<Measured>,
}

impl Sequence {
    /// Registers per thread and shared bytes per block of the kernel running `stages`.
    pub fn resources(&self, stages: &[usize]) -> (u32, u32) {
        if let Some(m) = self.measured.iter().find(|m| m.stages == stages) {
            return (m.registers, m.shared_bytes);
        }
        let regs = stages.iter().map(|&k| self.stages[k].registers).sum();
        let shared = stages.iter().map(|&k| self.stages[k].shared_bytes).sum();
        (regs, shared)
    }
}

/// One fusion decision: whether `consumer` joined the group ending in `producer`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Decision {
    pub producer: String,
    pub consumer: String,
    pub fused: bool,
    /// Short machine-readable rule: `fused`, `no_dependence`, `space`,
    /// `reduction_producer`, `dependence`, `alias`, `registers`, `shared_memory`.
    pub rule: String,
    pub why: String,
}

/// One kernel of the result: the stages it runs, in order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    pub stages: Vec<usize>,
    /// Buffers written inside the group and read by no one after it: their
    /// values stay in registers and are never stored.
    pub elided: Vec<String>,
    pub registers: u32,
    pub shared_bytes: u32,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub groups: Vec<Group>,
    pub decisions: Vec<Decision>,
}

#[derive(Debug, thiserror::Error)]
pub enum FusionError {
    #[error("fusion: {0}")]
    Invalid(String),
}

/// The alias root of each buffer (a buffer aliasing another is that buffer).
fn roots(seq: &Sequence) -> Result<BTreeMap<&str, &str>, FusionError> {
    let by_name: BTreeMap<&str, &Buffer> =
        seq.buffers.iter().map(|b| (b.name.as_str(), b)).collect();
    let mut out = BTreeMap::new();
    for b in &seq.buffers {
        let mut cur = b;
        for _ in 0..=seq.buffers.len() {
            match &cur.alias_of {
                None => break,
                Some(a) => {
                    cur = by_name.get(a.as_str()).ok_or_else(|| {
                        FusionError::Invalid(format!(
                            "buffer {:?} aliases unknown buffer {a:?}",
                            b.name
                        ))
                    })?
                }
            }
        }
        out.insert(b.name.as_str(), cur.name.as_str());
    }
    for s in &seq.stages {
        for a in s.reads.iter().chain(&s.writes) {
            if !out.contains_key(a.buffer.as_str()) {
                return Err(FusionError::Invalid(format!(
                    "stage {:?} accesses unknown buffer {:?}",
                    s.name, a.buffer
                )));
            }
        }
    }
    Ok(out)
}

/// Why `consumer` cannot join a group with the accesses `g_*`, or `None`.
fn refusal(
    seq: &Sequence,
    root: &BTreeMap<&str, &str>,
    group: &[usize],
    k: usize,
) -> Option<(&'static str, String)> {
    let consumer = &seq.stages[k];
    let last = &seq.stages[*group.last().expect("groups are never empty")];
    let r = |a: &Access| root[a.buffer.as_str()];
    let g_writes: Vec<&Access> = group.iter().flat_map(|&k| &seq.stages[k].writes).collect();
    let g_reads: Vec<&Access> = group.iter().flat_map(|&k| &seq.stages[k].reads).collect();
    if !consumer
        .reads
        .iter()
        .any(|c| g_writes.iter().any(|w| r(w) == r(c)))
    {
        return Some((
            "no_dependence",
            format!("{} reads nothing {} writes", consumer.name, last.name),
        ));
    }
    if let Some(&k) = group.iter().find(|&&k| seq.stages[k].kind == Kind::Reduce) {
        return Some((
            "reduction_producer",
            format!(
                "{} is a reduction: its result needs every point, so no thread can consume it",
                seq.stages[k].name
            ),
        ));
    }
    if consumer.space != last.space {
        return Some((
            "space",
            format!(
                "iteration spaces differ: {:?} vs {:?}",
                last.space, consumer.space
            ),
        ));
    }
    let named = |a: &Access, b: &Access| {
        if a.buffer == b.buffer {
            format!("{:?}", a.buffer)
        } else {
            format!("{:?} (which aliases {:?})", a.buffer, b.buffer)
        }
    };
    // Read after write, write after read, write after write across the cut.
    for w in &g_writes {
        for c in consumer.reads.iter().chain(&consumer.writes) {
            if r(w) == r(c) && (w.index == Index::Other || c.index == Index::Other) {
                return Some((
                    if w.buffer == c.buffer {
                        "dependence"
                    } else {
                        "alias"
                    },
                    format!(
                        "{} accesses {} at another thread's point than {} writes it: \
                         a dependence between threads or blocks",
                        consumer.name,
                        named(c, w),
                        last.name
                    ),
                ));
            }
        }
    }
    for g in &g_reads {
        for c in &consumer.writes {
            if r(g) == r(c) && (g.index == Index::Other || c.index == Index::Other) {
                return Some((
                    if g.buffer == c.buffer {
                        "dependence"
                    } else {
                        "alias"
                    },
                    format!(
                        "{} writes {} that the group reads at other threads' points",
                        consumer.name,
                        named(c, g)
                    ),
                ));
            }
        }
    }
    let candidate: Vec<usize> = group.iter().copied().chain([k]).collect();
    let (regs, shared) = seq.resources(&candidate);
    if regs > seq.budget.registers {
        return Some((
            "registers",
            format!(
                "fused kernel needs {regs} registers per thread, budget {}",
                seq.budget.registers
            ),
        ));
    }
    if shared > seq.budget.shared_bytes {
        return Some((
            "shared_memory",
            format!(
                "fused kernel needs {shared} bytes of shared memory per block, budget {}",
                seq.budget.shared_bytes
            ),
        ));
    }
    None
}

/// Groups the stages into fused kernels (greedily, in order) and reports why
/// each adjacent pair was or was not fused.
pub fn plan(seq: &Sequence) -> Result<Plan, FusionError> {
    let root = roots(seq)?;
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut decisions = Vec::new();
    for (k, stage) in seq.stages.iter().enumerate() {
        let Some(group) = groups.last_mut() else {
            groups.push(vec![k]);
            continue;
        };
        let producer = seq.stages[*group.last().expect("non-empty")].name.clone();
        match refusal(seq, &root, group, k) {
            None => {
                group.push(k);
                decisions.push(Decision {
                    producer,
                    consumer: stage.name.clone(),
                    fused: true,
                    rule: "fused".into(),
                    why: "same iteration space, every shared buffer accessed at the thread's own point, within budget".into(),
                });
            }
            Some((rule, why)) => {
                groups.push(vec![k]);
                decisions.push(Decision {
                    producer,
                    consumer: stage.name.clone(),
                    fused: false,
                    rule: rule.into(),
                    why,
                });
            }
        }
    }
    let live_out: Vec<&str> = seq
        .buffers
        .iter()
        .filter(|b| b.live_out)
        .map(|b| root[b.name.as_str()])
        .collect();
    let out = groups
        .iter()
        .enumerate()
        .map(|(gi, g)| {
            let later_reads: Vec<&str> = groups[gi + 1..]
                .iter()
                .flatten()
                .flat_map(|&k| &seq.stages[k].reads)
                .map(|a| root[a.buffer.as_str()])
                .collect();
            let mut elided: Vec<String> = Vec::new();
            for &k in g {
                for w in &seq.stages[k].writes {
                    let rt = root[w.buffer.as_str()];
                    // Only a buffer nothing else shares memory with can live in registers.
                    let shared_memory = seq
                        .buffers
                        .iter()
                        .any(|b| root[b.name.as_str()] == rt && b.name != w.buffer);
                    if !live_out.contains(&rt)
                        && !later_reads.contains(&rt)
                        && !shared_memory
                        && !elided.contains(&w.buffer)
                    {
                        elided.push(w.buffer.clone());
                    }
                }
            }
            let (registers, shared_bytes) = seq.resources(g);
            Group {
                stages: g.clone(),
                elided,
                registers,
                shared_bytes,
            }
        })
        .collect();
    Ok(Plan {
        groups: out,
        decisions,
    })
}

/// [`plan`] over JSON (the form the Python front-end uses).
pub fn plan_json(json: &str) -> Result<String, FusionError> {
    let seq: Sequence = serde_json::from_str(json)
        .map_err(|e| FusionError::Invalid(format!("bad sequence: {e}")))?;
    let p = plan(&seq)?;
    serde_json::to_string(&p).map_err(|e| FusionError::Invalid(e.to_string()))
}
