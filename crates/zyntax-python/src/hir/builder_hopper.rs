//! The Python `FunctionBuilder`'s hand-written methods: Hopper barriers (mbarrier), `cluster_sync`, warp MMA (mma.sync,
//! ldmatrix) and warpgroup MMA (wgmma). TMA, bulk copies and the cluster ops are generated (`generated.rs`).

use super::*;

#[pymethods]
impl FunctionBuilder {
    // ------------------------------------------------------------ Hopper barriers (issue 13)
    // A barrier is a `ptr<shared, u64>` (e.g. `shared_alloc(u64, 1)`); counts are u32.

    /// Initializes the barrier for `count` arrivals per phase (phase 0).
    fn mbarrier_init(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        count: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.mbar(py, MbarrierOp::Init, bar, &[count]).map(|_| ())
    }
    /// Arrives once; returns the u64 state token for `mbarrier_test_wait`.
    fn mbarrier_arrive(&self, py: Python<'_>, bar: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.mbar1(py, MbarrierOp::Arrive, bar, &[])
    }
    /// Adds `tx` bytes to the phase's expected transactions, then arrives; returns the state token (sm_90).
    fn mbarrier_arrive_expect_tx(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        tx: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        self.mbar1(py, MbarrierOp::ArriveExpectTx, bar, &[tx])
    }
    /// Marks `tx` bytes of the phase's transactions complete (sm_90).
    fn mbarrier_complete_tx(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        tx: &Bound<'_, PyAny>,
    ) -> PyResult<()> {
        self.mbar(py, MbarrierOp::CompleteTx, bar, &[tx])
            .map(|_| ())
    }
    /// Whether the phase `state` (from an arrive) came from has completed; never blocks.
    fn mbarrier_test_wait(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        state: &Bound<'_, PyAny>,
    ) -> PyResult<PyValue> {
        self.mbar1(py, MbarrierOp::TestWait, bar, &[state])
    }
    /// Whether the phase of parity `parity` (0 or 1) has completed; may first
    /// suspend the thread for up to `hint` ns (sm_90). Call it in a loop.
    #[pyo3(signature = (bar, parity, hint=None))]
    fn mbarrier_try_wait_parity(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        parity: &Bound<'_, PyAny>,
        hint: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let zero = 0u32.into_pyobject(py)?.into_any();
        let hint = hint.unwrap_or(&zero);
        self.mbar1(py, MbarrierOp::TryWaitParity, bar, &[parity, hint])
    }
    /// Spins until the phase of parity `parity` (0 or 1) of `bar` has
    /// completed: `mbarrier_try_wait_parity` in a loop (`hint`: its
    /// suspend-time hint in ns; None: the hardware's default), the Rust
    /// builder's one wait loop. Building continues after the loop (sm_90).
    #[pyo3(signature = (bar, parity, hint=None))]
    fn mbarrier_wait_parity(
        &self,
        py: Python<'_>,
        bar: &Bound<'_, PyAny>,
        parity: &Bound<'_, PyAny>,
        hint: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let (b, _) = self
            .sh
            .value(bar, "the barrier of `mbarrier_wait_parity`")?;
        let parity = self.sh.opnd(parity)?.0;
        let hint = hint.map(|h| self.sh.opnd(h)).transpose()?.map(|h| h.0);
        self.sh.run(py, |fb| {
            let parity = mat(fb, &parity, &Type::U32)?;
            let hint = match &hint {
                Some(h) => mat(fb, h, &Type::U32)?,
                None => fb.iconst(Type::U32, 0)?,
            };
            fb.mbarrier_wait_parity(b, parity, hint)
        })
    }
    /// Invalidates the barrier so its shared memory can be reused.
    fn mbarrier_inval(&self, py: Python<'_>, bar: &Bound<'_, PyAny>) -> PyResult<()> {
        self.mbar(py, MbarrierOp::Inval, bar, &[]).map(|_| ())
    }

    // TMA, bulk copies and the cluster ops (`tma_load`, `bulk_copy_g2s`,
    // `cluster_arrive`, `mapa`, ...) are generated from their rows
    // (`crates/zyntax-hir/src/table/hopper.rs`) into `generated.rs`.

