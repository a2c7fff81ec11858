//! The `.zir` parser: the exact inverse of [`crate::printer`]. The grammar is in
//! `docs/zir.md`.
//!
//! A hand-written lexer feeds a recursive-descent parser. Newlines end
//! instructions (one instruction per line); other whitespace is insignificant,
//! and newlines inside `(...)` and `[...]` are ignored. `;` starts a comment
//! that runs to the end of the line, except inside `[...]`, where it separates
//! an array's element type from its length (`[f32; 4]`).
//!
//! Value and block names (`v7`, `block3`) are matched by name, so a
//! hand-written file may number them in any order and use a name before its
//! definition; the parsed function is canonicalized at the end, so it equals
//! what [`crate::FunctionBuilder`] produces. The parser does not typecheck (the
//! verifier does) but rejects whatever it cannot represent: unknown
//! mnemonics and types, undefined or doubly defined names, constants that do
//! not fit their type, duplicate functions and attributes. It never panics.

use crate::builder::normalize_int;
use crate::entities::{BlockId, InstId, ValueId};
use crate::error::{Loc, ParseError};
use crate::imm::{self, Imm, ImmKind, Tok as ImmTok};
use crate::ir::{
    BlockCall, BlockData, Constraints, Function, FunctionKind, GlobalVar, InstData, KernelInfo,
    Module, ValueData, ValueDef,
};
use crate::op::*;
use crate::table::OpDef;
use crate::target::{Arch, PtxVersion};
use crate::types::{
    AddrSpace, FragKind, FragType, Layout, MmaShape, ScalarType, Type, MAX_TYPE_DEPTH,
};
use std::collections::{HashMap, HashSet};
use std::fmt;

/// Parse a module from `.zir` text.
pub fn parse_module(text: &str) -> Result<Module, ParseError> {
    parse_module_named(text, None)
}

/// Parse a module, naming `file` in error locations and instruction locations.
pub fn parse_module_named(text: &str, file: Option<&str>) -> Result<Module, ParseError> {
    let toks = lex(text);
    let mut p = Parser {
        toks,
        pos: 0,
        file: file.map(str::to_string),
    };
    p.module().map_err(|e| crate::version::explain(e, text))
}

// ------------------------------------------------------------------- lexer

#[derive(Clone, Debug, PartialEq)]
enum Tok {
    /// Identifiers, keywords and dotted mnemonics (`add`, `shfl.down`, `cp.async.cg.16`, `v3`).
    Ident(String),
    /// A number as written (`42`, `-7`, `1.5e-3`, `0x7fc00000`, `7.8`); interpreted by context.
    Num(String),
    /// A decoded string literal.
    Str(String),
    /// `@name`
    Global(String),
    Punct(char),
    Arrow,
    Newline,
    Eof,
    /// A lexical error; the parser reports it when it reaches it.
    Error(String),
}

#[derive(Clone, Debug)]
struct Token {
    tok: Tok,
    line: u32,
    col: u32,
}

impl fmt::Display for Tok {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Tok::Ident(s) | Tok::Num(s) => write!(f, "`{s}`"),
            Tok::Str(s) => write!(f, "string {}", crate::printer::quote(s)),
            Tok::Global(s) => write!(f, "`@{s}`"),
            Tok::Punct(c) => write!(f, "`{c}`"),
            Tok::Arrow => f.write_str("`->`"),
            Tok::Newline => f.write_str("end of line"),
            Tok::Eof => f.write_str("end of file"),
            Tok::Error(m) => f.write_str(m),
        }
    }
}

fn is_ident_start(c: char) -> bool {
    c.is_ascii_alphabetic() || c == '_'
}

fn is_ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.'
}

/// Characters allowed in a function name after `@`.
fn is_global_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '.' || c == '$'
}

fn lex(text: &str) -> Vec<Token> {
    let chars: Vec<char> = text.chars().collect();
    let mut toks = Vec::new();
    let (mut i, mut line, mut col) = (0usize, 1u32, 1u32);
    // Depth of `[`: inside, `;` is a separator rather than a comment.
    let mut square = 0u32;
    // Depth of `(` and `[`: inside, newlines are insignificant.
    let mut nest = 0u32;
    while i < chars.len() {
        let c = chars[i];
        let (tl, tc) = (line, col);
        let push = |toks: &mut Vec<Token>, tok: Tok| {
            toks.push(Token {
                tok,
                line: tl,
                col: tc,
            })
        };
        if c == '\n' {
            if nest == 0
                && !matches!(
                    toks.last(),
                    Some(Token {
                        tok: Tok::Newline,
                        ..
                    })
                )
            {
                push(&mut toks, Tok::Newline);
            }
            i += 1;
            line = line.saturating_add(1);
            col = 1;
            continue;
        }
        if c == ' ' || c == '\t' || c == '\r' {
            i += 1;
            col = col.saturating_add(1);
            continue;
        }
        if c == ';' && square == 0 {
            while i < chars.len() && chars[i] != '\n' {
                i += 1;
                col = col.saturating_add(1);
            }
            continue;
        }
        let start = i;
        let tok = if is_ident_start(c) {
            while i < chars.len() && is_ident_char(chars[i]) {
                i += 1;
            }
            Tok::Ident(chars[start..i].iter().collect())
        } else if c.is_ascii_digit()
            || (c == '-' && chars.get(i + 1).is_some_and(char::is_ascii_digit))
        {
            i += 1;
            let hex = c == '0' && matches!(chars.get(i), Some('x' | 'X'));
            while i < chars.len() {
                let d = chars[i];
                // An exponent's sign belongs to the number (`1e-7`), except in hex.
                let exp_sign =
                    !hex && (d == '+' || d == '-') && matches!(chars.get(i - 1), Some('e' | 'E'));
                if d.is_ascii_alphanumeric() || d == '.' || d == '_' || exp_sign {
                    i += 1;
                } else {
                    break;
                }
            }
            Tok::Num(chars[start..i].iter().collect())
        } else if c == '@' {
            i += 1;
            while i < chars.len() && is_global_char(chars[i]) {
                i += 1;
            }
            if i == start + 1 {
                Tok::Error("expected a function name after `@`".into())
            } else {
                Tok::Global(chars[start + 1..i].iter().collect())
            }
        } else if c == '"' {
            match lex_string(&chars, &mut i) {
                Ok(s) => Tok::Str(s),
                Err(m) => Tok::Error(m),
            }
        } else if c == '-' && chars.get(i + 1) == Some(&'>') {
            i += 2;
            Tok::Arrow
        } else if "(){}<>[];,:=-".contains(c) {
            i += 1;
            match c {
                '(' => nest += 1,
                '[' => {
                    nest += 1;
                    square += 1;
                }
                ')' => nest = nest.saturating_sub(1),
                ']' => {
                    nest = nest.saturating_sub(1);
                    square = square.saturating_sub(1);
                }
                _ => {}
            }
            Tok::Punct(c)
        } else {
            Tok::Error(format!("unexpected character {c:?}"))
        };
        let is_error = matches!(tok, Tok::Error(_));
        push(&mut toks, tok);
        if is_error {
            // The parser stops at the first error; nothing after it matters.
            return toks;
        }
        // Strings may contain newlines only as escapes, so columns advance by characters.
        col = col.saturating_add((i - start) as u32);
    }
    if !matches!(
        toks.last(),
        Some(Token {
            tok: Tok::Newline,
            ..
        })
    ) {
        toks.push(Token {
            tok: Tok::Newline,
            line,
            col,
        });
    }
    toks.push(Token {
        tok: Tok::Eof,
        line,
        col,
    });
    toks
}

