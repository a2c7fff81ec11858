//! A tiny text language for loop nests, parsed into a [`NestSpec`]: what a
//! DSL embedding zyntax from Rust writes (see
//! `crates/zyntax-opt/examples/nest_dsl.rs`). One statement per line, `#`
//! starts a comment:
//!
//! ```text
//! nest matmul_bias_gelu
//! size M = 4096, N = 4096, K = 4096
//! buffer A bf16[M, K]
//! buffer B bf16[K, N]
//! buffer bias f32[N]
//! buffer C f32[M, N]
//! parallel i < M, j < N
//! reduce k < K
//! C[i, j] = gelu(sum(A[i, k] * B[k, j]) + bias[j])
//! ```
//!
//! Element types are `f32 f64 f16 bf16`; sizes are named integers (a
//! caller may override them: [`parse_with`]). The last line is the nest:
//! `out[index, ...] = expr` or `+= expr`. With reduction loops the
//! expression holds exactly one `sum(value)`: `value` is summed over the
//! reduction loops and the expression around it is the epilogue. Indices
//! are affine in the loops (`2*i + 1`, `k + N`); any other index is kept
//! as an opaque index, so the report says why the nest is not tiled.
//! Expressions: numbers, loads, `+ - * /`, unary `-`, `exp log sqrt rsqrt
//! tanh sin cos abs floor ceil`, `max min`, and `relu(x)` (`max(x, 0)`)
//! and `gelu(x)` (the tanh approximation) written out in those ops.

use super::{Access, Affine, Buffer, Expr, Index, Loop, LoopKind, NestSpec};
use std::collections::HashMap;
use std::fmt;
use zyntax_hir::{BinOp, Type, UnOp};

/// A syntax or naming error at `line:col` (1-based) of the nest text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ParseError {
    pub line: usize,
    pub col: usize,
    pub message: String,
}

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.line, self.col, self.message)
    }
}

impl std::error::Error for ParseError {}

/// Parses a nest written in the text language (module docs).
pub fn parse(src: &str) -> Result<NestSpec, ParseError> {
    parse_with(src, &[])
}

/// Parses a nest with some `size`s replaced (`("M", 64)`): the same program
/// at another problem size. A name that no `size` line declares is an error.
pub fn parse_with(src: &str, sizes: &[(&str, u64)]) -> Result<NestSpec, ParseError> {
    let mut p = Parser {
        name: None,
        sizes: HashMap::new(),
        loops: Vec::new(),
        buffers: Vec::new(),
        spec: None,
    };
    let mut last = 0;
    for (n, line) in src.lines().enumerate() {
        let text = line.split('#').next().unwrap_or("");
        let toks = lex(text, n + 1)?;
        if toks.is_empty() {
            continue;
        }
        last = n + 1;
        if p.spec.is_some() {
            return Err(err(&toks[0], "nothing may follow the nest's assignment"));
        }
        p.line(Cursor { toks, pos: 0 }, sizes)?;
    }
    for (name, _) in sizes {
        if !p.sizes.contains_key(*name) {
            return Err(ParseError {
                line: 1,
                col: 1,
                message: format!("size {name} is overridden but no `size` line declares it"),
            });
        }
    }
    p.spec.ok_or_else(|| ParseError {
        line: last.max(1),
        col: 1,
        message: "the nest has no assignment (`out[...] = expr`)".into(),
    })
}

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    Name(String),
    Int(u64),
    Float(f64),
    Punct(char),
    /// `+=`
    AddAssign,
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: usize,
    col: usize,
}

fn err(t: &Token, message: impl Into<String>) -> ParseError {
    ParseError {
        line: t.line,
        col: t.col,
        message: message.into(),
    }
}

