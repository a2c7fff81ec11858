//! `mbarrier` (issue 13): phase and transaction counting on the barrier's
//! 64-bit word in shared memory.
//!
//! The hardware's encoding of that word is opaque; the interpreter uses its
//! own (reading the word directly is unspecified, see `docs/semantics.md`):
//!
//! | bits | field |
//! |---|---|
//! | 0–19 | pending arrivals of the current phase |
//! | 20–39 | expected arrivals per phase (the init count) |
//! | 40–60 | transaction count, 21-bit two's complement (bytes still expected) |
//! | 62 | initialized (cleared by `inval`) |
//! | 63 | phase parity |
//!
//! A phase completes when its pending arrivals and its transaction count are
//! both zero: the parity flips and the pending count is reset to the expected
//! one. A state token (from `arrive`) is the word before the arrival, so its
//! bit 63 names the phase it arrived on.

use crate::decode::{DOp, InstCx, NO_SLOT};
use crate::exec::{lanes, r, w, Ctx, Exec, Flow};
use crate::memory::{Access, Memory};
use crate::{InterpError, TrapKind};
use zyntax_hir::{MbarrierOp, Op};

const COUNT_MASK: u64 = (1 << 20) - 1;
const TX_SHIFT: u32 = 40;
const TX_BITS: u32 = 21;
const VALID: u64 = 1 << 62;
const PHASE: u64 = 1 << 63;
/// Largest arrival count and transaction count (PTX: 2^20 - 1).
pub const MAX_COUNT: u64 = COUNT_MASK;

#[derive(Copy, Clone, Debug, PartialEq, Eq)]
struct State {
    pending: u64,
    expected: u64,
    tx: i64,
    phase: bool,
}

fn decode(word: u64) -> State {
    let raw = (word >> TX_SHIFT) & ((1 << TX_BITS) - 1);
    // Sign-extend the 21-bit field.
    let tx = ((raw << (64 - TX_BITS)) as i64) >> (64 - TX_BITS);
    State {
        pending: word & COUNT_MASK,
        expected: (word >> 20) & COUNT_MASK,
        tx,
        phase: word & PHASE != 0,
    }
}

fn encode(s: State) -> u64 {
    let tx = (s.tx as u64) & ((1 << TX_BITS) - 1);
    VALID | s.pending | (s.expected << 20) | (tx << TX_SHIFT) | if s.phase { PHASE } else { 0 }
}

/// What one mbarrier operation did.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct Step {
    /// The new barrier word (`None`: unchanged).
    pub word: Option<u64>,
    /// The result: the state token (`arrive*`) or 0/1 (`*wait*`).
    pub result: Option<u64>,
    /// Whether a phase completed (a synchronization point for the race checker).
    pub completed: bool,
}

/// Apply `op` with operands `a1`, `a2` (as in the table row, after the barrier)
/// to the barrier word `word`; `Err` says what the program did wrong.
pub fn step(op: MbarrierOp, word: u64, a1: u64, a2: u64) -> Result<Step, String> {
    let _ = a2; // the suspend-time hint: a wait never blocks here (callers spin)
    if op == MbarrierOp::Init {
        if a1 == 0 || a1 > MAX_COUNT {
            return Err(format!(
                "mbarrier.init count {a1} is outside 1..={MAX_COUNT}"
            ));
        }
        let s = State {
            pending: a1,
            expected: a1,
            tx: 0,
            phase: false,
        };
        return Ok(Step {
            word: Some(encode(s)),
            result: None,
            completed: false,
        });
    }
    if word & VALID == 0 {
        return Err(format!(
            "mbarrier.{op} on a barrier that is not initialized (or was invalidated)"
        ));
    }
    let mut s = decode(word);
    let unchanged = |result: Option<u64>| {
        Ok(Step {
            word: None,
            result,
            completed: false,
        })
    };
    match op {
        MbarrierOp::Init => unreachable!("handled above"),
        MbarrierOp::Inval => {
            return Ok(Step {
                word: Some(0),
                result: None,
                completed: false,
            })
        }
        MbarrierOp::TestWait => return unchanged(Some(u64::from(s.phase != (a1 & PHASE != 0)))),
        MbarrierOp::TryWaitParity => return unchanged(Some(u64::from(s.phase != (a1 & 1 != 0)))),
        MbarrierOp::Arrive | MbarrierOp::ArriveExpectTx => {
            if op == MbarrierOp::ArriveExpectTx {
                s.tx = add_tx(s.tx, a1 as i64, op)?;
            }
            if s.pending == 0 {
                return Err(format!(
                    "mbarrier.{op}: more arrivals than the {} expected in this phase",
                    s.expected
                ));
            }
            s.pending -= 1;
        }
        MbarrierOp::CompleteTx => s.tx = add_tx(s.tx, -(a1 as i64), op)?,
    }
    let token = matches!(op, MbarrierOp::Arrive | MbarrierOp::ArriveExpectTx).then_some(word);
    let completed = s.pending == 0 && s.tx == 0;
    if completed {
        s.phase = !s.phase;
        s.pending = s.expected;
    }
    Ok(Step {
        word: Some(encode(s)),
        result: token,
        completed,
    })
}