    // ------------------------------------------------------------ clusters (issue 13 item 4, h13-cluster)

    /// Cluster-wide barrier: `cluster_arrive()` then `cluster_wait()`.
    fn cluster_sync(&self, py: Python<'_>) -> PyResult<()> {
        self.sh.run(py, |fb| {
            fb.cluster_barrier(zh::ClusterBarrierOp::Arrive)?;
            fb.cluster_barrier(zh::ClusterBarrierOp::Wait)
        })
    }

    // ------------------------------------------------------------ warp MMA (issue 12)

    /// `D = A * B + C` over the warp (`mma.sync`) with per-lane register
    /// fragments in PTX's layouts; `elem` picks the input type and the shape.
    #[pyo3(signature = (a, b, c, *, elem=Text::from("f16")),
        text_signature = "($self, a, b, c, *, elem='f16')")]
    fn mma_sync(
        &self,
        py: Python<'_>,
        a: &Bound<'_, PyAny>,
        b: &Bound<'_, PyAny>,
        c: &Bound<'_, PyAny>,
        elem: Text,
    ) -> PyResult<PyValue> {
        let e = enum_name(
            "mma.sync input type",
            &elem,
            zh::MmaElem::ALL,
            zh::MmaElem::from_name,
            zh::MmaElem::name,
        )?;
        let (a, _) = self.sh.value(a, "fragment a of `mma_sync`")?;
        let (b, _) = self.sh.value(b, "fragment b of `mma_sync`")?;
        let (c, _) = self.sh.value(c, "fragment c of `mma_sync`")?;
        self.sh.run1(py, |fb| fb.mma_sync(e.shape(), e, a, b, c))
    }

    /// `num` (1, 2, 4) 8x8 b16 matrices from shared memory; lane `i*8 + r`
    /// gives the address of row `r` of matrix `i`.
    #[pyo3(signature = (ptr, num=Checked(4), *, trans=Flag(false)),
        text_signature = "($self, ptr, num=4, *, trans=False)")]
    fn ldmatrix(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        num: Checked<u32>,
        trans: Flag,
    ) -> PyResult<PyValue> {
        let (p, _) = self.sh.value(ptr, "the pointer of `ldmatrix`")?;
        self.sh.run1(py, |fb| fb.ldmatrix(num.0, trans.0, p))
    }

    /// Stores the matrices of `value` (`u32` or `vec<u32, n>`) to shared memory (sm_90).
    #[pyo3(signature = (ptr, value, *, trans=Flag(false)), text_signature = "($self, ptr, value, *, trans=False)")]
    fn stmatrix(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        trans: Flag,
    ) -> PyResult<()> {
        let (p, _) = self.sh.value(ptr, "the pointer of `stmatrix`")?;
        let (v, t) = self.sh.value(value, "the value of `stmatrix`")?;
        let num = match t {
            Type::Vector(_, n) => n,
            _ => 1,
        };
        self.sh.run(py, |fb| fb.stmatrix(num, trans.0, p, v))
    }

    // ------------------------------------------------------------ warpgroup MMA (issue 13)

    /// A u64 shared-memory matrix descriptor for `wgmma`: the start address of
    /// `smem_ptr` (a shared pointer), the leading and stride byte offsets
    /// (multiples of 16; ints or u32 values) and the swizzle
    /// (`"128B"`, `"64B"`, `"32B"`, `"none"`); base offset 0.
    #[pyo3(signature = (smem_ptr, *, leading_byte_offset, stride_byte_offset, swizzle=Text::from("128B")),
        text_signature = "($self, smem_ptr, *, leading_byte_offset, stride_byte_offset, swizzle='128B')")]
    fn wgmma_desc(
        &self,
        py: Python<'_>,
        smem_ptr: &Bound<'_, PyAny>,
        leading_byte_offset: &Bound<'_, PyAny>,
        stride_byte_offset: &Bound<'_, PyAny>,
        swizzle: Text,
    ) -> PyResult<PyValue> {
        let sw = enum_name(
            "swizzle",
            &swizzle,
            zh::Swizzle::ALL,
            zh::Swizzle::from_name,
            zh::Swizzle::name,
        )?;
        let (p, _) = self.sh.value(smem_ptr, "the pointer of `wgmma_desc`")?;
        let lbo = self.sh.opnd(leading_byte_offset)?.0;
        let sbo = self.sh.opnd(stride_byte_offset)?.0;
        self.sh.run1(py, |fb| {
            let l = mat(fb, &lbo, &Type::U32)?;
            let s = mat(fb, &sbo, &Type::U32)?;
            fb.wgmma_desc(sw, p, l, s)
        })
    }

    /// `D = (scale_d ? acc : 0) + A * B` over the warpgroup (`wgmma.mma_async`,
    /// m64nNk*, sm_90a). `acc` is `vec<f32|f16|i32, n/2>`; `a` a u64 descriptor
    /// (A in shared memory) or a `vec<u32, 4>` register fragment; `b_desc` a u64
    /// descriptor; `scale_d` 0/1 or a bool value; `scale_a`/`scale_b` 1 or -1.
    #[pyo3(signature = (acc, a, b_desc, *, n, a_type=Text::from("bf16"), b_type=None, scale_d=None, trans_a=Flag(false), trans_b=Flag(false), scale_a=Checked(1), scale_b=Checked(1)),
        text_signature = "($self, acc, a, b_desc, *, n, a_type='bf16', b_type=None, scale_d=1, trans_a=False, trans_b=False, scale_a=1, scale_b=1)")]
    #[allow(clippy::too_many_arguments)]
    fn wgmma(
        &self,
        py: Python<'_>,
        acc: &Bound<'_, PyAny>,
        a: &Bound<'_, PyAny>,
        b_desc: &Bound<'_, PyAny>,
        n: Checked<u32>,
        a_type: Text,
        b_type: Option<Text>,
        scale_d: Option<&Bound<'_, PyAny>>,
        trans_a: Flag,
        trans_b: Flag,
        scale_a: Checked<i32>,
        scale_b: Checked<i32>,
    ) -> PyResult<PyValue> {
        let elem = |t: &str| {
            enum_name(
                "wgmma input type",
                t,
                zh::MmaElem::ALL,
                zh::MmaElem::from_name,
                zh::MmaElem::name,
            )
        };
        let ea = elem(&a_type)?;
        let eb = match &b_type {
            Some(t) => elem(t)?,
            None => ea,
        };
        let neg = |x: i32, what: &str| match x {
            1 => Ok(false),
            -1 => Ok(true),
            _ => Err(BuildError::new_err(format!(
                "wgmma: {what} must be 1 or -1, got {x}"
            ))),
        };
        let form = zh::Wgmma {
            n: n.0,
            a: ea,
            b: eb,
            trans_a: trans_a.0,
            trans_b: trans_b.0,
            neg_a: neg(scale_a.0, "scale_a")?,
            neg_b: neg(scale_b.0, "scale_b")?,
        };
        let (c, _) = self.sh.value(acc, "the accumulator of `wgmma`")?;
        let (av, _) = self.sh.value(a, "operand a of `wgmma`")?;
        let (bv, _) = self.sh.value(b_desc, "the B descriptor of `wgmma`")?;
        let sd = match scale_d {
            None => Opnd::Bool(true),
            Some(o) => match self.sh.opnd(o)?.0 {
                Opnd::Int(0) => Opnd::Bool(false),
                Opnd::Int(1) => Opnd::Bool(true),
                other => other,
            },
        };
        self.sh.run1(py, |fb| {
            let s = mat(fb, &sd, &Type::BOOL)?;
            fb.wgmma(form, c, av, bv, s)
        })
    }

    /// An accumulator of zeros for `wgmma` of width `n`: `vec<dtype, n/2>`
    /// (`dtype` f32, f16 or i32).
    #[pyo3(signature = (n, *, dtype=None), text_signature = "($self, n, *, dtype=f32)")]
    fn wgmma_zero(
        &self,
        py: Python<'_>,
        n: Checked<u32>,
        dtype: Option<&Bound<'_, PyAny>>,
    ) -> PyResult<PyValue> {
        let s = match dtype {
            Some(t) => to_type(t)?,
            None => Type::F32,
        };
        let Some(s) = s.as_scalar() else {
            return Err(BuildError::new_err(format!(
                "wgmma_zero: dtype must be a scalar type, got {s}"
            )));
        };
        if n.0 % 8 != 0 || !(8..=256).contains(&n.0) {
            return Err(BuildError::new_err(format!(
                "wgmma_zero: n must be 8..256 by 8, got {}",
                n.0
            )));
        }
        self.sh
            .run1(py, |fb| fb.wgmma_zero(Type::Vector(s, n.0 / 2)))
    }

    /// Waits until at most `n` committed wgmma groups are pending (0..7).
    fn wgmma_wait_group(&self, py: Python<'_>, n: Checked<u32>) -> PyResult<()> {
        self.sh.run(py, |fb| fb.wgmma_wait_group(n.0))
    }

    /// `setmaxnreg.inc` (`increase=True`) or `.dec` to `count` registers per
    /// thread (a multiple of 8 in 24..256; sm_90a).
    #[pyo3(signature = (count, *, increase), text_signature = "($self, count, *, increase)")]
    fn setmaxnreg(&self, py: Python<'_>, count: Checked<u32>, increase: Flag) -> PyResult<()> {
        self.sh.run(py, |fb| fb.setmaxnreg(count.0, increase.0))
    }

    /// A global load with a PTX cache operator (`ca`, `cg`, `cs`, `lu`, `cv`).
    #[pyo3(signature = (ptr, cache=Text::from("cs")),
        text_signature = "($self, ptr, cache='cs')")]
    fn load_cached(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        cache: Text,
    ) -> PyResult<PyValue> {
        let c = enum_name(
            "cache operator",
            &cache,
            zh::CacheOp::ALL,
            zh::CacheOp::from_name,
            zh::CacheOp::name,
        )?;
        let (p, _) = self.sh.value(ptr, "the pointer of `load_cached`")?;
        self.sh.run1(py, |fb| fb.load_cached(c, p))
    }
    /// A global store with a PTX cache operator (`wb`, `cg`, `cs`, `wt`).
    #[pyo3(signature = (ptr, value, cache=Text::from("cs")),
        text_signature = "($self, ptr, value, cache='cs')")]
    fn store_cached(
        &self,
        py: Python<'_>,
        ptr: &Bound<'_, PyAny>,
        value: &Bound<'_, PyAny>,
        cache: Text,
    ) -> PyResult<()> {
        let c = enum_name(
            "cache operator",
            &cache,
            zh::CacheOp::ALL,
            zh::CacheOp::from_name,
            zh::CacheOp::name,
        )?;
        let (p, _) = self.sh.value(ptr, "the pointer of `store_cached`")?;
        let (v, _) = self.sh.value(value, "the value of `store_cached`")?;
        self.sh.run(py, |fb| fb.store_cached(c, p, v))
    }
    /// `2**a` on f32, fast approximation (`ex2.approx.f32`).
    fn ex2_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Ex2, a)
    }
    /// `1/a` on f32, fast approximation (`rcp.approx.f32`).
    fn rcp_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Rcp, a)
    }
    /// `tanh(a)` on f32, fast approximation (`tanh.approx.f32`, sm_80+).
    fn tanh_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Tanh, a)
    }
    /// `2**a` on f32, fast approximation with subnormal operands and results
    /// flushed to zero (`ex2.approx.ftz.f32`: one MUFU.EX2, no range fix-up).
    fn ex2_ftz_approx(&self, py: Python<'_>, a: &Bound<'_, PyAny>) -> PyResult<PyValue> {
        self.approx(py, zh::ApproxOp::Ex2Ftz, a)
    }

    /// Pointer to the module global `name` (declared with
    /// `Module.global_var`): `ptr<constant|global, elem>`.
    fn global_addr(&self, py: Python<'_>, name: Text) -> PyResult<PyValue> {
        let name = name.trim_start_matches('@').to_string();
        let ty = {
            let ms = lock(&self.sh.module.state)?;
            ms.globals
                .iter()
                .find(|g| g.name == name)
                .map(zh::GlobalVar::ptr_type)
                .ok_or_else(|| {
                    BuildError::new_err(format!(
                        "unknown global @{name}: declare it with Module.global_var first"
                    ))
                })?
        };
        self.sh.run1(py, |fb| fb.global_addr(name, ty))
    }
}