fn lex(text: &str, line: usize) -> Result<Vec<Token>, ParseError> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        let col = i + 1;
        let at = |tok| Token { tok, line, col };
        if c.is_whitespace() {
            i += 1;
        } else if c.is_ascii_alphabetic() || c == '_' {
            let start = i;
            while i < chars.len() && (chars[i].is_ascii_alphanumeric() || chars[i] == '_') {
                i += 1;
            }
            out.push(at(Tok::Name(chars[start..i].iter().collect())));
        } else if c.is_ascii_digit()
            || (c == '.' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            let start = i;
            let mut float = false;
            while i < chars.len() {
                let d = chars[i];
                let exp_sign = (d == '-' || d == '+') && matches!(chars[i - 1], 'e' | 'E');
                if d.is_ascii_digit() || exp_sign {
                    i += 1;
                } else if d == '.' || d == 'e' || d == 'E' {
                    float = true;
                    i += 1;
                } else {
                    break;
                }
            }
            let s: String = chars[start..i].iter().collect();
            let bad = || ParseError {
                line,
                col,
                message: format!("bad number `{s}`"),
            };
            out.push(at(if float {
                Tok::Float(s.parse().map_err(|_| bad())?)
            } else {
                Tok::Int(s.parse().map_err(|_| bad())?)
            }));
        } else if c == '+' && chars.get(i + 1) == Some(&'=') {
            out.push(at(Tok::AddAssign));
            i += 2;
        } else if "[](),+-*/=<:".contains(c) {
            out.push(at(Tok::Punct(c)));
            i += 1;
        } else {
            return Err(ParseError {
                line,
                col,
                message: format!("unexpected character `{c}`"),
            });
        }
    }
    Ok(out)
}

struct Cursor {
    toks: Vec<Token>,
    pos: usize,
}

impl Cursor {
    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.tok)
    }
    /// The current token, or the last one (for an error at the line's end).
    fn here(&self) -> &Token {
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }
    fn next(&mut self) -> Option<Token> {
        let t = self.toks.get(self.pos).cloned();
        self.pos += 1;
        t
    }
    fn eat(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }
    fn expect(&mut self, c: char) -> Result<(), ParseError> {
        if self.eat(c) {
            Ok(())
        } else {
            Err(err(self.here(), format!("expected `{c}`")))
        }
    }
    fn name(&mut self, what: &str) -> Result<(String, Token), ParseError> {
        match self.next() {
            Some(t) => match &t.tok {
                Tok::Name(n) => Ok((n.clone(), t.clone())),
                _ => Err(err(&t, format!("expected {what}"))),
            },
            None => Err(err(
                self.here(),
                format!("expected {what} at the end of the line"),
            )),
        }
    }
    fn end(&self) -> Result<(), ParseError> {
        match self.toks.get(self.pos) {
            None => Ok(()),
            Some(t) => Err(err(t, "unexpected text at the end of the line")),
        }
    }
    /// The source-ish text of tokens `from..self.pos` (for opaque indices).
    fn text(&self, from: usize) -> String {
        let mut s = String::new();
        for t in &self.toks[from..self.pos.min(self.toks.len())] {
            match &t.tok {
                Tok::Name(n) => s.push_str(n),
                Tok::Int(v) => s.push_str(&v.to_string()),
                Tok::Float(v) => s.push_str(&v.to_string()),
                Tok::Punct(c) => s.push(*c),
                Tok::AddAssign => s.push_str("+="),
            }
        }
        s
    }
}

struct Parser {
    name: Option<String>,
    sizes: HashMap<String, u64>,
    loops: Vec<Loop>,
    buffers: Vec<Buffer>,
    spec: Option<NestSpec>,
}

/// An index while it is parsed: affine in the loops, or not.
enum Ix {
    Affine(Affine),
    Not,
}

impl Ix {
    fn constant(c: i64) -> Ix {
        Ix::Affine(Affine {
            terms: Vec::new(),
            constant: c,
        })
    }
    fn add(self, other: Ix, sign: i64) -> Ix {
        match (self, other) {
            (Ix::Affine(mut a), Ix::Affine(b)) => {
                a.constant += sign * b.constant;
                for (l, c) in b.terms {
                    match a.terms.iter_mut().find(|(m, _)| *m == l) {
                        Some(t) => t.1 += sign * c,
                        None => a.terms.push((l, sign * c)),
                    }
                }
                a.terms.retain(|&(_, c)| c != 0);
                Ix::Affine(a)
            }
            _ => Ix::Not,
        }
    }
    fn mul(self, other: Ix) -> Ix {
        let scale = |a: Affine, k: i64| Affine {
            terms: a.terms.into_iter().map(|(l, c)| (l, c * k)).collect(),
            constant: a.constant * k,
        };
        match (self, other) {
            (Ix::Affine(a), Ix::Affine(b)) if b.terms.is_empty() => {
                Ix::Affine(scale(a, b.constant))
            }
            (Ix::Affine(a), Ix::Affine(b)) if a.terms.is_empty() => {
                Ix::Affine(scale(b, a.constant))
            }
            _ => Ix::Not,
        }
    }
}