/// Applies `op` to the barrier word at byte `off` of allocation `id` (an
/// access already checked) and stores the new word: the step of an
/// `mbarrier` instruction and of a copy's `complete_tx`. A completed phase
/// orders the accesses before it against those after it, as a block barrier
/// does: it starts a new race-check interval. Returns the op's result.
pub(crate) fn apply(
    mem: &mut Memory,
    id: usize,
    off: usize,
    op: MbarrierOp,
    a1: u64,
    a2: u64,
) -> Result<Option<u64>, String> {
    let st = step(op, mem.read(id, off, 8), a1, a2)?;
    if let Some(nw) = st.word {
        mem.write(id, off, 8, nw);
    }
    if st.completed {
        mem.epoch = mem.epoch.wrapping_add(1);
    }
    Ok(st.result)
}

fn add_tx(tx: i64, d: i64, op: MbarrierOp) -> Result<i64, String> {
    let n = tx + d;
    if d.unsigned_abs() > MAX_COUNT || n.unsigned_abs() > MAX_COUNT {
        return Err(format!(
            "mbarrier.{op}: transaction count {n} is outside ±{MAX_COUNT}"
        ));
    }
    Ok(n)
}

// ---------------------------------------------------------------- decoding

/// Decode an `mbarrier` op.
pub(crate) fn decode_mbarrier(ic: &InstCx) -> crate::Result<DOp> {
    Ok(match &ic.d.op {
        // A remote arrival is an `arrive` on the barrier word `mapa` pointed at
        // (the interpreter's memory is sequentially consistent: both scopes alike).
        Op::MbarrierArriveCluster | Op::MbarrierArriveClusterRelaxed => DOp::Mbarrier {
            op: MbarrierOp::Arrive,
            bar: ic.arg(0)?,
            a1: NO_SLOT,
            a2: NO_SLOT,
            dst: NO_SLOT,
        },
        Op::Mbarrier(op) => {
            let opt = |k: usize| {
                if k < ic.d.args.len() {
                    ic.arg(k)
                } else {
                    Ok(NO_SLOT)
                }
            };
            DOp::Mbarrier {
                op: *op,
                bar: ic.arg(0)?,
                a1: opt(1)?,
                a2: opt(2)?,
                dst: if ic.d.results.is_empty() {
                    NO_SLOT
                } else {
                    ic.res(0)?
                },
            }
        }
        // The interpreter has one proxy and sequentially consistent memory.
        Op::FenceMbarrierInit => DOp::Nop,
        _ => return Err(InterpError::Internal("not an mbarrier op".into())),
    })
}

// ---------------------------------------------------------------- execution

