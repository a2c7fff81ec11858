//! A front-end for a tiny elementwise language, embedding zyntax.
//!
//! A program is one assignment over float arrays of equal length:
//!
//! ```text
//! out = (a * 2.5 + b) * a - 1
//! ```
//!
//! Names on the right are input arrays (kernel parameters in order of first
//! use), numbers are `f32` constants, operators are `+ - * /` with the usual
//! precedence, unary minus and parentheses. The front-end parses the text,
//! builds one HIR kernel with [`zyntax::FunctionBuilder`] (each instruction
//! carrying the `line:col` of the operator that produced it), verifies it, runs
//! it on the reference interpreter and, with the `compute` feature, compiles it
//! to PTX and runs it on the GPU when one is present.
//!
//! ```text
//! cargo run -p zyntax --example tiny_dsl -- 'out = a * b + 1'
//! cargo run -p zyntax --features compute --example tiny_dsl -- 'out = a * b + 1'
//! ```

use std::fmt;
use zyntax::interp::{Arg, Interpreter};
use zyntax::{AddrSpace, BinOp, CmpOp, Dim, FunctionBuilder, Loc, Module, Type, ValueId};

/// An expression with the source column of its operator or token.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    Num(f64, u32),
    Var(String, u32),
    Neg(Box<Expr>, u32),
    Bin(BinOp, Box<Expr>, Box<Expr>, u32),
}

/// A program: `target = expr`.
#[derive(Debug, Clone, PartialEq)]
struct Program {
    target: String,
    expr: Expr,
    /// Input arrays in order of first use.
    inputs: Vec<String>,
}

/// An error at a column of the (one-line) source.
#[derive(Debug, Clone, PartialEq)]
struct DslError {
    col: u32,
    message: String,
}

impl fmt::Display for DslError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "1:{}: error: {}", self.col, self.message)
    }
}

/// Recursive-descent parser over the bytes of the source.
struct Parser<'s> {
    src: &'s [u8],
    pos: usize,
    inputs: Vec<String>,
}

impl<'s> Parser<'s> {
    fn col(&self) -> u32 {
        self.pos as u32 + 1
    }
    fn skip_ws(&mut self) {
        while self.src.get(self.pos).is_some_and(u8::is_ascii_whitespace) {
            self.pos += 1;
        }
    }
    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.src.get(self.pos).copied()
    }
    fn error<T>(&mut self, expected: &str) -> Result<T, DslError> {
        let found = match self.peek() {
            Some(c) => format!("`{}`", c as char),
            None => "end of input".to_string(),
        };
        Err(DslError {
            col: self.col(),
            message: format!("expected {expected}, found {found}"),
        })
    }
    fn ident(&mut self) -> Option<(String, u32)> {
        self.skip_ws();
        let start = self.pos;
        while self
            .src
            .get(self.pos)
            .is_some_and(|c| c.is_ascii_alphanumeric() || *c == b'_')
        {
            self.pos += 1;
        }
        let word = std::str::from_utf8(&self.src[start..self.pos]).ok()?;
        let first_ok = word.bytes().next().is_some_and(|c| !c.is_ascii_digit());
        if first_ok {
            Some((word.to_string(), start as u32 + 1))
        } else {
            self.pos = start;
            None
        }
    }
    fn program(mut self) -> Result<Program, DslError> {
        let Some((target, _)) = self.ident() else {
            return self.error("the output array's name");
        };
        if self.peek() != Some(b'=') {
            return self.error("`=`");
        }
        self.pos += 1;
        let expr = self.sum()?;
        if self.peek().is_some() {
            return self.error("an operator or the end of the program");
        }
        if self.inputs.contains(&target) {
            return Err(DslError {
                col: 1,
                message: format!("`{target}` is both the output and an input"),
            });
        }
        Ok(Program {
            target,
            expr,
            inputs: self.inputs,
        })
    }
    fn sum(&mut self) -> Result<Expr, DslError> {
        let mut lhs = self.product()?;
        while let Some(op @ (b'+' | b'-')) = self.peek() {
            let col = self.col();
            self.pos += 1;
            let rhs = self.product()?;
            let op = if op == b'+' { BinOp::Add } else { BinOp::Sub };
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), col);
        }
        Ok(lhs)
    }
    fn product(&mut self) -> Result<Expr, DslError> {
        let mut lhs = self.unary()?;
        while let Some(op @ (b'*' | b'/')) = self.peek() {
            let col = self.col();
            self.pos += 1;
            let rhs = self.unary()?;
            let op = if op == b'*' { BinOp::Mul } else { BinOp::Div };
            lhs = Expr::Bin(op, Box::new(lhs), Box::new(rhs), col);
        }
        Ok(lhs)
    }
    fn unary(&mut self) -> Result<Expr, DslError> {
        match self.peek() {
            Some(b'-') => {
                let col = self.col();
                self.pos += 1;
                Ok(Expr::Neg(Box::new(self.unary()?), col))
            }
            Some(b'(') => {
                self.pos += 1;
                let e = self.sum()?;
                if self.peek() != Some(b')') {
                    return self.error("`)`");
                }
                self.pos += 1;
                Ok(e)
            }
            Some(c) if c.is_ascii_digit() || c == b'.' => {
                let start = self.pos;
                while self
                    .src
                    .get(self.pos)
                    .is_some_and(|c| c.is_ascii_digit() || *c == b'.')
                {
                    self.pos += 1;
                }
                let text = std::str::from_utf8(&self.src[start..self.pos]).unwrap_or("");
                match text.parse() {
                    Ok(v) => Ok(Expr::Num(v, start as u32 + 1)),
                    Err(_) => Err(DslError {
                        col: start as u32 + 1,
                        message: format!("`{text}` is not a number"),
                    }),
                }
            }
            _ => match self.ident() {
                Some((name, col)) => {
                    if !self.inputs.contains(&name) {
                        self.inputs.push(name.clone());
                    }
                    Ok(Expr::Var(name, col))
                }
                None => self.error("a number, a name, `-` or `(`"),
            },
        }
    }
}

