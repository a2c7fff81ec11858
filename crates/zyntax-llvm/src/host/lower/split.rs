//! `FnLower` in a kernel split at its barriers (see `host/fission.rs`):
//! values live across a barrier go through a local `alloca` — stored where
//! they are defined, loaded where they are used — and a barrier saves them
//! into the thread's arrays, returns, and the next region restores them.

use super::*;

impl FnLower<'_> {
    /// Before instruction `i`: load every saved value it uses (operands and
    /// branch arguments) from its `alloca`, so the use sees the value whether
    /// it was defined in this region or restored at the region's start.
    pub(super) fn split_uses(&mut self, i: InstId) {
        let Some(plan) = self.fission.take() else {
            return;
        };
        if let Some(d) = self.f.insts.get(i.index()) {
            let targets = d.targets.iter().flat_map(|t| t.args.iter());
            let used: BTreeSet<ValueId> = d.args.iter().chain(targets).copied().collect();
            for v in used {
                let Some(s) = plan.slots.get(&v) else {
                    continue;
                };
                let x = self.t();
                self.emit(format!("{x} = load {}, ptr %v{}.a", s.ty, v.0));
                self.ops[v.index()] = x;
                if s.off_slot.is_some() && self.offs.get(v.index()).is_some_and(|o| o.is_some()) {
                    let o = self.t();
                    self.emit(format!("{o} = load i64, ptr %o{}.a", v.0));
                    self.offs[v.index()] = Some(o);
                }
            }
        }
        self.fission = Some(plan);
    }

    /// After the definition of `vals` (an instruction's results, a block's
    /// parameters): store every saved one into its `alloca`.
    pub(super) fn split_defs(&mut self, vals: &[ValueId]) {
        let Some(plan) = self.fission.take() else {
            return;
        };
        for v in vals {
            let Some(s) = plan.slots.get(v) else { continue };
            let name = self.base_ops.get(v.index()).cloned().unwrap_or_default();
            self.emit(format!("store {} {name}, ptr %v{}.a", s.ty, v.0));
            if s.off_slot.is_some() {
                if let Some(o) = self.offs.get(v.index()).cloned().flatten() {
                    self.emit(format!("store i64 {o}, ptr %o{}.a", v.0));
                }
            }
        }
        self.fission = Some(plan);
    }

    /// A barrier of a split kernel: save the values live across it, record
    /// it as the thread's state and return; the region after it starts at
    /// `zx.resume<i>` (the entry's dispatch) and restores them.
    pub(super) fn split_barrier(&mut self, i: InstId) {
        let Some(plan) = self.fission.take() else {
            return;
        };
        let mut tmp = self.tmp;
        let mut next = || {
            tmp += 1;
            format!("%t{tmp}")
        };
        let save = plan.copy(i, true, &mut next);
        let restore = plan.copy(i, false, &mut next);
        // A virtual barrier with affine values: a second entry that rebuilds
        // them from the thread index (`fission::Plan::affine`).
        let rebuild = plan
            .affine
            .contains_key(&i)
            .then(|| plan.rebuild(i, &mut next));
        self.tmp = tmp;
        // An interchanged loop's header stops the thread every `iters`-th
        // arrival only (`fission::iterations`); the counter starts at 0 in
        // every call of the kernel (one region's run of the thread).
        let counted = plan.iters > 1
            && super::super::interchange::is_virtual(i)
            && plan
                .headers
                .iter()
                .any(|b| super::super::interchange::point(*b) == i);
        if counted {
            let (k, k1, more) = (self.t(), self.t(), self.t());
            self.emit(format!("{k} = load i32, ptr %zx.vk, align 4"));
            self.emit(format!("{k1} = add i32 {k}, 1"));
            self.emit(format!("store i32 {k1}, ptr %zx.vk, align 4"));
            self.emit(format!("{more} = icmp ult i32 {k1}, {}", plan.iters));
            self.emit(format!(
                "br i1 {more}, label %zx.go{}, label %zx.stop{}",
                i.0, i.0
            ));
            self.open(format!("zx.stop{}", i.0));
        }
        // The fast variant saves every value at its one exit (`Plan::save_all`).
        if !self.fast {
            save.into_iter().for_each(|l| self.emit(l));
        }
        self.emit(format!("store i32 {}, ptr %zx.state, align 4", i.0 + 1));
        self.emit("ret void");
        self.open(format!("zx.resume{}", i.0));
        restore.into_iter().for_each(|l| self.emit(l));
        if let Some(rebuild) = rebuild {
            self.emit(format!("br label %zx.rb{}", i.0));
            self.open(format!("zx.resumeA{}", i.0));
            rebuild.into_iter().for_each(|l| self.emit(l));
            self.emit(format!("br label %zx.rb{}", i.0));
            self.open(format!("zx.rb{}", i.0));
        }
        if counted {
            self.emit(format!("br label %zx.go{}", i.0));
            self.open(format!("zx.go{}", i.0));
        }
        self.fission = Some(plan);
    }
}