impl Exec<'_> {
    /// Execute an `mbarrier` op for the lanes `mask`, one lane after another.
    #[inline]
    pub(crate) fn exec_mbarrier(
        &mut self,
        wi: usize,
        pc: u32,
        mask: u32,
        op: &DOp,
    ) -> crate::Result<Flow> {
        let DOp::Mbarrier {
            op,
            bar,
            a1,
            a2,
            dst,
        } = op
        else {
            return Err(InterpError::Internal("not an mbarrier op".into()));
        };
        let ctx = Ctx::new(self.m, self.p, &self.tids, self.bid, self.root);
        let warp = &mut self.warps[wi];
        let base = warp.base_tid;
        let regs = &mut warp.regs;
        let mem = &mut self.mem;
        let opt = |regs: &[u64], s: u32, l: usize| {
            if s == NO_SLOT {
                0
            } else {
                r(regs, s, l)
            }
        };
        // Lanes act one after another, each atomically on the barrier word.
        for l in lanes(mask) {
            let tid = base + l as u32;
            let pv = r(regs, *bar, l);
            let what = format!("mbarrier.{op}");
            let (id, off) = mem
                .shared_only(pv)
                .and_then(|()| mem.check(pv, 8, 8, Access::Atomic, tid))
                .map_err(|f| ctx.fault(f, pc, tid, &what))?;
            let result = apply(mem, id, off, *op, opt(regs, *a1, l), opt(regs, *a2, l))
                .map_err(|m| ctx.trap(TrapKind::InvalidMbarrier, pc, tid, m))?;
            if let (Some(v), true) = (result, *dst != NO_SLOT) {
                w(regs, *dst, l, v);
            }
        }
        Ok(Flow::Next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(op: MbarrierOp, w: &mut u64, a1: u64) -> Step {
        let s = step(op, *w, a1, 0).unwrap();
        if let Some(n) = s.word {
            *w = n;
        }
        s
    }

    #[test]
    fn phases_flip_after_arrivals_and_transactions() {
        let mut w = 0;
        run(MbarrierOp::Init, &mut w, 2);
        let t0 = run(MbarrierOp::ArriveExpectTx, &mut w, 64).result.unwrap();
        assert_eq!(run(MbarrierOp::TryWaitParity, &mut w, 0).result, Some(0));
        assert!(!run(MbarrierOp::Arrive, &mut w, 0).completed);
        // Arrivals done, 64 bytes outstanding: still phase 0.
        assert_eq!(run(MbarrierOp::TestWait, &mut w, t0).result, Some(0));
        run(MbarrierOp::CompleteTx, &mut w, 32);
        assert!(run(MbarrierOp::CompleteTx, &mut w, 32).completed);
        assert_eq!(run(MbarrierOp::TestWait, &mut w, t0).result, Some(1));
        assert_eq!(run(MbarrierOp::TryWaitParity, &mut w, 0).result, Some(1));
        assert_eq!(run(MbarrierOp::TryWaitParity, &mut w, 1).result, Some(0));
        // Phase 1: transactions may complete before they are expected.
        run(MbarrierOp::CompleteTx, &mut w, 16);
        run(MbarrierOp::Arrive, &mut w, 0);
        run(MbarrierOp::ArriveExpectTx, &mut w, 16);
        assert_eq!(run(MbarrierOp::TryWaitParity, &mut w, 1).result, Some(1));
        run(MbarrierOp::Inval, &mut w, 0);
        assert!(step(MbarrierOp::Arrive, w, 0, 0).is_err());
    }

    #[test]
    fn misuse_is_an_error() {
        assert!(step(MbarrierOp::Init, 0, 0, 0).is_err());
        assert!(step(MbarrierOp::Init, 0, MAX_COUNT + 1, 0).is_err());
        assert!(step(MbarrierOp::TestWait, 0, 0, 0).is_err());
        let mut w = 0;
        run(MbarrierOp::Init, &mut w, 1);
        run(MbarrierOp::ArriveExpectTx, &mut w, 8);
        // The only arrival happened; the phase waits for bytes, not arrivals.
        assert!(step(MbarrierOp::Arrive, w, 0, 0).is_err());
        assert!(step(MbarrierOp::CompleteTx, w, MAX_COUNT + 1, 0).is_err());
    }
}