fn parse(src: &str) -> Result<Program, DslError> {
    Parser {
        src: src.as_bytes(),
        pos: 0,
        inputs: Vec::new(),
    }
    .program()
}

/// The kernel `name(inputs..., out, n: u32)`: thread `i < n` computes `out[i]`.
fn lower(p: &Program, name: &str, file: &str) -> Result<Module, zyntax::BuildError> {
    let arr = Type::ptr(AddrSpace::Global, Type::F32);
    let mut params = vec![arr.clone(); p.inputs.len() + 1];
    params.push(Type::U32);
    let mut b = FunctionBuilder::kernel(name, &params);
    let n = b.param(p.inputs.len() + 1);
    let loc = |col: u32| {
        Some(Loc {
            file: Some(file.to_string()),
            line: 1,
            col,
        })
    };
    b.set_loc(loc(1));
    let (tid, bid, bdim) = (
        b.thread_idx(Dim::X)?,
        b.block_idx(Dim::X)?,
        b.block_dim(Dim::X)?,
    );
    let base = b.mul(bid, bdim)?;
    let i = b.add(base, tid)?;
    let inside = b.cmp(CmpOp::Lt, i, n)?;
    let frame = b.begin_if(inside, &[])?;
    let value = emit(&mut b, p, &p.expr, i, &loc)?;
    b.set_loc(loc(1));
    let out = b.ptr_add(b.param(p.inputs.len()), i)?;
    b.store(out, value)?;
    b.end_if(frame, &[])?;
    b.ret(&[])?;
    let mut m = Module::new(name);
    m.functions.push(b.finish()?);
    Ok(m)
}

fn emit(
    b: &mut FunctionBuilder,
    p: &Program,
    e: &Expr,
    i: ValueId,
    loc: &dyn Fn(u32) -> Option<Loc>,
) -> Result<ValueId, zyntax::BuildError> {
    match e {
        Expr::Num(v, col) => {
            b.set_loc(loc(*col));
            b.fconst(Type::F32, *v)
        }
        Expr::Var(name, col) => {
            b.set_loc(loc(*col));
            let k = p.inputs.iter().position(|x| x == name).unwrap_or(0);
            let ptr = b.ptr_add(b.param(k), i)?;
            b.load(ptr)
        }
        Expr::Neg(x, col) => {
            let x = emit(b, p, x, i, loc)?;
            b.set_loc(loc(*col));
            b.unary(zyntax::hir::UnOp::Neg, x)
        }
        Expr::Bin(op, l, r, col) => {
            let (l, r) = (emit(b, p, l, i, loc)?, emit(b, p, r, i, loc)?);
            b.set_loc(loc(*col));
            b.binary(*op, l, r)
        }
    }
}

