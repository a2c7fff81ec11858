//! A Rust front-end tiling a loop-nest reduction through shared memory:
//! `c[i, j] = Σ_k a[i, k] * b[k, j]` written as a parallel nest whose one
//! reduction names its reads as affine forms; `zyntax_opt::nest_stage`
//! decides what to stage (the report says what and why), emits the tiled
//! kernel, and the reference interpreter runs it against a float64 product.
//! No Python anywhere.
//!
//! ```text
//! cargo run -p zyntax-opt --example tiled_nest -- [M N K] [--zir]
//! ```

use std::process::ExitCode;
use zyntax_hir::{print_module, verify_module, AddrSpace, FunctionBuilder, Module, Type};
use zyntax_interp::{Arg, Interpreter};
use zyntax_opt::nest;
use zyntax_opt::nest_stage::{Affine, Extent, Operand, Sym, TiledNest};

const WORKGROUP: [u32; 2] = [16, 16];

/// The tiled matmul kernel `mm(a, b, c, M, N, K)` and the tiler's report.
fn build() -> Result<(Module, Vec<String>), Box<dyn std::error::Error>> {
    let f32p = Type::ptr(AddrSpace::Global, Type::F32);
    let params = [
        f32p.clone(),
        f32p.clone(),
        f32p,
        Type::U32,
        Type::U32,
        Type::U32,
    ];
    let mut b = FunctionBuilder::kernel("mm", &params);
    let (a, bm, c) = (b.param(0), b.param(1), b.param(2));
    let (m, n, kk) = (b.param(3), b.param(4), b.param(5));
    let mut nest = TiledNest::begin(&mut b, &[m, n], &WORKGROUP, &[c])?;
    let k = Affine::sym(Sym::K);
    let affine = |x: Result<Affine, _>| x.map_err(|_| "not affine");
    let ops = [
        // a[i * K + k] and b[k * N + j]
        Operand {
            ptr: a,
            index: Ok(affine(nest.index(0).mul(&Affine::value(kk)))?.add(&k)),
        },
        Operand {
            ptr: bm,
            index: Ok(affine(k.mul(&Affine::value(n)))?.add(&nest.index(1))),
        },
    ];
    let zero = b.fconst(Type::F32, 0.0)?;
    let (acc, _plan) = nest.reduce(
        &mut b,
        Extent::Value(kk),
        zero,
        &ops,
        None,
        &mut |b, acc, xs| b.fma(xs[0], xs[1], acc),
        &mut |_, _, _, _| unreachable!("both indices are affine"),
    )?;
    let inside = nest.begin_inside(&mut b)?;
    let row = b.mul(nest.values[0], n)?;
    let at = b.add(row, nest.values[1])?;
    let p = b.ptr_add(c, at)?;
    b.store(p, acc)?;
    nest.end_inside(&mut b, inside)?;
    b.ret(&[])?;
    let mut module = Module::new("tiled_nest");
    module.functions.push(b.finish()?);
    verify_module(&module)?;
    Ok((module, nest.report))
}

fn run(args: &[String]) -> Result<(), Box<dyn std::error::Error>> {
    let sizes: Vec<usize> = args
        .iter()
        .filter(|a| !a.starts_with("--"))
        .map(|a| a.parse())
        .collect::<Result<_, _>>()?;
    let (m, n, k) = match sizes[..] {
        [] => (37, 45, 29),
        [m, n, k] => (m, n, k),
        _ => return Err("give M N K, or nothing".into()),
    };
    let (module, report) = build()?;
    println!("{}", report.join("\n"));
    if args.iter().any(|a| a == "--zir") {
        println!("{}", print_module(&module));
    }
    // Inputs from a fixed xorshift stream; the output poisoned with NaN.
    let mut s = 0x2545_f491_4f6c_dd1d_u64;
    let mut random = |len: usize| -> Vec<f32> {
        (0..len)
            .map(|_| {
                s ^= s << 13;
                s ^= s >> 7;
                s ^= s << 17;
                (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0
            })
            .collect()
    };
    let (av, bv) = (random(m * k), random(k * n));
    let bytes = |v: &[f32]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let mut bufs = vec![bytes(&av), bytes(&bv), bytes(&vec![f32::NAN; m * n])];
    let (grid, block) = nest::launch_grid(&[m as u64, n as u64], &WORKGROUP)?;
    let args = [
        Arg::Buffer(0),
        Arg::Buffer(1),
        Arg::Buffer(2),
        Arg::Int(m as i128),
        Arg::Int(n as i128),
        Arg::Int(k as i128),
    ];
    Interpreter::new(&module)?.launch("mm", grid, block, 0, &args, &mut bufs)?;
    let mut worst = 0f64;
    for (idx, w) in bufs[2].chunks_exact(4).enumerate() {
        let got = f64::from(f32::from_le_bytes([w[0], w[1], w[2], w[3]]));
        let (r, col) = (idx / n, idx % n);
        let want: f64 = (0..k)
            .map(|x| f64::from(av[r * k + x]) * f64::from(bv[x * n + col]))
            .sum();
        let err = (got - want).abs() / (1.0 + want.abs());
        if err.is_nan() || err > worst {
            worst = err; // a NaN (never written) sticks
        }
    }
    println!("{m}x{n}x{k} on the interpreter: worst relative error {worst:.2e} against float64");
    // NaN (an element never written) fails too.
    if worst.is_nan() || worst >= 1e-5 {
        return Err(format!("the tiled nest is off by {worst:e}").into());
    }
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("tiled_nest: {e}");
            ExitCode::FAILURE
        }
    }
}