impl Parser {
    fn line(&mut self, mut c: Cursor, overrides: &[(&str, u64)]) -> Result<(), ParseError> {
        let first = c.toks[0].clone();
        let keyword = match &first.tok {
            Tok::Name(n) => n.clone(),
            _ => return Err(err(&first, "expected a statement")),
        };
        // An assignment starts with a buffer name and `[`.
        if c.toks.get(1).map(|t| &t.tok) == Some(&Tok::Punct('[')) {
            return self.assignment(c);
        }
        c.pos = 1;
        match keyword.as_str() {
            "nest" => {
                let (name, t) = c.name("the nest's name")?;
                if self.name.replace(name).is_some() {
                    return Err(err(&t, "the nest is named twice"));
                }
            }
            "size" => loop {
                let (name, t) = c.name("a size name")?;
                c.expect('=')?;
                let v = match c.next().map(|t| t.tok) {
                    Some(Tok::Int(v)) => v,
                    _ => return Err(err(&t, format!("size {name} needs an integer value"))),
                };
                let v = overrides
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map_or(v, |&(_, o)| o);
                if self.sizes.insert(name.clone(), v).is_some() {
                    return Err(err(&t, format!("size {name} is declared twice")));
                }
                if !c.eat(',') {
                    break;
                }
            },
            "buffer" => {
                let (name, t) = c.name("a buffer name")?;
                if self.buffers.iter().any(|b| b.name == name) {
                    return Err(err(&t, format!("buffer {name} is declared twice")));
                }
                let (ty, tt) = c.name("an element type (f32, f64, f16, bf16)")?;
                let elem = match ty.as_str() {
                    "f32" => Type::F32,
                    "f64" => Type::F64,
                    "f16" => Type::F16,
                    "bf16" => Type::BF16,
                    _ => return Err(err(&tt, format!("unknown element type `{ty}` (f32, f64, f16, bf16)"))),
                };
                c.expect('[')?;
                let mut shape = Vec::new();
                loop {
                    shape.push(self.extent(&mut c)?);
                    if !c.eat(',') {
                        break;
                    }
                }
                c.expect(']')?;
                self.buffers.push(Buffer { name, elem, shape });
            }
            "parallel" | "reduce" => {
                let kind = if keyword == "parallel" {
                    LoopKind::Parallel
                } else {
                    LoopKind::Reduction
                };
                loop {
                    let (name, t) = c.name("a loop name")?;
                    if self.loops.iter().any(|l| l.name == name) || self.sizes.contains_key(&name) {
                        return Err(err(&t, format!("`{name}` is already declared")));
                    }
                    c.expect('<')?;
                    let extent = self.extent(&mut c)?;
                    self.loops.push(Loop { name, extent, kind });
                    if !c.eat(',') {
                        break;
                    }
                }
            }
            _ => {
                return Err(err(
                    &first,
                    format!("unknown statement `{keyword}` (nest, size, buffer, parallel, reduce, or an assignment)"),
                ))
            }
        }
        c.end()
    }

    /// A size: an integer or a declared size name.
    fn extent(&self, c: &mut Cursor) -> Result<u64, ParseError> {
        let t = c.next().ok_or_else(|| err(c.here(), "expected a size"))?;
        match &t.tok {
            Tok::Int(v) => Ok(*v),
            Tok::Name(n) => self
                .sizes
                .get(n)
                .copied()
                .ok_or_else(|| err(&t, format!("unknown size `{n}`"))),
            _ => Err(err(&t, "expected a size")),
        }
    }

    fn assignment(&mut self, mut c: Cursor) -> Result<(), ParseError> {
        let (name, t) = c.name("the output buffer")?;
        let output = self.access(&mut c, &name, &t)?;
        let accumulate = match c.next().map(|t| t.tok) {
            Some(Tok::Punct('=')) => false,
            Some(Tok::AddAssign) => true,
            _ => return Err(err(c.here(), "expected `=` or `+=`")),
        };
        let mut sums = Vec::new();
        let mut e = self.expr(&mut c, &mut sums)?;
        c.end()?;
        let has_reduction = self.loops.iter().any(|l| l.kind == LoopKind::Reduction);
        let (value, epilogue) = match (has_reduction, sums.len()) {
            (false, 0) => {
                if accumulate {
                    e = Expr::binary(BinOp::Add, e, Expr::Load(output.clone()));
                }
                (e, None)
            }
            (false, _) => return Err(err(&t, "`sum(...)` needs a `reduce` loop")),
            (true, 1) => {
                if accumulate {
                    e = Expr::binary(BinOp::Add, e, Expr::Load(output.clone()));
                }
                let value = sums.pop().unwrap_or(Expr::Const(0.0));
                let epilogue = if e == Expr::Reduced { None } else { Some(e) };
                (value, epilogue)
            }
            (true, n) => {
                return Err(err(
                    &t,
                    format!(
                        "a nest with reduction loops sums exactly once (`sum(...)`), found {n}"
                    ),
                ))
            }
        };
        self.spec = Some(NestSpec {
            name: self.name.clone().unwrap_or_else(|| "nest".into()),
            loops: self.loops.clone(),
            buffers: self.buffers.clone(),
            output,
            value,
            epilogue,
        });
        Ok(())
    }