/// Read a string literal starting at `chars[*i] == '"'`, leaving `*i` after the closing quote.
fn lex_string(chars: &[char], i: &mut usize) -> Result<String, String> {
    let mut out = String::new();
    *i += 1;
    loop {
        let Some(&c) = chars.get(*i) else {
            return Err("unterminated string".into());
        };
        *i += 1;
        match c {
            '"' => return Ok(out),
            '\n' => return Err("unterminated string (newline in string)".into()),
            '\\' => {
                let Some(&e) = chars.get(*i) else {
                    return Err("unterminated string".into());
                };
                *i += 1;
                match e {
                    '"' => out.push('"'),
                    '\\' => out.push('\\'),
                    'n' => out.push('\n'),
                    't' => out.push('\t'),
                    'u' => {
                        if chars.get(*i) != Some(&'{') {
                            return Err("expected `{` after `\\u` in string".into());
                        }
                        *i += 1;
                        let start = *i;
                        while chars.get(*i).is_some_and(char::is_ascii_hexdigit) {
                            *i += 1;
                        }
                        let hex: String = chars[start..*i].iter().collect();
                        if chars.get(*i) != Some(&'}') {
                            return Err("expected `}` to end `\\u{...}` in string".into());
                        }
                        *i += 1;
                        let ch = u32::from_str_radix(&hex, 16)
                            .ok()
                            .and_then(char::from_u32)
                            .ok_or_else(|| format!("invalid character escape `\\u{{{hex}}}`"))?;
                        out.push(ch);
                    }
                    other => return Err(format!("unknown escape `\\{other}` in string")),
                }
            }
            c => out.push(c),
        }
    }
}

// ------------------------------------------------------------------ parser

struct Parser {
    toks: Vec<Token>,
    pos: usize,
    file: Option<String>,
}

type PResult<T> = Result<T, ParseError>;

/// Whether `s` is a value name: `v` followed by digits.
fn is_value_name(s: &str) -> bool {
    s.len() > 1 && s.starts_with('v') && s[1..].bytes().all(|b| b.is_ascii_digit())
}

/// Whether `s` is a block name: `block` followed by digits.
fn is_block_name(s: &str) -> bool {
    s.len() > 5 && s.starts_with("block") && s[5..].bytes().all(|b| b.is_ascii_digit())
}

/// Parse an integer literal: optional `-`, then decimal digits or `0x` hex digits.
fn parse_int_text(s: &str) -> Option<i128> {
    let (neg, body) = match s.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, s),
    };
    let magnitude = if let Some(hex) = body.strip_prefix("0x").or(body.strip_prefix("0X")) {
        if hex.is_empty() || hex.len() > 32 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return None;
        }
        u128::from_str_radix(hex, 16).ok()?
    } else {
        if body.is_empty() || body.len() > 38 || !body.bytes().all(|b| b.is_ascii_digit()) {
            return None;
        }
        body.parse::<u128>().ok()?
    };
    let m = i128::try_from(magnitude).ok()?;
    Some(if neg { -m } else { m })
}

/// The inclusive range of an integer type.
fn int_range(s: ScalarType) -> (i128, i128) {
    let bits = s.bits();
    if s.is_signed() {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    } else {
        (0, (1i128 << bits) - 1)
    }
}