/// The program's value at one element, in f32 as the kernel computes it.
fn eval(p: &Program, e: &Expr, inputs: &[Vec<f32>], i: usize) -> f32 {
    match e {
        Expr::Num(v, _) => *v as f32,
        Expr::Var(name, _) => inputs[p.inputs.iter().position(|x| x == name).unwrap_or(0)][i],
        Expr::Neg(x, _) => -eval(p, x, inputs, i),
        Expr::Bin(op, l, r, _) => {
            let (l, r) = (eval(p, l, inputs, i), eval(p, r, inputs, i));
            match op {
                BinOp::Add => l + r,
                BinOp::Sub => l - r,
                BinOp::Mul => l * r,
                _ => l / r,
            }
        }
    }
}

const BLOCK: u32 = 128;

fn to_bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect()
}

/// Runs the kernel on the interpreter; `out` starts as NaN so a missed element shows.
fn run_interp(m: &Module, name: &str, inputs: &[Vec<f32>]) -> Result<Vec<f32>, String> {
    let n = inputs.first().map_or(0, Vec::len);
    let mut bufs: Vec<Vec<u8>> = inputs.iter().map(|v| to_bytes(v)).collect();
    bufs.push(to_bytes(&vec![f32::NAN; n]));
    let mut args: Vec<Arg> = (0..bufs.len()).map(Arg::Buffer).collect();
    args.push(Arg::Int(n as i128));
    let grid = (n as u32).div_ceil(BLOCK).max(1);
    Interpreter::new(m)
        .and_then(|it| it.launch(name, [grid, 1, 1], [BLOCK, 1, 1], 0, &args, &mut bufs))
        .map_err(|e| e.to_string())?;
    Ok(from_bytes(&bufs[inputs.len()]))
}

/// Compiles to PTX and runs on GPU 0.
#[cfg(feature = "compute")]
fn run_gpu(m: &Module, name: &str, inputs: &[Vec<f32>]) -> Result<Vec<f32>, String> {
    use zyntax::cuda::{quick_run, QuickArg};
    // sm_70 PTX: the driver JIT-compiles it for whatever device is present.
    let opts = zyntax::ptx::Options::new(zyntax::Arch::Sm70);
    let out = zyntax::ptx::compile_ptx(m, &opts).map_err(|e| e.to_string())?;
    let n = inputs.first().map_or(0, Vec::len);
    let mut args: Vec<QuickArg> = inputs
        .iter()
        .map(|v| QuickArg::Buffer(to_bytes(v)))
        .collect();
    args.push(QuickArg::Buffer(to_bytes(&vec![f32::NAN; n])));
    args.push(QuickArg::Int(n as i128));
    let grid = (n as u32).div_ceil(BLOCK).max(1);
    quick_run(&out.ptx, name, [grid, 1, 1], [BLOCK, 1, 1], &mut args).map_err(|e| e.to_string())?;
    match &args[inputs.len()] {
        QuickArg::Buffer(b) => Ok(from_bytes(b)),
        _ => Err("the output is not a buffer".into()),
    }
}

