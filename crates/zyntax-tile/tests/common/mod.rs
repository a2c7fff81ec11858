//! Shared helpers of the interpreter tests: fresh pseudo-random inputs,
//! byte conversion, and launching a lowered tile kernel with its views
//! spelled out as the kernel's HIR parameters.
#![allow(dead_code)]

use zyntax_hir::tensormap::{Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc};
use zyntax_interp::tma::InterpTensorMap;
use zyntax_interp::{Arg, Interpreter};
use zyntax_tile::TileKernel;

/// A xorshift generator seeded from the clock (the seed is printed).
pub struct Rng(u64);

impl Rng {
    pub fn new() -> Rng {
        let s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        eprintln!("seed {s}");
        Rng(s)
    }
    /// Uniform in [-2, 2).
    pub fn next(&mut self) -> f32 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        (self.0 >> 40) as f32 / (1u64 << 24) as f32 * 4.0 - 2.0
    }
    pub fn vec(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

pub fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

pub fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// A kernel argument: a view over a buffer, or a scalar.
pub enum TArg {
    /// Buffer index, runtime extents, strides (elements).
    View(usize, Vec<u32>, Vec<u32>),
    Int(i128),
    Float(f64),
}

/// A row-major view of `shape` over buffer `buf`.
pub fn row_major(buf: usize, shape: &[u32]) -> TArg {
    let mut strides = vec![1; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    TArg::View(buf, shape.to_vec(), strides)
}

/// Runs `kernel` on the interpreter over `grid` program instances.
pub fn run(kernel: &TileKernel, grid: [u32; 3], args: &[TArg], buffers: &mut [Vec<u8>]) {
    let mut hir_args = Vec::new();
    for a in args {
        match a {
            TArg::View(buf, shape, strides) => {
                hir_args.push(Arg::Buffer(*buf));
                hir_args.extend(shape.iter().map(|&s| Arg::Int(s.into())));
                hir_args.extend(strides.iter().map(|&s| Arg::Int(s.into())));
            }
            TArg::Int(i) => hir_args.push(Arg::Int(*i)),
            TArg::Float(f) => hir_args.push(Arg::Float(*f)),
        }
    }
    let mut it = Interpreter::new(&kernel.module).unwrap_or_else(|e| panic!("{e}"));
    // The kernel's tensor maps (a TMA ring), built from their views.
    for (i, m) in kernel.launch.tensor_maps.iter().enumerate() {
        let TArg::View(buf, ext, str) = &args[m.param] else {
            panic!("tensor map {i}: parameter {} is no view", m.param);
        };
        it.tensor_maps.push(interp_map(kernel, m, *buf, ext, str));
        hir_args.push(Arg::TensorMap(i));
    }
    if let Err(e) = it.launch(
        &kernel.name,
        grid,
        kernel.launch.block,
        0,
        &hir_args,
        buffers,
    ) {
        panic!(
            "{}: {e}\n{}",
            kernel.name,
            zyntax_hir::print_module(&kernel.module)
                .lines()
                .take(200)
                .collect::<Vec<_>>()
                .join("\n")
        );
    }
}

/// The interpreter's tensor map of `m` over a view of buffer `buffer`
/// (extents and strides in elements): dims innermost first, the map's
/// inner and outer dim, then the view's other dims from the last, box 1
/// along those (`zyntax_tile::TensorMapParam`).
pub fn interp_map(
    kernel: &TileKernel,
    m: &zyntax_tile::TensorMapParam,
    buffer: usize,
    ext: &[u32],
    str: &[u32],
) -> InterpTensorMap {
    assert_eq!(
        str[m.inner_dim], 1,
        "the inner dim of a map has unit stride"
    );
    let dtype = match &kernel.launch.params[m.param] {
        zyntax_tile::KernelParam::View { elem, .. } => elem.as_scalar().expect("a scalar view"),
        _ => panic!("a tensor map of a scalar parameter"),
    };
    let bytes = u64::from(zyntax_hir::Type::Scalar(dtype).size_bytes().unwrap_or(2) as u32);
    let (inner, outer) = (m.inner_dim, m.outer_dim);
    let mut order = vec![inner, outer];
    order.extend((0..ext.len()).rev().filter(|&d| d != inner && d != outer));
    let mut box_dims = m.box_dims.to_vec();
    box_dims.resize(order.len(), 1);
    InterpTensorMap {
        buffer,
        offset: 0,
        desc: TensorMapDesc {
            dtype,
            dims: order.iter().map(|&d| ext[d].into()).collect(),
            strides: order[1..]
                .iter()
                .map(|&d| u64::from(str[d]) * bytes)
                .collect(),
            box_dims,
            elem_strides: vec![1; order.len()],
            swizzle: Swizzle::B128,
            interleave: Interleave::None,
            oob_fill: OobFill::Zero,
            l2_promotion: L2Promotion::None,
        },
    }
}

/// Asserts `got` is within `tol` (relative to max(1, |want|)) of `want`.
pub fn assert_close(got: &[f32], want: &[f64], tol: f64, what: &str) {
    assert_eq!(got.len(), want.len(), "{what}: length");
    for (i, (&g, &w)) in got.iter().zip(want).enumerate() {
        let err = (f64::from(g) - w).abs();
        assert!(
            err <= tol * w.abs().max(1.0),
            "{what}: element {i}: got {g}, want {w}"
        );
    }
}

/// `n` fresh inputs rounded to a 16-bit float type (`f16` or `bf16`): their
/// bytes and their exact values.
pub fn rounded16<T: Copy>(
    rng: &mut Rng,
    n: usize,
    from: impl Fn(f32) -> T,
    le_bytes: impl Fn(T) -> [u8; 2],
    to_f64: impl Fn(T) -> f64,
) -> (Vec<u8>, Vec<f64>) {
    let h: Vec<T> = rng.vec(n).into_iter().map(from).collect();
    (
        h.iter().flat_map(|&x| le_bytes(x)).collect(),
        h.iter().map(|&x| to_f64(x)).collect(),
    )
}

/// Runs a one-head causal attention kernel over `s_len` tokens of head dim
/// `d` (parameters `q [S, D]`, `kt [D, S]` — k transposed, strides only —,
/// `v [S, D]`, `o [S, D]` f32 poisoned with NaN, scalar `scale`; `bm` query
/// rows per program instance) on the interpreter, and returns `o` with its
/// float64 reference.
#[allow(clippy::type_complexity)] // q, k and v as (bytes, exact values)
pub fn run_causal_attention(
    kernel: &TileKernel,
    bm: u32,
    (s_len, d): (u32, u32),
    (q, k, v): (
        (Vec<u8>, Vec<f64>),
        (Vec<u8>, Vec<f64>),
        (Vec<u8>, Vec<f64>),
    ),
    scale: f64,
) -> (Vec<f32>, Vec<f64>) {
    let (n, du) = (s_len as usize, d as usize);
    let (q64, k64, v64) = (q.1, k.1, v.1);
    let mut bufs = vec![q.0, k.0, v.0, bytes(&vec![f32::NAN; n * du])];
    let args = [
        row_major(0, &[s_len, d]),
        TArg::View(1, vec![d, s_len], vec![1, d]),
        row_major(2, &[s_len, d]),
        row_major(3, &[s_len, d]),
        TArg::Float(scale),
    ];
    run(kernel, [s_len.div_ceil(bm), 1, 1], &args, &mut bufs);
    let mut want = vec![0.0; n * du];
    for i in 0..n {
        let s: Vec<f64> = (0..=i)
            .map(|j| {
                (0..du)
                    .map(|c| q64[i * du + c] * k64[j * du + c])
                    .sum::<f64>()
                    * scale
            })
            .collect();
        let mx = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
        let e: Vec<f64> = s.iter().map(|x| (x - mx).exp()).collect();
        let den: f64 = e.iter().sum();
        for c in 0..du {
            want[i * du + c] = (0..=i).map(|j| e[j] * v64[j * du + c]).sum::<f64>() / den;
        }
    }
    (floats(&bufs[3]), want)
}