    /// `[index, ...]` after buffer `name`.
    fn access(&self, c: &mut Cursor, name: &str, t: &Token) -> Result<Access, ParseError> {
        let buffer = self
            .buffers
            .iter()
            .position(|b| b.name == name)
            .ok_or_else(|| err(t, format!("unknown buffer `{name}`")))?;
        c.expect('[')?;
        let mut index = Vec::new();
        loop {
            let from = c.pos;
            let ix = self.index_sum(c)?;
            index.push(match ix {
                Ix::Affine(a) => Index::Affine(a),
                Ix::Not => Index::Opaque(c.text(from)),
            });
            if !c.eat(',') {
                break;
            }
        }
        c.expect(']')?;
        Ok(Access { buffer, index })
    }

    fn index_sum(&self, c: &mut Cursor) -> Result<Ix, ParseError> {
        let mut acc = self.index_product(c)?;
        loop {
            let sign = if c.eat('+') {
                1
            } else if c.eat('-') {
                -1
            } else {
                return Ok(acc);
            };
            let rhs = self.index_product(c)?;
            acc = acc.add(rhs, sign);
        }
    }

    fn index_product(&self, c: &mut Cursor) -> Result<Ix, ParseError> {
        let mut acc = self.index_atom(c)?;
        loop {
            if c.eat('*') {
                let rhs = self.index_atom(c)?;
                acc = acc.mul(rhs);
            } else if c.eat('/') {
                self.index_atom(c)?;
                acc = Ix::Not;
            } else {
                return Ok(acc);
            }
        }
    }

    fn index_atom(&self, c: &mut Cursor) -> Result<Ix, ParseError> {
        let t = c.next().ok_or_else(|| err(c.here(), "expected an index"))?;
        match &t.tok {
            Tok::Int(v) => Ok(Ix::constant(i64::try_from(*v).unwrap_or(i64::MAX))),
            Tok::Punct('(') => {
                let ix = self.index_sum(c)?;
                c.expect(')')?;
                Ok(ix)
            }
            Tok::Punct('-') => Ok(Ix::constant(-1).mul(self.index_atom(c)?)),
            Tok::Name(n) => {
                if let Some(l) = self.loops.iter().position(|l| &l.name == n) {
                    return Ok(Ix::Affine(Affine::var(l)));
                }
                if let Some(&v) = self.sizes.get(n) {
                    return Ok(Ix::constant(i64::try_from(v).unwrap_or(i64::MAX)));
                }
                if self.buffers.iter().any(|b| &b.name == n) {
                    // An indirect index (`x[idx[i]]`): parsed, kept opaque.
                    self.access(c, n, &t)?;
                    return Ok(Ix::Not);
                }
                Err(err(&t, format!("unknown name `{n}` in an index")))
            }
            _ => Err(err(&t, "expected an index")),
        }
    }

    fn expr(&self, c: &mut Cursor, sums: &mut Vec<Expr>) -> Result<Expr, ParseError> {
        let mut acc = self.term(c, sums)?;
        loop {
            let op = if c.eat('+') {
                BinOp::Add
            } else if c.eat('-') {
                BinOp::Sub
            } else {
                return Ok(acc);
            };
            acc = Expr::binary(op, acc, self.term(c, sums)?);
        }
    }

    fn term(&self, c: &mut Cursor, sums: &mut Vec<Expr>) -> Result<Expr, ParseError> {
        let mut acc = self.unary(c, sums)?;
        loop {
            let op = if c.eat('*') {
                BinOp::Mul
            } else if c.eat('/') {
                BinOp::Div
            } else {
                return Ok(acc);
            };
            acc = Expr::binary(op, acc, self.unary(c, sums)?);
        }
    }