fn main() {
    let src = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "out = (a * 2.5 + b) * a - 1".to_string());
    let program = match parse(&src) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("<program>:{e}");
            std::process::exit(1);
        }
    };
    let m = match lower(&program, "elementwise", "<program>") {
        Ok(m) => m,
        Err(e) => {
            eprintln!("error: {e}");
            std::process::exit(1);
        }
    };
    if let Err(e) = zyntax::verify_module(&m) {
        eprintln!("{e}");
        std::process::exit(1);
    }
    print!("{}", zyntax::print_module(&m));
    let n = 1000;
    let inputs: Vec<Vec<f32>> = (0..program.inputs.len())
        .map(|k| {
            (0..n)
                .map(|i| ((i * 7 + k * 13) % 97) as f32 / 10.0)
                .collect()
        })
        .collect();
    let want: Vec<f32> = (0..n)
        .map(|i| eval(&program, &program.expr, &inputs, i))
        .collect();
    let got = run_interp(&m, "elementwise", &inputs).unwrap_or_else(|e| {
        eprintln!("interpreter: {e}");
        std::process::exit(1)
    });
    println!(
        "interpreter: {}",
        if got == want { "matches" } else { "DIFFERS" }
    );
    #[cfg(feature = "compute")]
    if zyntax::gpu_available() {
        match run_gpu(&m, "elementwise", &inputs) {
            Ok(g) => println!("gpu: {}", if g == want { "matches" } else { "DIFFERS" }),
            Err(e) => println!("gpu: {e}"),
        }
    }
    if !zyntax::gpu_available() {
        println!(
            "gpu: none here (build has compute: {})",
            zyntax::HAS_COMPUTE
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Fresh pseudo-random inputs in [-4, 4) from the clock.
    fn random_inputs(count: usize, n: usize) -> Vec<Vec<f32>> {
        let mut s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
            | 1;
        eprintln!("seed {s}");
        let mut next = move || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s >> 40) as f32 / (1u64 << 24) as f32 * 8.0 - 4.0
        };
        (0..count)
            .map(|_| (0..n).map(|_| next()).collect())
            .collect()
    }

    const PROGRAMS: [&str; 3] = [
        "out = (a * 2.5 + b) * a - 1",
        "y = -x / (x * x + 1.5)",
        "r = a - b - c * (a + 0.25) / 2",
    ];

    #[test]
    fn interpreter_matches_the_reference() {
        for src in PROGRAMS {
            let p = parse(src).unwrap();
            let m = lower(&p, "k", "t.dsl").unwrap();
            zyntax::verify_module(&m).unwrap();
            // 1000 is not a multiple of the block: the bounds guard matters.
            let inputs = random_inputs(p.inputs.len(), 1000);
            let got = run_interp(&m, "k", &inputs).unwrap();
            for (i, g) in got.iter().enumerate() {
                let want = eval(&p, &p.expr, &inputs, i);
                assert_eq!(g.to_bits(), want.to_bits(), "{src} at {i}: {g} vs {want}");
            }
        }
    }

    #[test]
    fn instructions_carry_dsl_columns() {
        let p = parse("out = a *  b").unwrap();
        let m = lower(&p, "k", "t.dsl").unwrap();
        let text = zyntax::print_module(&m);
        assert!(text.contains("mul"), "{text}");
        let f = &m.functions[0];
        let cols: Vec<u32> = f
            .insts
            .iter()
            .filter_map(|i| i.loc.as_ref())
            .map(|l| l.col)
            .collect();
        // `a` at 7, `*` at 9, `b` at 12.
        for c in [7, 9, 12] {
            assert!(cols.contains(&c), "{cols:?}");
        }
    }

    #[test]
    fn syntax_errors_name_the_column_and_what_was_expected() {
        let cases = [
            (
                "out = a +",
                10,
                "expected a number, a name, `-` or `(`, found end of input",
            ),
            ("out a", 5, "expected `=`, found `a`"),
            ("out = (a + b", 13, "expected `)`"),
            (
                "out = a b",
                9,
                "expected an operator or the end of the program, found `b`",
            ),
            ("a = a + 1", 1, "`a` is both the output and an input"),
        ];
        for (src, col, msg) in cases {
            let e = parse(src).unwrap_err();
            assert_eq!(e.col, col, "{src}: {e}");
            assert!(e.message.contains(msg), "{src}: {e}");
        }
    }

    #[cfg(feature = "compute")]
    #[test]
    fn compiles_to_ptx() {
        let p = parse(PROGRAMS[0]).unwrap();
        let m = lower(&p, "k", "t.dsl").unwrap();
        let out =
            zyntax::ptx::compile_ptx(&m, &zyntax::ptx::Options::new(zyntax::Arch::Sm80)).unwrap();
        assert_eq!(out.kernels, ["k"]);
        assert!(out.ptx.contains(".entry k"), "{}", out.ptx);
    }

    #[cfg(feature = "compute")]
    #[test]
    #[ignore = "needs a GPU"]
    fn gpu_matches_the_reference() {
        for src in PROGRAMS {
            let p = parse(src).unwrap();
            let m = lower(&p, "k", "t.dsl").unwrap();
            let inputs = random_inputs(p.inputs.len(), 100_003);
            let got = run_gpu(&m, "k", &inputs).unwrap();
            for (i, g) in got.iter().enumerate() {
                let want = eval(&p, &p.expr, &inputs, i);
                // The GPU may contract a*b+c into an fma: allow an ulp-scale error.
                let tol = 1e-5 * want.abs().max(1.0);
                assert!((g - want).abs() <= tol, "{src} at {i}: {g} vs {want}");
            }
        }
    }
}
