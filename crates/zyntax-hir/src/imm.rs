//! Instruction immediates as data. A row of the instruction table
//! ([`crate::table`]) declares its immediates ([`Imms`]: each one's name, what
//! it is for messages and its [`ImmKind`]) and where they are written: inside
//! the mnemonic pattern (`atomic.add.<scope>`, `ldmatrix.x<num>[.trans]`,
//! `setmaxnreg.<inc|dec>.<count>`) or in the operand template after it
//! (`{args}, <lane>`, `<elem>, <count>[align <align>]`). The parser and the
//! printer are driven by these declarations; an enum's spellings are declared
//! once, by the enum (`op.rs`).
//!
//! Pattern segments, separated by `.`: a literal; `<name>` or `prefix<name>`,
//! an immediate; `<on|off>`, a bool spelled either way; `[.name]`, a bool
//! written as the optional segment `name`. Template tokens: `{args}` (the value
//! operands), `,`, a keyword, `<name>`, and `[keyword <name>]` (written only
//! when the integer is not 0).

use crate::op::Op;
use crate::types::{FragType, Layout, Type};

/// How an immediate is written.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum ImmKind {
    /// One of the enum's spellings.
    Enum(&'static [&'static str]),
    /// An unsigned integer of at most this value (decimal digits inside a mnemonic).
    Int(u64),
    /// A bool (a `[.name]` or `<on|off>` segment of the mnemonic).
    Bool,
    /// A type.
    Type,
    /// A module-level name, `@name`.
    Global,
    /// Not written: the fragment type of the instruction's one result.
    ResultFrag,
}

/// One immediate of an instruction.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub struct ImmDef {
    /// The field of the `Op` variant, as named in the pattern or template.
    pub name: &'static str,
    /// What it is, for error messages ("scope", "a lane number").
    pub what: &'static str,
    pub kind: ImmKind,
}

/// An immediate's value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Imm {
    /// Index into the enum's spellings.
    Enum(usize),
    Int(u64),
    Bool(bool),
    Type(Type),
    Global(String),
    Frag(FragType),
}