fn names<T: Copy>(all: &[T], name: fn(T) -> &'static str) -> String {
    all.iter()
        .map(|t| format!("`{}`", name(*t)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Per-function name tables while its body is parsed.
#[derive(Default)]
struct FnState {
    /// `None` until the value's definition is seen.
    values: Vec<Option<ValueData>>,
    /// Where each value was first mentioned, and its name (for "undefined value" errors).
    value_first: Vec<(Loc, String)>,
    value_names: HashMap<String, ValueId>,
    blocks: Vec<BlockData>,
    block_defined: Vec<bool>,
    block_first: Vec<(Loc, String)>,
    block_names: HashMap<String, BlockId>,
    insts: Vec<InstData>,
    layout: Vec<BlockId>,
}

impl FnState {
    fn value_ref(&mut self, name: &str, loc: Loc) -> ValueId {
        if let Some(v) = self.value_names.get(name) {
            return *v;
        }
        let v = ValueId::from_index(self.values.len());
        self.values.push(None);
        self.value_first.push((loc, name.to_string()));
        self.value_names.insert(name.to_string(), v);
        v
    }

    fn block_ref(&mut self, name: &str, loc: Loc) -> BlockId {
        if let Some(b) = self.block_names.get(name) {
            return *b;
        }
        let b = BlockId::from_index(self.blocks.len());
        self.blocks.push(BlockData::default());
        self.block_defined.push(false);
        self.block_first.push((loc, name.to_string()));
        self.block_names.insert(name.to_string(), b);
        b
    }
}

impl Parser {
    // ------------------------------------------------------------- tokens

    fn peek(&self) -> &Token {
        // The lexer always ends the stream with `Eof` (or an error), and `next` never moves past it.
        &self.toks[self.pos.min(self.toks.len() - 1)]
    }

    fn peek_at(&self, n: usize) -> &Token {
        &self.toks[(self.pos + n).min(self.toks.len() - 1)]
    }

    fn next(&mut self) -> Token {
        let t = self.peek().clone();
        if !matches!(t.tok, Tok::Eof | Tok::Error(_)) {
            self.pos += 1;
        }
        t
    }

    fn loc(&self, t: &Token) -> Loc {
        Loc {
            file: self.file.clone(),
            line: t.line,
            col: t.col,
        }
    }

    fn error_at(&self, t: &Token, message: impl Into<String>) -> ParseError {
        ParseError {
            loc: self.loc(t),
            message: message.into(),
        }
    }

    /// "expected X, found Y" at the current token (or the lexical error there).
    fn expected(&self, what: &str) -> ParseError {
        let t = self.peek();
        match &t.tok {
            Tok::Error(m) => self.error_at(t, m.clone()),
            other => self.error_at(t, format!("expected {what}, found {other}")),
        }
    }

    fn is_punct(&self, c: char) -> bool {
        self.peek().tok == Tok::Punct(c)
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.is_punct(c) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn expect_punct(&mut self, c: char, what: &str) -> PResult<Token> {
        if self.is_punct(c) {
            Ok(self.next())
        } else {
            Err(self.expected(what))
        }
    }

    fn skip_newlines(&mut self) {
        while self.peek().tok == Tok::Newline {
            self.pos += 1;
        }
    }

    fn peek_ident(&self) -> Option<&str> {
        match &self.peek().tok {
            Tok::Ident(s) => Some(s),
            _ => None,
        }
    }

    fn expect_ident(&mut self, what: &str) -> PResult<(String, Token)> {
        match &self.peek().tok {
            Tok::Ident(s) => {
                let s = s.clone();
                Ok((s, self.next()))
            }
            _ => Err(self.expected(what)),
        }
    }

    fn expect_keyword(&mut self, kw: &str) -> PResult<Token> {
        if self.peek_ident() == Some(kw) {
            Ok(self.next())
        } else {
            Err(self.expected(&format!("`{kw}`")))
        }
    }

    /// An unsigned integer immediate of at most `max`.
    fn expect_uint(&mut self, what: &str, max: u64) -> PResult<u64> {
        let t = self.peek().clone();
        let Tok::Num(text) = &t.tok else {
            return Err(self.expected(what));
        };
        let v = parse_int_text(text).ok_or_else(|| {
            self.error_at(
                &t,
                format!("expected {what}, found invalid integer `{text}`"),
            )
        })?;
        if v < 0 || v > i128::from(max) {
            return Err(self.error_at(
                &t,
                format!("`{text}` is out of range for {what} (0 to {max})"),
            ));
        }
        self.next();
        // In range of u64 by the check above.
        Ok(v as u64)
    }

    fn expect_u32(&mut self, what: &str) -> PResult<u32> {
        // Bounded by u32::MAX by expect_uint.
        Ok(self.expect_uint(what, u64::from(u32::MAX))? as u32)
    }

    /// The end of an instruction or header line: a newline (consumed), or a
    /// `}` / end of file that the caller handles.
    fn expect_line_end(&mut self, what: &str) -> PResult<()> {
        match self.peek().tok {
            Tok::Newline => {
                self.pos += 1;
                Ok(())
            }
            Tok::Punct('}') | Tok::Eof => Ok(()),
            _ => Err(self.expected(what)),
        }
    }

    // ------------------------------------------------------------- module

    fn module(&mut self) -> PResult<Module> {
        self.skip_newlines();
        self.expect_keyword("module")?;
        let name = match &self.peek().tok {
            Tok::Str(s) => {
                let s = s.clone();
                self.next();
                s
            }
            _ => return Err(self.expected("the module name as a string (`module \"name\"`)")),
        };
        let mut m = Module::new(name);
        let (mut seen_targets, mut seen_ptx, mut seen_version) = (false, false, false);
        loop {
            let t = self.peek().clone();
            match self.peek_ident() {
                Some("version") => {
                    if seen_version {
                        return Err(self.error_at(&t, "duplicate `version(...)`"));
                    }
                    seen_version = true;
                    self.next();
                    self.expect_punct('(', "`(` after `version`")?;
                    let vt = self.peek().clone();
                    let version = match &vt.tok {
                        Tok::Num(text) => text.parse::<u32>().ok(),
                        _ => None,
                    }
                    .ok_or_else(|| self.expected("a format version number (like `2`)"))?;
                    crate::version::check(version).map_err(|msg| self.error_at(&vt, msg))?;
                    self.next();
                    self.expect_punct(')', "`)` after the format version")?;
                }
                Some("targets") => {
                    if seen_targets {
                        return Err(self.error_at(&t, "duplicate `targets(...)`"));
                    }
                    seen_targets = true;
                    self.next();
                    self.expect_punct('(', "`(` after `targets`")?;
                    if !self.eat_punct(')') {
                        loop {
                            let (name, at) = self.expect_ident("a target arch (like `sm_80`)")?;
                            let arch = Arch::from_name(&name).ok_or_else(|| {
                                self.error_at(
                                    &at,
                                    format!(
                                        "unknown target arch `{name}` (expected one of {})",
                                        names(&Arch::ALL, Arch::name)
                                    ),
                                )
                            })?;
                            m.targets.push(arch);
                            if self.eat_punct(')') {
                                break;
                            }
                            self.expect_punct(',', "`,` or `)` after target arch")?;
                        }
                    }
                }
                Some("ptx") => {
                    if seen_ptx {
                        return Err(self.error_at(&t, "duplicate `ptx(...)`"));
                    }
                    seen_ptx = true;
                    self.next();
                    self.expect_punct('(', "`(` after `ptx`")?;
                    let vt = self.peek().clone();
                    let Tok::Num(text) = &vt.tok else {
                        return Err(self.expected("a PTX version (like `7.8`)"));
                    };
                    let version = text
                        .split_once('.')
                        .and_then(|(a, b)| {
                            let ok = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit());
                            if ok(a) && ok(b) {
                                Some(PtxVersion::new(a.parse().ok()?, b.parse().ok()?))
                            } else {
                                None
                            }
                        })
                        .ok_or_else(|| {
                            self.error_at(
                                &vt,
                                format!("invalid PTX version `{text}` (expected MAJOR.MINOR, like `7.8`)"),
                            )
                        })?;
                    self.next();
                    m.ptx_version = Some(version);
                    self.expect_punct(')', "`)` after PTX version")?;
                }
                _ => break,
            }
        }
        self.expect_line_end(
            "`version(...)`, `targets(...)`, `ptx(...)` or end of line after the module name",
        )?;
        let mut seen: HashSet<String> = HashSet::new();
        loop {
            self.skip_newlines();
            if self.peek().tok == Tok::Eof {
                break;
            }
            if self.peek_ident() == Some("global") {
                let g = self.global_var()?;
                m.globals.push(g);
                continue;
            }
            let (f, name_tok) = self.function()?;
            if !seen.insert(f.name.clone()) {
                return Err(self.error_at(&name_tok, format!("duplicate function `@{}`", f.name)));
            }
            m.functions.push(f);
        }
        Ok(m)
    }

    /// `global @name : space elem, count [= [lit, ...]]` (duplicates and
    /// sizes are the verifier's).
    fn global_var(&mut self) -> PResult<GlobalVar> {
        self.next();
        let t = self.peek().clone();
        let Tok::Global(name) = &t.tok else {
            return Err(self.expected("a global name (like `@table`) after `global`"));
        };
        let name = name.clone();
        self.next();
        self.expect_punct(':', "`:` and an address space after the global name")?;
        let (sp, st) = self.expect_ident("`constant` or `global`")?;
        let space = match sp.as_str() {
            "constant" => AddrSpace::Constant,
            "global" => AddrSpace::Global,
            _ => {
                return Err(self.error_at(
                    &st,
                    format!("a module global lives in `constant` or `global`, not `{sp}`"),
                ))
            }
        };
        let elem = self.ty(0)?;
        self.expect_punct(',', "`,` and an element count after the element type")?;
        let count = self.expect_uint("an element count", u64::MAX)?;
        let mut init = Vec::new();
        if self.eat_punct('=') {
            let lane = match elem.elem_scalar() {
                Some(s) => Type::Scalar(s),
                None => {
                    return Err(self.error_at(
                        &st,
                        format!("global @{name} of {elem} cannot have an initializer"),
                    ))
                }
            };
            self.expect_punct('[', "`[` to start the initializer")?;
            if !self.eat_punct(']') {
                loop {
                    let lt = self.peek().clone();
                    init.push(self.constant(&lt, std::slice::from_ref(&lane))?);
                    if self.eat_punct(']') {
                        break;
                    }
                    self.expect_punct(',', "`,` or `]` in the initializer")?;
                }
            }
        }
        self.expect_line_end("end of line after the global")?;
        Ok(GlobalVar {
            name,
            space,
            elem,
            count,
            init,
        })
    }

    // ----------------------------------------------------------- function

    fn function(&mut self) -> PResult<(Function, Token)> {
        let kw_tok = self.peek().clone();
        let kind = match self.peek_ident() {
            Some("host") => FunctionKind::Host,
            Some("device") => FunctionKind::Device,
            Some("kernel") => FunctionKind::Kernel(KernelInfo::default()),
            _ => return Err(self.expected("`host`, `device` or `kernel` to start a function")),
        };
        self.next();
        let name_tok = self.peek().clone();
        let name = match &name_tok.tok {
            Tok::Global(n) => n.clone(),
            _ => return Err(self.expected("a function name (like `@main`)")),
        };
        self.next();
        let mut f = Function::new(name, kind, Vec::new());
        f.loc = Some(self.loc(&kw_tok));
        self.skip_newlines();
        if self.peek().tok == Tok::Arrow {
            self.next();
            loop {
                self.skip_newlines();
                f.returns.push(self.ty(0)?);
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        self.attributes(&mut f)?;
        self.expect_punct('{', "a function attribute or `{`")?;
        self.body(&mut f)?;
        Ok((f, name_tok))
    }

    fn attributes(&mut self, f: &mut Function) -> PResult<()> {
        let mut seen: Vec<String> = Vec::new();
        loop {
            self.skip_newlines();
            let t = self.peek().clone();
            let Some(attr) = self.peek_ident().map(str::to_string) else {
                return Ok(());
            };
            if seen.contains(&attr) {
                return Err(self.error_at(&t, format!("duplicate attribute `{attr}`")));
            }
            let is_kernel = f.is_kernel();
            let kind_kw = f.kind.keyword();
            let c: &mut Constraints = &mut f.constraints;
            match attr.as_str() {
                "critical_path" => c.critical_path = true,
                "no_alloc" => c.no_alloc = true,
                "inline_always" => c.inline_always = true,
                "no_bounds_check" => c.no_bounds_check = true,
                "opt" => {
                    self.next();
                    self.expect_punct('(', "`(` after `opt`")?;
                    let (lvl, at) = self.expect_ident("an optimization level (like `O2`)")?;
                    c.opt_level = OptLevel::from_name(&lvl).ok_or_else(|| {
                        self.error_at(
                            &at,
                            format!(
                                "unknown optimization level `{lvl}` (expected one of {})",
                                names(OptLevel::ALL, OptLevel::name)
                            ),
                        )
                    })?;
                    self.expect_punct(')', "`)` after the optimization level")?;
                    seen.push(attr);
                    continue;
                }
                "max_threads" | "exact_threads" | "cluster" | "min_blocks" | "max_registers"
                | "shared_bytes" | "arch" => {
                    if !is_kernel {
                        return Err(self.error_at(
                            &t,
                            format!(
                                "attribute `{attr}` is only allowed on kernels, not on {kind_kw} functions"
                            ),
                        ));
                    }
                    self.next();
                    self.expect_punct('(', &format!("`(` after `{attr}`"))?;
                    let mut info = f.kind.kernel_info().cloned().unwrap_or_default();
                    match attr.as_str() {
                        "max_threads" | "exact_threads" | "cluster" => {
                            // Hand-written files may give 1 to 3 dimensions; missing ones are 1.
                            let mut dims = [1u32; 3];
                            for (n, d) in dims.iter_mut().enumerate() {
                                *d = self.expect_u32("a thread count")?;
                                if n == 2 || !self.eat_punct(',') {
                                    break;
                                }
                            }
                            if attr == "cluster" {
                                info.cluster = Some(dims);
                            } else if attr == "exact_threads" {
                                info.exact_threads = Some(dims);
                            } else {
                                info.max_threads = Some(dims);
                            }
                        }
                        "min_blocks" => info.min_blocks = Some(self.expect_u32("a block count")?),
                        "max_registers" => {
                            info.max_registers = Some(self.expect_u32("a register count")?)
                        }
                        "shared_bytes" => info.shared_bytes = self.expect_u32("a byte count")?,
                        _ => {
                            let (a, at) = self.expect_ident("an arch (like `sm_80`)")?;
                            info.arch = Some(Arch::from_name(&a).ok_or_else(|| {
                                self.error_at(
                                    &at,
                                    format!(
                                        "unknown arch `{a}` (expected one of {})",
                                        names(&Arch::ALL, Arch::name)
                                    ),
                                )
                            })?);
                        }
                    }
                    self.expect_punct(')', &format!("`)` to close `{attr}(...)`"))?;
                    f.kind = FunctionKind::Kernel(info);
                    seen.push(attr);
                    continue;
                }
                _ => {
                    return Err(self.error_at(
                        &t,
                        format!(
                            "unknown function attribute `{attr}` (expected `critical_path`, \
                             `no_alloc`, `inline_always`, `no_bounds_check`, `opt(..)`, \
                             `max_threads(..)`, `exact_threads(..)`, `cluster(..)`, `min_blocks(..)`, `max_registers(..)`, \
                             `shared_bytes(..)` or `arch(..)`)"
                        ),
                    ))
                }
            }
            self.next();
            seen.push(attr);
        }
    }

    fn body(&mut self, f: &mut Function) -> PResult<()> {
        let mut st = FnState::default();
        let mut current: Option<BlockId> = None;
        loop {
            self.skip_newlines();
            let t = self.peek().clone();
            match &t.tok {
                Tok::Punct('}') => {
                    self.next();
                    break;
                }
                Tok::Ident(s) if is_block_name(s) => {
                    let b = self.block_label(&mut st)?;
                    current = Some(b);
                }
                Tok::Ident(_) => {
                    let Some(b) = current else {
                        return Err(self.error_at(
                            &t,
                            format!(
                                "expected a block label (like `block0:`) before the first \
                                 instruction, found {}",
                                t.tok
                            ),
                        ));
                    };
                    self.instruction(&mut st, b)?;
                }
                _ => return Err(self.expected("a block label, an instruction or `}`")),
            }
        }
        self.finish_function(f, st)
    }

    /// `blockN(vA: T, ...):`
    fn block_label(&mut self, st: &mut FnState) -> PResult<BlockId> {
        let t = self.next();
        let Tok::Ident(name) = &t.tok else {
            return Err(self.error_at(&t, "expected a block label"));
        };
        let b = st.block_ref(name, self.loc(&t));
        if st.block_defined[b.index()] {
            return Err(self.error_at(&t, format!("duplicate definition of block `{name}`")));
        }
        st.block_defined[b.index()] = true;
        st.layout.push(b);
        if self.eat_punct('(') && !self.eat_punct(')') {
            let mut n = 0u32;
            loop {
                let (v, vt) = self.value_def(st)?;
                self.expect_punct(':', "`:` and a type after the block parameter")?;
                let ty = self.ty(0)?;
                self.define_value(st, v, &vt, ty, ValueDef::Param(b, n))?;
                st.blocks[b.index()].params.push(v);
                n += 1;
                if self.eat_punct(')') {
                    break;
                }
                self.expect_punct(',', "`,` or `)` after block parameter")?;
            }
        }
        self.expect_punct(':', &format!("`:` after block label `{name}`"))?;
        Ok(b)
    }

    /// A value name being defined; returns its id and token.
    fn value_def(&mut self, st: &mut FnState) -> PResult<(ValueId, Token)> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Ident(s) if is_value_name(s) => {
                self.next();
                Ok((st.value_ref(s, self.loc(&t)), t))
            }
            _ => Err(self.expected("a value name (like `v0`)")),
        }
    }

    fn define_value(
        &self,
        st: &mut FnState,
        v: ValueId,
        at: &Token,
        ty: Type,
        def: ValueDef,
    ) -> PResult<()> {
        let slot = &mut st.values[v.index()];
        if slot.is_some() {
            return Err(self.error_at(at, format!("duplicate definition of value {}", at.tok)));
        }
        *slot = Some(ValueData { ty, def });
        Ok(())
    }

    /// A value operand.
    fn value_use(&mut self, st: &mut FnState, what: &str) -> PResult<ValueId> {
        let t = self.peek().clone();
        match &t.tok {
            Tok::Ident(s) if is_value_name(s) => {
                self.next();
                Ok(st.value_ref(s, self.loc(&t)))
            }
            _ => Err(self.expected(what)),
        }
    }

    fn peek_is_value(&self, n: usize) -> bool {
        matches!(&self.peek_at(n).tok, Tok::Ident(s) if is_value_name(s))
    }

    /// Zero or more comma-separated value operands. A comma is taken only if a
    /// value follows it, so callers can parse immediates after the list.
    fn value_list(&mut self, st: &mut FnState) -> PResult<Vec<ValueId>> {
        let mut out = Vec::new();
        if !self.peek_is_value(0) {
            return Ok(out);
        }
        out.push(self.value_use(st, "an operand")?);
        while self.is_punct(',') && self.peek_is_value(1) {
            self.next();
            out.push(self.value_use(st, "an operand")?);
        }
        Ok(out)
    }

    /// `blockN` or `blockN(v1, v2)`.
    fn block_call(&mut self, st: &mut FnState) -> PResult<BlockCall> {
        let t = self.peek().clone();
        let block = match &t.tok {
            Tok::Ident(s) if is_block_name(s) => {
                self.next();
                st.block_ref(s, self.loc(&t))
            }
            _ => return Err(self.expected("a branch target (like `block1` or `block1(v2)`)")),
        };
        let mut args = Vec::new();
        if self.eat_punct('(') && !self.eat_punct(')') {
            loop {
                args.push(self.value_use(st, "a block argument (like `v3`)")?);
                if self.eat_punct(')') {
                    break;
                }
                self.expect_punct(',', "`,` or `)` after argument")?;
            }
        }
        Ok(BlockCall { block, args })
    }

    fn instruction(&mut self, st: &mut FnState, block: BlockId) -> PResult<()> {
        let start = self.peek().clone();
        let inst = InstId::from_index(st.insts.len());
        let mut results = Vec::new();
        let mut result_types = Vec::new();
        if self.peek_is_value(0) {
            loop {
                let (v, vt) = self.value_def(st)?;
                self.expect_punct(':', "`:` and a type after the result name")?;
                let ty = self.ty(0)?;
                self.define_value(
                    st,
                    v,
                    &vt,
                    ty.clone(),
                    ValueDef::Result(inst, results.len() as u32),
                )?;
                results.push(v);
                result_types.push(ty);
                if self.eat_punct('=') {
                    break;
                }
                self.expect_punct(',', "`,` or `=` after the result type")?;
            }
        }
        let (mnemonic, mt) = self.expect_ident("an instruction mnemonic")?;
        let (op, args, targets) = self.operation(st, &mnemonic, &mt, &result_types)?;
        // Operands last: a `,` may still continue them.
        let operands_last = op.def().syntax.trim_end().ends_with("{args}");
        if args.is_empty() || !operands_last {
            self.expect_line_end(&format!("end of line after `{mnemonic}` instruction"))?;
        } else {
            self.expect_line_end("`,` or end of line after operand")?;
        }
        st.insts.push(InstData {
            op,
            args,
            results,
            targets,
            loc: Some(self.loc(&start)),
        });
        st.blocks[block.index()].insts.push(inst);
        Ok(())
    }

    /// The op, operands and branch targets after the mnemonic `m` (token `mt`).
    fn operation(
        &mut self,
        st: &mut FnState,
        m: &str,
        mt: &Token,
        result_types: &[Type],
    ) -> PResult<(Op, Vec<ValueId>, Vec<BlockCall>)> {
        // Spelled by hand: `const`'s literal is read by its result type, and
        // `jump`/`br` take block targets rather than values or immediates.
        match m {
            "const" => {
                let c = self.constant(mt, result_types)?;
                return Ok((Op::Const(c), Vec::new(), Vec::new()));
            }
            "jump" => {
                let target = self.block_call(st)?;
                return Ok((Op::Jump, Vec::new(), vec![target]));
            }
            "br" => {
                let cond = self.value_use(st, "a branch condition (like `v0`)")?;
                self.expect_punct(',', "`,` and the then-target after the condition")?;
                let then_target = self.block_call(st)?;
                self.expect_punct(',', "`,` and the else-target after the then-target")?;
                let else_target = self.block_call(st)?;
                return Ok((Op::Branch, vec![cond], vec![then_target, else_target]));
            }
            _ => {}
        }
        // Everything else as its row in the instruction table declares.
        let (d, mut values) = crate::table::find_mnemonic(m).map_err(|e| self.error_at(mt, e))?;
        let frag = match result_types {
            [Type::Frag(f)] => Some(*f),
            _ => None,
        };
        let from_result = d
            .imms
            .iter()
            .flat_map(|x| x.defs)
            .find(|x| x.kind == ImmKind::ResultFrag);
        if let (Some(x), None) = (from_result, frag) {
            return Err(self.error_at(mt, format!("`{m}` needs exactly one result of {}", x.what)));
        }
        let args = self.operands(st, d, m, &mut values)?;
        let op = d
            .build(values, frag)
            .ok_or_else(|| self.error_at(mt, format!("malformed immediates in `{m}`")))?;
        Ok((op, args, Vec::new()))
    }

    /// The operands and immediates after mnemonic `m`, as row `d`'s template
    /// says (see [`crate::imm`]); the immediates are added to `values`.
    fn operands(
        &mut self,
        st: &mut FnState,
        d: &OpDef,
        m: &str,
        values: &mut imm::Named,
    ) -> PResult<Vec<ValueId>> {
        let toks = crate::table::template_of(d);
        let what = |name: &str| {
            d.imms
                .as_ref()
                .and_then(|x| x.def(name))
                .map_or("an immediate", |(_, x)| x.what)
        };
        // "the lane number" for "a lane number".
        let the = |w: &str| {
            let rest = w.strip_prefix("a ").or(w.strip_prefix("an "));
            rest.map_or(w.to_string(), |r| format!("the {r}"))
        };
        let mut args = Vec::new();
        let mut i = 0;
        while let Some(&t) = toks.get(i) {
            let prev = i.checked_sub(1).and_then(|p| toks.get(p)).copied();
            match t {
                ImmTok::Args => args = self.value_list(st)?,
                ImmTok::Comma => {
                    let next = match toks.get(i + 1) {
                        Some(ImmTok::Imm(n)) => format!(" and {}", what(n)),
                        _ => String::new(),
                    };
                    let after = match prev {
                        Some(ImmTok::Imm(p)) => format!(" after {}", the(what(p))),
                        Some(ImmTok::Args) => " after the operands".into(),
                        _ => String::new(),
                    };
                    self.expect_punct(',', &format!("`,`{next}{after}"))?;
                }
                ImmTok::Word(w) => {
                    if self.peek_ident() != Some(w) {
                        return Err(self.expected(&match prev {
                            Some(ImmTok::Args) => format!("`,` or `{w}` after operand"),
                            _ => format!("`{w}`"),
                        }));
                    }
                    self.next();
                }
                ImmTok::Imm(name) => {
                    let Some((_, x)) = d.imms.as_ref().and_then(|x| x.def(name)) else {
                        return Err(self.expected("an instruction the table declares"));
                    };
                    let v = match x.kind {
                        ImmKind::Int(max) => Imm::Int(self.expect_uint(x.what, max)?),
                        ImmKind::Type => Imm::Type(self.ty(0)?),
                        ImmKind::Global => {
                            let Tok::Global(g) = &self.peek().tok else {
                                return Err(self.expected(&format!("{} after `{m}`", x.what)));
                            };
                            let g = g.clone();
                            self.next();
                            Imm::Global(g)
                        }
                        _ => return Err(self.expected(x.what)),
                    };
                    values.push((name, v));
                }
                // An optional group, present when its keyword is next.
                ImmTok::Open => {
                    if !matches!(toks.get(i + 1), Some(ImmTok::Word(w)) if self.peek_ident() == Some(w))
                    {
                        while toks.get(i).is_some_and(|t| *t != ImmTok::Close) {
                            i += 1;
                        }
                    }
                }
                ImmTok::Close => {}
            }
            i += 1;
        }
        Ok(args)
    }

    /// The literal of `const`, interpreted by the result type.
    fn constant(&mut self, mt: &Token, result_types: &[Type]) -> PResult<ConstValue> {
        let s =
            match result_types {
                [Type::Scalar(s)] => *s,
                _ => return Err(self.error_at(
                    mt,
                    "`const` needs exactly one result of a scalar type (like `v0: i32 = const 1`)",
                )),
            };
        let t = self.peek().clone();
        if s.is_bool() {
            return match self.peek_ident() {
                Some("true") => {
                    self.next();
                    Ok(ConstValue::Bool(true))
                }
                Some("false") => {
                    self.next();
                    Ok(ConstValue::Bool(false))
                }
                _ => Err(self.expected("`true` or `false` for a bool constant")),
            };
        }
        if s.is_int() {
            let Tok::Num(text) = &t.tok else {
                return Err(self.expected(&format!("an integer literal for type {s}")));
            };
            let v = parse_int_text(text).ok_or_else(|| {
                self.error_at(
                    &t,
                    format!("expected an integer literal for type {s}, found `{text}`"),
                )
            })?;
            let (lo, hi) = int_range(s);
            if v < lo || v > hi {
                return Err(self.error_at(
                    &t,
                    format!("constant `{text}` is out of range for {s} ({lo} to {hi})"),
                ));
            }
            self.next();
            // Two's-complement bits of a value in range of the type; u64 above i64::MAX wraps as intended.
            return Ok(ConstValue::Int(normalize_int(s, v as i64)));
        }
        // Floats: decimal or integer literals, `inf`, `-inf`, `nan`, `nan:0x<bits>`.
        match &t.tok {
            Tok::Num(text) if text.trim_start_matches('-').starts_with("0x") => Err(self.error_at(
                &t,
                format!("expected a decimal float literal for type {s}, found `{text}` (write NaNs as `nan:0x...`)"),
            )),
            Tok::Num(text) => {
                let v = if let Some(i) = parse_int_text(text) {
                    i as f64
                } else {
                    text.parse::<f64>()
                        .ok()
                        .filter(|_| !text.contains(['i', 'I', 'n', 'N']))
                        .ok_or_else(|| {
                            self.error_at(
                                &t,
                                format!("expected a float literal for type {s}, found `{text}`"),
                            )
                        })?
                };
                self.next();
                Ok(ConstValue::float(v))
            }
            Tok::Ident(id) if id == "inf" => {
                self.next();
                Ok(ConstValue::float(f64::INFINITY))
            }
            Tok::Punct('-') if self.peek_at(1).tok == Tok::Ident("inf".into()) => {
                self.next();
                self.next();
                Ok(ConstValue::float(f64::NEG_INFINITY))
            }
            Tok::Ident(id) if id == "nan" => {
                self.next();
                if !self.eat_punct(':') {
                    return Ok(ConstValue::float(f64::NAN));
                }
                let bt = self.peek().clone();
                let bits = match &bt.tok {
                    Tok::Num(text) if text.starts_with("0x") => parse_int_text(text)
                        .and_then(|b| u64::try_from(b).ok())
                        .ok_or_else(|| {
                            self.error_at(&bt, format!("invalid NaN bits `{text}`"))
                        })?,
                    _ => return Err(self.expected("the NaN's bits in hex (like `nan:0x7ff8000000000000`)")),
                };
                if !f64::from_bits(bits).is_nan() {
                    return Err(self.error_at(
                        &bt,
                        format!("`0x{bits:016x}` is not the bit pattern of an f64 NaN"),
                    ));
                }
                self.next();
                Ok(ConstValue::Float(bits))
            }
            _ => Err(self.expected(&format!(
                "a float literal for type {s} (like `1.5`, `1e-7`, `inf`, `-inf` or `nan:0x...`)"
            ))),
        }
    }

    // -------------------------------------------------------------- types

    fn ty(&mut self, depth: u32) -> PResult<Type> {
        if depth > MAX_TYPE_DEPTH {
            return Err(self.error_at(
                &self.peek().clone(),
                format!("type nested more than {MAX_TYPE_DEPTH} levels deep"),
            ));
        }
        let t = self.peek().clone();
        if self.eat_punct('[') {
            let elem = self.ty(depth + 1)?;
            self.expect_punct(';', "`;` and a length after the array element type")?;
            let n = self.expect_uint("an array length", u64::MAX)?;
            self.expect_punct(']', "`]` after the array length")?;
            return Ok(Type::array(elem, n));
        }
        let Tok::Ident(name) = &t.tok else {
            return Err(self.expected("a type"));
        };
        if let Some(s) = ScalarType::from_name(name) {
            self.next();
            return Ok(Type::Scalar(s));
        }
        match name.as_str() {
            "tensormap" => {
                self.next();
                Ok(Type::TensorMap)
            }
            "vec" => {
                self.next();
                self.expect_punct('<', "`<` after `vec`")?;
                let et = self.peek().clone();
                let elem = match self.ty(depth + 1)? {
                    Type::Scalar(s) => s,
                    other => {
                        return Err(self.error_at(
                            &et,
                            format!("vector elements must be scalars, found `{other}`"),
                        ))
                    }
                };
                self.expect_punct(',', "`,` and a lane count after the vector element type")?;
                let n = self.expect_u32("a lane count")?;
                self.expect_punct('>', "`>` to close `vec<...>`")?;
                Ok(Type::Vector(elem, n))
            }
            "ptr" => {
                self.next();
                self.expect_punct('<', "`<` after `ptr`")?;
                let (space, st) = self.expect_ident("an address space")?;
                let space = AddrSpace::from_name(&space).ok_or_else(|| {
                    self.error_at(
                        &st,
                        format!(
                            "unknown address space `{space}` (expected one of {})",
                            names(&AddrSpace::ALL, AddrSpace::name)
                        ),
                    )
                })?;
                self.expect_punct(',', "`,` and the pointee type after the address space")?;
                let pointee = self.ty(depth + 1)?;
                self.expect_punct('>', "`>` to close `ptr<...>`")?;
                Ok(Type::ptr(space, pointee))
            }
            "frag" => {
                self.next();
                self.expect_punct('<', "`<` after `frag`")?;
                let (k, kt) = self.expect_ident("a fragment kind (`a`, `b` or `acc`)")?;
                let kind = FragKind::from_name(&k).ok_or_else(|| {
                    self.error_at(
                        &kt,
                        format!("unknown fragment kind `{k}` (expected `a`, `b` or `acc`)"),
                    )
                })?;
                self.expect_punct(',', "`,` and a shape after the fragment kind")?;
                let (sh, sht) = self.expect_ident("an MMA shape (like `m16n16k16`)")?;
                let shape = MmaShape::from_name(&sh).ok_or_else(|| {
                    self.error_at(
                        &sht,
                        format!(
                            "unknown MMA shape `{sh}` (expected one of {})",
                            names(&MmaShape::ALL, MmaShape::name)
                        ),
                    )
                })?;
                self.expect_punct(',', "`,` and an element type after the shape")?;
                let (e, e_tok) = self.expect_ident("a fragment element type")?;
                let elem = ScalarType::from_name(&e)
                    .ok_or_else(|| self.error_at(&e_tok, format!("unknown scalar type `{e}`")))?;
                let layout = if self.eat_punct(',') {
                    let (l, lt) = self.expect_ident("a layout (`row` or `col`)")?;
                    Some(Layout::from_name(&l).ok_or_else(|| {
                        self.error_at(
                            &lt,
                            format!("unknown layout `{l}` (expected `row` or `col`)"),
                        )
                    })?)
                } else {
                    None
                };
                self.expect_punct('>', "`,` or `>` in `frag<...>`")?;
                Ok(Type::Frag(FragType {
                    kind,
                    shape,
                    elem,
                    layout,
                }))
            }
            _ => Err(self.error_at(&t, format!("unknown type `{name}`"))),
        }
    }

    // ------------------------------------------------------------- finish

    /// Check that every name used was defined, move the arenas into `f` and canonicalize.
    fn finish_function(&self, f: &mut Function, st: FnState) -> PResult<()> {
        let undefined_value = st
            .values
            .iter()
            .position(Option::is_none)
            .map(|i| &st.value_first[i]);
        let undefined_block = st
            .block_defined
            .iter()
            .position(|d| !d)
            .map(|i| &st.block_first[i]);
        // Report whichever undefined name comes first in the text.
        let first = match (undefined_value, undefined_block) {
            (Some(v), Some(b)) if (b.0.line, b.0.col) < (v.0.line, v.0.col) => Some((b, "block")),
            (Some(v), _) => Some((v, "value")),
            (None, Some(b)) => Some((b, "block")),
            (None, None) => None,
        };
        if let Some(((loc, name), what)) = first {
            return Err(ParseError {
                loc: loc.clone(),
                message: format!("undefined {what} `{name}`"),
            });
        }
        f.values = st.values.into_iter().flatten().collect();
        f.blocks = st.blocks;
        f.insts = st.insts;
        f.layout = st.layout;
        f.canonicalize();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lexes_numbers_and_comments() {
        let toks = lex("a 1e-7 -3 0x7f ; comment [f32; 4]\n@f.x");
        let kinds: Vec<Tok> = toks.into_iter().map(|t| t.tok).collect();
        assert_eq!(
            kinds,
            vec![
                Tok::Ident("a".into()),
                Tok::Num("1e-7".into()),
                Tok::Num("-3".into()),
                Tok::Num("0x7f".into()),
                Tok::Newline,
                Tok::Global("f.x".into()),
                Tok::Newline,
                Tok::Eof
            ]
        );
        let toks = lex("[f32; 4] ; c");
        assert_eq!(toks[2].tok, Tok::Punct(';'));
        assert_eq!(toks.len(), 7);
    }

    #[test]
    fn int_text() {
        assert_eq!(parse_int_text("-128"), Some(-128));
        assert_eq!(parse_int_text("0xff"), Some(255));
        assert_eq!(
            parse_int_text("18446744073709551615"),
            Some(u64::MAX.into())
        );
        assert_eq!(parse_int_text("1.5"), None);
        assert_eq!(parse_int_text("-"), None);
        assert_eq!(int_range(ScalarType::I8), (-128, 127));
        assert_eq!(int_range(ScalarType::U64), (0, u64::MAX.into()));
    }
}
