//! The Python `FunctionBuilder`'s hand-written methods: GPU indices, synchronization, atomics, warp collectives, tensor cores
//! (wmma), async copies and the memory model.

use super::*;

#[pymethods]
impl FunctionBuilder {
    // ------------------------------------------------------------ GPU indices

    // ------------------------------------------------------------ synchronization

    /// Memory fence at `scope` (`"block"`, `"device"`, `"system"`).
    #[pyo3(signature = (scope=Text::from("device")),
        text_signature = "($self, scope='device')")]
    fn fence(&self, py: Python<'_>, scope: Text) -> PyResult<()> {
        let s = to_scope(&scope)?;
        self.sh.run(py, |fb| fb.fence(s))
    }
    /// Synchronizes the lanes in `mask`.
    #[pyo3(signature = (mask=None))]
    fn warp_sync(&self, py: Python<'_>, mask: Option<&Bound<'_, PyAny>>) -> PyResult<()> {
        let m = self.mask(mask)?;
        self.sh.run(py, |fb| {
            let m = mat(fb, &m, &u32_ty())?;
            fb.warp_sync(m)
        })
    }

    // ------------------------------------------------------------ atomics

    /// Atomic read-modify-write (`op` in add, sub, min, max, and, or, xor, exch,
    /// inc, dec) at `scope`; returns the old value.
    #[pyo3(signature = (op, ptr, value, scope=Text::from("device")),
        text_signature = "($self, op, ptr, value, scope='device')")]
    fn atomic(
        &self,
        py: Python<'_>,
        op: Text,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<PyValue> {
        let op = enum_name(
            "atomic op",
            &op,
            AtomicOp::ALL,
            AtomicOp::from_name,
            AtomicOp::name,
        )?;
        self.atomic_op(py, op, ptr, value, &scope)
    }
    /// Compare-and-swap: stores `desired` if `*ptr == expected`; returns the old value.
    #[pyo3(signature = (ptr, expected, desired, scope=Text::from("device")),
        text_signature = "($self, ptr, expected, desired, scope='device')")]
    fn atomic_cas(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        expected: &Bound<'_, PyAny>,
        desired: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<PyValue> {
        let s = to_scope(&scope)?;
        let (p, pt) = self.sh.value(ptr, "the pointer of `atomic_cas`")?;
        let (oe, _) = self.sh.opnd(expected)?;
        let (od, _) = self.sh.opnd(desired)?;
        let et = pt.pointee().cloned().unwrap_or(pt);
        self.sh.run1(py, |fb| {
            let e = mat(fb, &oe, &et)?;
            let d = mat(fb, &od, &et)?;
            fb.atomic_cas(s, p, e, d)
        })
    }

    // ------------------------------------------------------------ warp collectives

    /// Warp shuffle; `mode` in idx, up, down, xor. `lane` is the source lane,
    /// delta or lane mask.
    #[pyo3(signature = (mode, value, lane, *, mask=None, width=Checked(32)),
        text_signature = "($self, mode, value, lane, *, mask=None, width=32)")]
    fn shfl(
        &self,
        py: Python<'_>,
        mode: Text,
        value: &Bound<'_, PyAny>,
        lane: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
        width: Checked<u32>,
    ) -> PyResult<PyValue> {
        let m = enum_name(
            "shuffle mode",
            &mode,
            ShflMode::ALL,
            ShflMode::from_name,
            ShflMode::name,
        )?;
        self.shfl_op(py, m, value, lane, mask, width.0)
    }

    /// Warp vote; `mode` in ballot (u32 mask), any, all (bool).
    #[pyo3(signature = (mode, pred, *, mask=None))]
    fn vote(
        &self,
        py: Python<'_>,
        mode: Text,
        pred: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let m = enum_name(
            "vote mode",
            &mode,
            VoteMode::ALL,
            VoteMode::from_name,
            VoteMode::name,
        )?;
        self.vote_op(py, m, pred, mask)
    }

    /// Mask of the lanes in `mask` whose `value` equals this lane's.
    #[pyo3(signature = (value, *, mask=None))]
    fn match_any(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let mut v = self.match_op(py, MatchMode::Any, value, mask)?;
        v.pop()
            .ok_or_else(|| InternalError::new_err("match.any gave no result"))
    }
    /// `(mask, all_equal)`: whether all lanes in `mask` hold the same `value`.
    #[pyo3(signature = (value, *, mask=None))]
    fn match_all(
        &self,
        py: Python<'_>,
        value: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<(PyValue, PyValue)> {
        let mut v = self.match_op(py, MatchMode::All, value, mask)?;
        match (v.pop(), v.pop()) {
            (Some(pred), Some(m)) => Ok((m, pred)),
            _ => Err(InternalError::new_err(
                "match.all gave fewer than 2 results",
            )),
        }
    }

    // ------------------------------------------------------------ tensor cores

    /// Loads an A/B/accumulator fragment of type `frag` from `ptr` with leading
    /// dimension `ldm` (elements) in `layout` (`"row"`/`"col"`).
    #[pyo3(signature = (frag, ptr, ldm, layout=None))]
    fn mma_load(
        &self,
        py: Python<'_>,
        frag: &Bound<'_, PyAny>,
        ptr: &Bound<'_, PyAny>,
        ldm: &Bound<'_, PyAny>,
        layout: Option<Text>,
    ) -> PyResult<PyValue> {
        let Type::Frag(ft) = to_type(frag)? else {
            return Err(ArgumentError::new_err(
                "mma_load needs a fragment type (zyntax.hir.frag(...))",
            ));
        };
        // A/B fragments carry their layout; accumulators take it here.
        let layout = match (layout, ft.layout) {
            (Some(l), _) => parse_layout(&l)?,
            (None, Some(l)) => l,
            (None, None) => {
                return Err(BuildError::new_err(
                    "mma_load of an accumulator needs layout='row' or 'col'",
                ))
            }
        };
        let (p, _) = self.sh.value(ptr, "the pointer of `mma_load`")?;
        let (ol, _) = self.sh.opnd(ldm)?;
        self.sh.run1(py, |fb| {
            let l = mat(fb, &ol, &u32_ty())?;
            fb.mma_load(ft, layout, p, l)
        })
    }

    /// An accumulator fragment of type `frag` with every element set to `value`.
    fn mma_fill(
        &self,
        py: Python<'_>,
        frag: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let Type::Frag(ft) = to_type(frag)? else {
            return Err(ArgumentError::new_err(
                "mma_fill needs a fragment type (zyntax.hir.frag(...))",
            ));
        };
        let (ov, _) = self.sh.opnd(value)?;
        let et = Type::Scalar(ft.elem);
        self.sh.run1(py, |fb| {
            let v = mat(fb, &ov, &et)?;
            fb.mma_fill(ft, v)
        })
    }

    /// `D = A * B + C` on fragments; D has C's type.
    fn mma(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        c: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let (a, _) = self.sh.value(a, "fragment a of `mma`")?;
        let (b, _) = self.sh.value(b, "fragment b of `mma`")?;
        let (c, _) = self.sh.value(c, "fragment c of `mma`")?;
        self.sh.run1(py, |fb| fb.mma(a, b, c))
    }

    /// Stores an accumulator fragment to `ptr` with leading dimension `ldm`.
    #[pyo3(signature = (ptr, frag, ldm, layout=Text::from("row")),
        text_signature = "($self, ptr, frag, ldm, layout='row')")]
    fn mma_store(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        frag: &Bound<'_, PyAny>,
        ldm: &Bound<'_, PyAny>,
        layout: Text,
    ) -> PyResult<()> {
        let layout = parse_layout(&layout)?;
        let (p, _) = self.sh.value(ptr, "the pointer of `mma_store`")?;
        let (f, _) = self.sh.value(frag, "the fragment of `mma_store`")?;
        let (ol, _) = self.sh.opnd(ldm)?;
        self.sh.run(py, |fb| {
            let l = mat(fb, &ol, &u32_ty())?;
            fb.mma_store(layout, p, f, l)
        })
    }

    // ------------------------------------------------------------ async copy

    /// Asynchronous global→shared copy of `bytes` (4, 8 or 16) with cache hint
    /// `cache` (`"ca"` or `"cg"`, 16 bytes only).
    #[pyo3(signature = (dst, src, bytes=Checked(16), cache=Text::from("cg")),
        text_signature = "($self, dst, src, bytes=16, cache='cg')")]
    fn cp_async(
        &self,
        py: Python<'_>,
        dst: &Bound<'_, PyAny>,
        src: &Bound<'_, PyAny>,
        bytes: Checked<u32>,
        cache: Text,
    ) -> PyResult<()> {
        let c = enum_name(
            "cache hint",
            &cache,
            CacheHint::ALL,
            CacheHint::from_name,
            CacheHint::name,
        )?;
        let (d, _) = self.sh.value(dst, "the destination of `cp_async`")?;
        let (s, _) = self.sh.value(src, "the source of `cp_async`")?;
        self.sh.run(py, |fb| fb.cp_async(bytes.0, c, d, s))
    }

    // ------------------------------------------------------------ memory model (issue 12)

    /// Load with acquire semantics at `scope` (`ld.acquire`).
    #[pyo3(signature = (ptr, scope=Text::from("device")),
        text_signature = "($self, ptr, scope='device')")]
    fn load_acquire(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<PyValue> {
        let s = to_scope(&scope)?;
        let (p, _) = self.sh.value(ptr, "the pointer of `load_acquire`")?;
        self.sh.run1(py, |fb| fb.load_acquire(s, p))
    }
    /// Store with release semantics at `scope` (`st.release`).
    #[pyo3(signature = (ptr, value, scope=Text::from("device")),
        text_signature = "($self, ptr, value, scope='device')")]
    fn store_release(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        scope: Text,
    ) -> PyResult<()> {
        let s = to_scope(&scope)?;
        let (p, pt) = self.sh.value(ptr, "the pointer of `store_release`")?;
        let (ov, _) = self.sh.opnd(value)?;
        let et = pt.pointee().cloned().unwrap_or(pt);
        self.sh.run(py, |fb| {
            let v = mat(fb, &ov, &et)?;
            fb.store_release(s, p, v)
        })
    }
    /// `redux.sync.<op>` (`op` in add, min, max, and, or, xor; sm_80): the
    /// reduction of a u32/i32 `value` over the lanes in `mask` (all 32 by default).
    #[pyo3(signature = (op, value, *, mask=None))]
    fn redux(
        &self,
        py: Python<'_>,
        op: Text,
        value: &Bound<'_, PyAny>,
        mask: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let op = enum_name(
            "redux op",
            &op,
            ReduxOp::ALL,
            ReduxOp::from_name,
            ReduxOp::name,
        )?;
        let (v, _) = self.sh.value(value, "the value of `redux`")?;
        let m = self.mask(mask)?;
        self.sh.run1(py, |fb| {
            let m = mat(fb, &m, &u32_ty())?;
            fb.redux(op, m, v)
        })
    }
    /// Acquire-release fence at `scope` (`fence.acq_rel`).
    #[pyo3(signature = (scope=Text::from("device")),
        text_signature = "($self, scope='device')")]
    fn fence_acq_rel(&self, py: Python<'_>, scope: Text) -> PyResult<()> {
        let s = to_scope(&scope)?;
        self.sh.run(py, |fb| fb.fence_acq_rel(s))
    }

    // ------------------------------------------------------------ issue 12 (rest)

    /// `bar.sync id, count`: waits at named barrier `id` (1..15) until
    /// `count` threads (a multiple of 32; whole warps arrive) have arrived.
    fn named_barrier_sync(
        &self,
        py: Python<'_>,
        id: Checked<u32>,
        count: Checked<u32>,
    ) -> PyResult<()> {
        self.sh.run(py, |fb| fb.named_barrier(false, id.0, count.0))
    }
    /// `bar.arrive id, count`: arrives at named barrier `id` without waiting.
    fn named_barrier_arrive(
        &self,
        py: Python<'_>,
        id: Checked<u32>,
        count: Checked<u32>,
    ) -> PyResult<()> {
        self.sh.run(py, |fb| fb.named_barrier(true, id.0, count.0))
    }
    /// Two f32 rounded to nearest even into a pair (`fmt`: f16x2, bf16x2 →
    /// `vec<f16|bf16, 2>`; e4m3x2, e5m2x2 → `u16`, saturating); `lo` is lane 0.
    fn cvt_pack(
        &self,
        py: Python<'_>,
        fmt: Text,
        lo: &Bound<'_, PyAny>,
        hi: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        let f = enum_name(
            "pair format",
            &fmt,
            zh::PackFmt::ALL,
            zh::PackFmt::from_name,
            zh::PackFmt::name,
        )?;
        let (lo, _) = self.sh.value(lo, "the low operand of `cvt_pack`")?;
        let (hi, _) = self.sh.value(hi, "the high operand of `cvt_pack`")?;
        self.sh.run1(py, |fb| fb.cvt_pack(f, lo, hi))
    }
    /// A packed fp8 pair (`u16`; `fmt` e4m3x2 or e5m2x2) widened to `vec<f16, 2>`.
    fn cvt_unpack(&self, py: Python<'_>, fmt: Text, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        let f = enum_name(
            "pair format",
            &fmt,
            zh::PackFmt::ALL,
            zh::PackFmt::from_name,
            zh::PackFmt::name,
        )?;
        let (a, _) = self.sh.value(a, "the operand of `cvt_unpack`")?;
        self.sh.run1(py, |fb| fb.cvt_unpack(f, a))
    }
}