/// Immediates by name, as the parser read them.
pub type Named = Vec<(&'static str, Imm)>;

/// A Rust type that an immediate holds.
pub trait ImmValue: Sized {
    const KIND: ImmKind;
    fn from_imm(i: Imm) -> Option<Self>;
    fn to_imm(&self) -> Imm;
}

/// The immediates of a row and the conversions between them and its `Op`
/// (written by [`imms!`](crate::imms) from the variant's field list).
#[derive(Copy, Clone, Debug)]
pub struct Imms {
    /// In field order.
    pub defs: &'static [ImmDef],
    /// The op from the values in `defs` order (`None` if one has the wrong kind).
    pub build: fn(&mut std::vec::IntoIter<Imm>) -> Option<Op>,
    /// The values of an op of this row, in `defs` order.
    pub values: fn(&Op) -> Vec<Imm>,
}

impl Imms {
    pub fn def(&self, name: &str) -> Option<(usize, &'static ImmDef)> {
        self.defs.iter().enumerate().find(|(_, d)| d.name == name)
    }
}

/// `imms!(Variant(field: Type = "what"))`, `imms!(Variant { field: Type = "what", ...; fixed: expr, ... })`
/// or `imms!(Variant(Struct { field: Type = "what", ... }))`: the [`Imms`] of
/// a row whose `Op` variant holds those fields (the fixed ones are the row's own).
#[macro_export]
macro_rules! imms {
    // The declarations of the immediates, one per field, in order.
    (@defs $($f:ident : $t:ty = $what:literal),*) => {{
        const D: &[$crate::imm::ImmDef] = &[$($crate::imm::ImmDef {
            name: stringify!($f),
            what: $what,
            kind: <$t as $crate::imm::ImmValue>::KIND,
        }),*];
        D
    }};
    ($v:ident ( $f:ident : $t:ty = $what:literal )) => {
        $crate::imm::Imms {
            defs: $crate::imms!(@defs $f: $t = $what),
            build: |it| {
                Some($crate::op::Op::$v(<$t as $crate::imm::ImmValue>::from_imm(
                    it.next()?,
                )?))
            },
            values: |op| match op {
                $crate::op::Op::$v($f) => vec![$crate::imm::ImmValue::to_imm($f)],
                _ => Vec::new(),
            },
        }
    };
    ($v:ident ( $s:ident { $($f:ident : $t:ty = $what:literal),* $(,)? } )) => {
        $crate::imm::Imms {
            defs: $crate::imms!(@defs $($f: $t = $what),*),
            build: |it| {
                Some($crate::op::Op::$v($s {
                    $($f: <$t as $crate::imm::ImmValue>::from_imm(it.next()?)?,)*
                }))
            },
            values: |op| match op {
                $crate::op::Op::$v($s { $($f,)* }) => {
                    vec![$($crate::imm::ImmValue::to_imm($f)),*]
                }
                _ => Vec::new(),
            },
        }
    };
    ($v:ident { $($f:ident : $t:ty = $what:literal),* $(; $($g:ident : $e:expr),*)? $(,)? }) => {
        $crate::imm::Imms {
            defs: $crate::imms!(@defs $($f: $t = $what),*),
            build: |it| {
                Some($crate::op::Op::$v {
                    $($f: <$t as $crate::imm::ImmValue>::from_imm(it.next()?)?,)*
                    $($($g: $e,)*)?
                })
            },
            values: |op| match op {
                $crate::op::Op::$v { $($f,)* .. } => vec![$($crate::imm::ImmValue::to_imm($f)),*],
                _ => Vec::new(),
            },
        }
    };
}

impl ImmValue for u32 {
    const KIND: ImmKind = ImmKind::Int(u32::MAX as u64);
    fn from_imm(i: Imm) -> Option<Self> {
        match i {
            Imm::Int(v) => u32::try_from(v).ok(),
            _ => None,
        }
    }
    fn to_imm(&self) -> Imm {
        Imm::Int(u64::from(*self))
    }
}

/// `ImmValue` for a type that is one `Imm` variant's payload as it is.
macro_rules! imm_payload {
    ($($t:ty => $kind:expr, $variant:ident;)+) => {$(
        impl ImmValue for $t {
            const KIND: ImmKind = $kind;
            fn from_imm(i: Imm) -> Option<Self> {
                match i {
                    Imm::$variant(v) => Some(v),
                    _ => None,
                }
            }
            fn to_imm(&self) -> Imm {
                Imm::$variant(self.clone())
            }
        }
    )+};
}

imm_payload! {
    u64 => ImmKind::Int(u64::MAX), Int;
    bool => ImmKind::Bool, Bool;
    Type => ImmKind::Type, Type;
    String => ImmKind::Global, Global;
    FragType => ImmKind::ResultFrag, Frag;
}

impl ImmValue for Layout {
    const KIND: ImmKind = ImmKind::Enum(&["row", "col"]);
    fn from_imm(i: Imm) -> Option<Self> {
        match i {
            Imm::Enum(0) => Some(Layout::Row),
            Imm::Enum(1) => Some(Layout::Col),
            _ => None,
        }
    }
    fn to_imm(&self) -> Imm {
        Imm::Enum(match self {
            Layout::Row => 0,
            Layout::Col => 1,
        })
    }
}

/// One segment of a mnemonic pattern.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Seg {
    Lit(&'static str),
    /// `prefix<name>`, or `<name|off>` for a bool (true spelled `name`).
    Slot {
        prefix: &'static str,
        name: &'static str,
        off: Option<&'static str>,
    },
    /// `[.name]`: a bool written as an optional segment.
    Flag(&'static str),
}

/// The segments of a mnemonic pattern.
pub fn pattern(p: &'static str) -> Vec<Seg> {
    let mut out = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix("[.") {
            let end = r.find(']').unwrap_or(r.len());
            out.push(Seg::Flag(&r[..end]));
            rest = r.get(end + 1..).unwrap_or("");
            continue;
        }
        let r = rest.strip_prefix('.').unwrap_or(rest);
        let end = r.find(['.', '[']).unwrap_or(r.len());
        let seg = &r[..end];
        rest = &r[end..];
        out.push(match seg.split_once('<') {
            Some((prefix, slot)) => {
                let slot = slot.trim_end_matches('>');
                let (name, off) = match slot.split_once('|') {
                    Some((on, off)) => (on, Some(off)),
                    None => (slot, None),
                };
                Seg::Slot { prefix, name, off }
            }
            None => Seg::Lit(seg),
        });
    }
    out
}

/// One token of an operand template.
#[derive(Copy, Clone, Debug, PartialEq, Eq)]
pub enum Tok {
    Args,
    Comma,
    Word(&'static str),
    Imm(&'static str),
    /// `[`: the group up to `]` is written only when its immediate is not 0.
    Open,
    Close,
}

/// The tokens of an operand template.
pub fn template(t: &'static str) -> Vec<Tok> {
    let mut out = Vec::new();
    let mut rest = t.trim_start();
    while let Some(c) = rest.chars().next() {
        let len = match c {
            ',' | '[' | ']' => 1,
            _ => rest.find([' ', ',', '[', ']']).unwrap_or(rest.len()),
        };
        let w = &rest[..len];
        out.push(match w {
            "," => Tok::Comma,
            "[" => Tok::Open,
            "]" => Tok::Close,
            "{args}" => Tok::Args,
            _ => match w.strip_prefix('<').and_then(|n| n.strip_suffix('>')) {
                Some(n) => Tok::Imm(n),
                None => Tok::Word(w),
            },
        });
        rest = rest[len..].trim_start();
    }
    out
}

/// Why a mnemonic does not match a pattern, by how specific the message is.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Miss {
    /// Too few or too many segments.
    Shape,
    /// A literal segment differs.
    Literal,
    /// An immediate is misspelled: the message.
    Bad(String),
}

/// The immediates written in mnemonic `m` (split at `.` into `parts`) if it
/// matches pattern `segs`, else where and why not.
pub fn match_pattern(
    segs: &[Seg],
    imms: Option<&Imms>,
    parts: &[&str],
    m: &str,
) -> Result<Named, (usize, Miss)> {
    // Only a pattern with as many segments says more than "unknown".
    let flags = segs.iter().filter(|s| matches!(s, Seg::Flag(_))).count();
    let required = segs.len() - flags;
    if parts.len() < required || parts.len() > required + flags {
        return Err((0, Miss::Shape));
    }
    let mut out = Vec::new();
    let mut i = 0;
    for (k, seg) in segs.iter().enumerate() {
        match *seg {
            Seg::Lit(s) => match parts.get(i) {
                Some(p) if *p == s => i += 1,
                _ => return Err((i, Miss::Literal)),
            },
            // A run of flags is matched at its first, in any order.
            Seg::Flag(_) if k > 0 && matches!(segs[k - 1], Seg::Flag(_)) => {}
            Seg::Flag(_) => {
                let run: Vec<&str> = segs[k..]
                    .iter()
                    .map_while(|s| match s {
                        Seg::Flag(f) => Some(*f),
                        _ => None,
                    })
                    .collect();
                let mut on = vec![false; run.len()];
                while let Some(j) = parts.get(i).and_then(|p| run.iter().position(|f| f == p)) {
                    on[j] = true;
                    i += 1;
                }
                out.extend(run.iter().zip(on).map(|(f, b)| (*f, Imm::Bool(b))));
                if let Some(p) = parts.get(i).filter(|_| k + run.len() == segs.len()) {
                    let list: Vec<String> = run.iter().map(|f| format!("`{f}`")).collect();
                    return Err((
                        i,
                        Miss::Bad(format!(
                            "unknown flag `{p}` in `{m}` (expected one of {})",
                            list.join(", ")
                        )),
                    ));
                }
            }
            Seg::Slot { prefix, name, off } => {
                let Some(p) = parts.get(i) else {
                    return Err((i, Miss::Shape));
                };
                let def = imms.and_then(|x| x.def(name)).map(|(_, d)| d);
                let what = def.map_or(name, |d| d.what);
                let Some(text) = p.strip_prefix(prefix) else {
                    return Err((i, Miss::Bad(format!("invalid {what} `{p}` in `{m}`"))));
                };
                let v = match (def.map(|d| d.kind), off) {
                    (_, Some(off)) => match text {
                        t if t == name => Imm::Bool(true),
                        t if t == off => Imm::Bool(false),
                        _ => {
                            return Err((
                                i,
                                Miss::Bad(format!(
                                    "unknown {what} in `{m}` (expected one of `{name}`, `{off}`)"
                                )),
                            ))
                        }
                    },
                    (Some(ImmKind::Enum(names)), _) => {
                        match names.iter().position(|n| *n == text) {
                            Some(k) => Imm::Enum(k),
                            None => {
                                let list: Vec<String> =
                                    names.iter().map(|n| format!("`{n}`")).collect();
                                return Err((
                                    i,
                                    Miss::Bad(format!(
                                        "unknown {what} in `{m}` (expected one of {})",
                                        list.join(", ")
                                    )),
                                ));
                            }
                        }
                    }
                    (Some(ImmKind::Int(max)), _) => match text
                        .parse::<u64>()
                        .ok()
                        .filter(|v| *v <= max && text.bytes().all(|b| b.is_ascii_digit()))
                    {
                        Some(v) => Imm::Int(v),
                        None => {
                            return Err((i, Miss::Bad(format!("invalid {what} `{p}` in `{m}`"))))
                        }
                    },
                    // A table bug (the table's tests check every slot): no match.
                    _ => return Err((i, Miss::Shape)),
                };
                out.push((name, v));
                i += 1;
            }
        }
    }
    if i < parts.len() {
        return Err((i, Miss::Shape));
    }
    Ok(out)
}

/// The mnemonic of pattern `segs` with immediates `values` (in `imms.defs` order).
pub fn fill_pattern(segs: &[Seg], imms: Option<&Imms>, values: &[Imm]) -> String {
    let value = |name: &str| {
        imms.and_then(|x| x.def(name))
            .and_then(|(k, d)| Some((values.get(k)?, d)))
    };
    let mut out = String::new();
    for seg in segs {
        let text = match *seg {
            Seg::Lit(s) => s.to_string(),
            Seg::Flag(s) => match value(s) {
                Some((Imm::Bool(true), _)) => s.to_string(),
                _ => continue,
            },
            Seg::Slot { prefix, name, off } => {
                let v = match (value(name), off) {
                    (Some((Imm::Bool(b), _)), Some(off)) => {
                        (if *b { name } else { off }).to_string()
                    }
                    (Some((v, d)), _) => imm_text(v, d),
                    (None, _) => format!("<{name}>"),
                };
                format!("{prefix}{v}")
            }
        };
        if !out.is_empty() {
            out.push('.');
        }
        out.push_str(&text);
    }
    out
}

/// An immediate as written (`Frag` is never written: empty).
pub fn imm_text(v: &Imm, d: &ImmDef) -> String {
    match (v, d.kind) {
        (Imm::Enum(k), ImmKind::Enum(names)) => names.get(*k).copied().unwrap_or("?").to_string(),
        (Imm::Int(n), _) => n.to_string(),
        (Imm::Bool(b), _) => b.to_string(),
        (Imm::Type(t), _) => t.to_string(),
        (Imm::Global(g), _) => format!("@{g}"),
        _ => String::new(),
    }
}