    fn unary(&self, c: &mut Cursor, sums: &mut Vec<Expr>) -> Result<Expr, ParseError> {
        if c.eat('-') {
            return Ok(Expr::unary(UnOp::Neg, self.unary(c, sums)?));
        }
        let t = c
            .next()
            .ok_or_else(|| err(c.here(), "expected an expression"))?;
        match &t.tok {
            Tok::Int(v) => Ok(Expr::Const(*v as f64)),
            Tok::Float(v) => Ok(Expr::Const(*v)),
            Tok::Punct('(') => {
                let e = self.expr(c, sums)?;
                c.expect(')')?;
                Ok(e)
            }
            Tok::Name(n) if c.peek() == Some(&Tok::Punct('[')) => {
                Ok(Expr::Load(self.access(c, n, &t)?))
            }
            Tok::Name(n) if c.peek() == Some(&Tok::Punct('(')) => self.call(c, n, &t, sums),
            Tok::Name(n) => match self.sizes.get(n) {
                Some(&v) => Ok(Expr::Const(v as f64)),
                None => Err(err(
                    &t,
                    format!("unknown name `{n}` (a buffer needs `[index]`)"),
                )),
            },
            _ => Err(err(&t, "expected an expression")),
        }
    }

    fn call(
        &self,
        c: &mut Cursor,
        f: &str,
        t: &Token,
        sums: &mut Vec<Expr>,
    ) -> Result<Expr, ParseError> {
        c.expect('(')?;
        let mut args = Vec::new();
        if !c.eat(')') {
            loop {
                // `sum` collects its argument; inside it no other sum may appear.
                let mut inner = Vec::new();
                let e = self.expr(c, &mut inner)?;
                if !inner.is_empty() && f == "sum" {
                    return Err(err(t, "`sum` inside `sum`: a nest sums once"));
                }
                sums.extend(inner);
                args.push(e);
                if !c.eat(',') {
                    break;
                }
            }
            c.expect(')')?;
        }
        let arity = |n: usize| -> Result<(), ParseError> {
            if args.len() == n {
                Ok(())
            } else {
                Err(err(
                    t,
                    format!("`{f}` takes {n} argument(s), got {}", args.len()),
                ))
            }
        };
        let unary = [
            ("exp", UnOp::Exp),
            ("log", UnOp::Log),
            ("sqrt", UnOp::Sqrt),
            ("rsqrt", UnOp::Rsqrt),
            ("tanh", UnOp::Tanh),
            ("sin", UnOp::Sin),
            ("cos", UnOp::Cos),
            ("abs", UnOp::Abs),
            ("floor", UnOp::Floor),
            ("ceil", UnOp::Ceil),
        ];
        if let Some(&(_, op)) = unary.iter().find(|(n, _)| *n == f) {
            arity(1)?;
            return Ok(Expr::unary(op, args.remove(0)));
        }
        match f {
            "max" | "min" => {
                arity(2)?;
                let op = if f == "max" { BinOp::Max } else { BinOp::Min };
                let b = args.remove(1);
                Ok(Expr::binary(op, args.remove(0), b))
            }
            "relu" => {
                arity(1)?;
                Ok(Expr::binary(BinOp::Max, args.remove(0), Expr::Const(0.0)))
            }
            "gelu" => {
                arity(1)?;
                Ok(gelu(args.remove(0)))
            }
            "sum" => {
                arity(1)?;
                sums.push(args.remove(0));
                Ok(Expr::Reduced)
            }
            _ => Err(err(t, format!("unknown function `{f}`"))),
        }
    }
}

/// `gelu(x) = 0.5·x·(1 + tanh(√(2/π)·(x + 0.044715·x³)))`.
pub fn gelu(x: Expr) -> Expr {
    let mul = |a, b| Expr::binary(BinOp::Mul, a, b);
    let add = |a, b| Expr::binary(BinOp::Add, a, b);
    let cube = mul(x.clone(), mul(x.clone(), x.clone()));
    let inner = mul(
        Expr::Const(0.797_884_560_802_865_4),
        add(x.clone(), mul(Expr::Const(0.044_715), cube)),
    );
    let t = add(Expr::Const(1.0), Expr::unary(UnOp::Tanh, inner));
    mul(mul(Expr::Const(0.5), x), t)
}
