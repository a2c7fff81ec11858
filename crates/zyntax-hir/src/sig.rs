//! Operand-type signatures: the relational type rules of an instruction,
//! declared as a string in its table row (`OpDef::sig`), parsed once and
//! checked by [`check`] for the verifier.
//!
//! ```text
//! sig     := [items] ["->" [items]] ["where" VAR ":" set]
//! item    := pattern ["'" phrase "'"] ["*" MIN ".." MAX]
//!                                          the phrase names the operand in errors; `*`:
//!                                          MIN to MAX operands of the pattern (one per row)
//! pattern := "_"                           any type
//!          | VAR | VAR ":" set              a type variable (one capital letter): bound by
//!                                          its first use, every later use must equal it
//!          | set                           one of these scalars: `i32|u32`
//!          | "int"                         any integer scalar
//!          | scalar | "tensormap" | "vec<" scalar "," N ">"
//!          | "ptr<" space "," pattern ">"  space: an address space, `any`, or `mem`
//!                                          (global, shared, generic or shared_cluster)
//! ```
//!
//! Operands are checked in order, then results; the first mismatch is the
//! error. An operand is named by its phrase, else by [`phrase`] of the row's
//! operand name, else as "operand k of `op`". A `where` set constrains the
//! variable wherever it is bound and reads as "`op` works on ...".

use crate::types::{AddrSpace, ScalarType, Type};

/// Where a pointer pattern may point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Space {
    Any,
    /// What atomics and ordered accesses reach: global, shared, generic, shared_cluster.
    Mem,
    Is(AddrSpace),
}

impl Space {
    fn accepts(self, s: AddrSpace) -> bool {
        match self {
            Space::Any => true,
            Space::Mem => s != AddrSpace::Local && s != AddrSpace::Constant,
            Space::Is(want) => s == want,
        }
    }
    /// " to shared memory": what an error says the pointer must point to.
    fn to(self) -> String {
        match self {
            Space::Any => String::new(),
            Space::Mem => " to global, shared or generic memory".into(),
            Space::Is(s) => format!(" to {s} memory"),
        }
    }
}

/// A type pattern.
#[derive(Clone, Debug, PartialEq)]
pub enum Pat {
    Any,
    Var(char, Option<Vec<ScalarType>>),
    Set(Vec<ScalarType>),
    Int,
    Exact(Type),
    Ptr(Space, Box<Pat>),
}

/// One operand or result of a signature.
#[derive(Clone, Debug, PartialEq)]
pub struct Item {
    pub pat: Pat,
    pub phrase: Option<String>,
    /// `*MIN..MAX`: this many operands of the pattern.
    pub repeat: Option<(usize, usize)>,
}

/// A parsed signature.
#[derive(Clone, Debug, PartialEq)]
pub struct Sig {
    pub args: Vec<Item>,
    pub results: Vec<Item>,
    /// `where T: set`.
    pub var_set: Option<(char, Vec<ScalarType>)>,
}

/// How an operand name reads in an error ("the mask"); `None`: by position.
pub fn phrase(name: &str) -> Option<&'static str> {
    Some(match name {
        "mask" => "the mask",
        "pred" => "the predicate",
        "cond" => "the condition",
        "value" => "the value",
        "expected" => "the expected value",
        "desired" => "the desired value",
        "lane" | "delta" | "lane_mask" => "the lane operand",
        "bar" => "the barrier",
        "count" => "the arrival count",
        "tx" => "the transaction bytes",
        "state" => "the state token",
        "parity" => "the phase parity",
        "hint" => "the suspend-time hint",
        "dst" => "the destination",
        "src" => "the source",
        "bytes" => "the byte count",
        "tmap" => "the tensor map",
        "pos" => "the bit position",
        "len" => "the field length",
        "lbo" => "the leading byte offset",
        "sbo" => "the stride byte offset",
        "rank" => "the target block's rank",
        "lo" => "the low operand",
        "hi" => "the high operand",
        "ldm" => "ldm",
        _ => return None,
    })
}

fn set_text(set: &[ScalarType]) -> String {
    let names: Vec<&str> = set.iter().map(|s| s.name()).collect();
    match names.split_last() {
        Some((last, [])) => last.to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
        None => String::new(),
    }
}

impl std::fmt::Display for Pat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Pat::Any => f.write_str("_"),
            Pat::Var(v, None) => write!(f, "{v}"),
            Pat::Var(v, Some(set)) => write!(f, "{v}: {}", bar_list(set)),
            Pat::Set(set) => f.write_str(&bar_list(set)),
            Pat::Int => f.write_str("int"),
            Pat::Exact(t) => write!(f, "{t}"),
            Pat::Ptr(Space::Any, p) => write!(f, "ptr<any, {p}>"),
            Pat::Ptr(Space::Mem, p) => write!(f, "ptr<mem, {p}>"),
            Pat::Ptr(Space::Is(s), p) => write!(f, "ptr<{s}, {p}>"),
        }
    }
}

fn bar_list(set: &[ScalarType]) -> String {
    set.iter().map(|s| s.name()).collect::<Vec<_>>().join("|")
}

impl Sig {
    /// The docs' rendering: `name: pattern` per operand, and the results.
    pub fn render(&self, names: &[&str]) -> (String, String) {
        let args: Vec<String> = self
            .args
            .iter()
            .enumerate()
            .map(|(i, it)| {
                let rep = it.repeat.map(|(lo, hi)| format!(" *{lo}..{hi}"));
                match (names.get(i), &it.phrase) {
                    (Some(n), _) => format!("{n}: {}{}", it.pat, rep.unwrap_or_default()),
                    // A variadic row's operands go by their phrases.
                    (None, Some(p)) => format!("{} '{p}'{}", it.pat, rep.unwrap_or_default()),
                    (None, None) => it.pat.to_string(),
                }
            })
            .collect();
        let mut results: Vec<String> = self.results.iter().map(|it| it.pat.to_string()).collect();
        if let Some((v, set)) = &self.var_set {
            let w = format!("({v}: {})", bar_list(set));
            match results.is_empty() {
                true => results.push(w),
                false => *results.last_mut().unwrap() += &format!(" {w}"),
            }
        }
        (args.join(", "), results.join(", "))
    }
}

// --- parsing

/// Parses a signature; `Err` names the problem (a table bug: a unit test parses every row).
pub fn parse(text: &str) -> Result<Sig, String> {
    let (body, var_set) = match text.split_once(" where ") {
        Some((b, w)) => {
            let (v, set) = w
                .split_once(':')
                .ok_or_else(|| format!("`where {w}`: expected `T: set`"))?;
            let v = var_name(v.trim()).ok_or_else(|| format!("`{v}` is not a type variable"))?;
            (b, Some((v, scalar_set(set.trim())?)))
        }
        None => (text, None),
    };
    let (args, results) = body.split_once("->").unwrap_or((body, ""));
    Ok(Sig {
        args: items(args)?,
        results: items(results)?,
        var_set,
    })
}

fn items(text: &str) -> Result<Vec<Item>, String> {
    split_top(text)
        .into_iter()
        .filter(|s| !s.trim().is_empty())
        .map(|s| item(s.trim()))
        .collect()
}

/// Splits at commas outside `<...>` and quotes.
fn split_top(text: &str) -> Vec<&str> {
    let (mut depth, mut quoted, mut start) = (0i32, false, 0);
    let mut out = Vec::new();
    for (i, c) in text.char_indices() {
        match c {
            '\'' => quoted = !quoted,
            '<' if !quoted => depth += 1,
            '>' if !quoted => depth -= 1,
            ',' if depth == 0 && !quoted => {
                out.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    out.push(&text[start..]);
    out
}

fn item(text: &str) -> Result<Item, String> {
    let (text, repeat) = match text.rsplit_once('*') {
        Some((t, r)) => {
            let bad = || format!("`*{r}`: expected *MIN..MAX");
            let (lo, hi) = r.split_once("..").ok_or_else(bad)?;
            let lo = lo.trim().parse().map_err(|_| bad())?;
            let hi = hi.trim().parse().map_err(|_| bad())?;
            (t.trim(), Some((lo, hi)))
        }
        None => (text, None),
    };
    let (pat, phrase) = match text.split_once('\'') {
        Some((p, rest)) => {
            let phrase = rest
                .strip_suffix('\'')
                .ok_or_else(|| format!("unclosed phrase in `{text}`"))?;
            (p.trim(), Some(phrase.to_string()))
        }
        None => (text, None),
    };
    if repeat.is_some() && phrase.is_none() {
        return Err(format!("`{text}`: a repeated operand needs a phrase"));
    }
    Ok(Item {
        pat: pattern(pat)?,
        phrase,
        repeat,
    })
}

fn var_name(s: &str) -> Option<char> {
    let mut cs = s.chars();
    match (cs.next(), cs.next()) {
        (Some(c), None) if c.is_ascii_uppercase() => Some(c),
        _ => None,
    }
}

fn scalar_set(s: &str) -> Result<Vec<ScalarType>, String> {
    s.split('|')
        .map(|n| {
            ScalarType::from_name(n.trim()).ok_or_else(|| format!("`{n}` is not a scalar type"))
        })
        .collect()
}

fn pattern(s: &str) -> Result<Pat, String> {
    if s == "_" {
        return Ok(Pat::Any);
    }
    if s == "int" {
        return Ok(Pat::Int);
    }
    if s == "tensormap" {
        return Ok(Pat::Exact(Type::TensorMap));
    }
    if let Some(v) = var_name(s) {
        return Ok(Pat::Var(v, None));
    }
    if let Some((v, set)) = s.split_once(':') {
        let v = var_name(v.trim()).ok_or_else(|| format!("`{v}` is not a type variable"))?;
        return Ok(Pat::Var(v, Some(scalar_set(set.trim())?)));
    }
    if let Some(inner) = s.strip_prefix("ptr<").and_then(|r| r.strip_suffix('>')) {
        let (space, pointee) = inner
            .split_once(',')
            .ok_or_else(|| format!("`{s}`: expected ptr<space, pattern>"))?;
        let space = match space.trim() {
            "any" => Space::Any,
            "mem" => Space::Mem,
            n => Space::Is(AddrSpace::from_name(n).ok_or_else(|| format!("unknown space `{n}`"))?),
        };
        return Ok(Pat::Ptr(space, Box::new(pattern(pointee.trim())?)));
    }
    if let Some(inner) = s.strip_prefix("vec<").and_then(|r| r.strip_suffix('>')) {
        let (e, n) = inner
            .split_once(',')
            .ok_or_else(|| format!("`{s}`: expected vec<scalar, N>"))?;
        let e = ScalarType::from_name(e.trim()).ok_or_else(|| format!("`{e}` is not a scalar"))?;
        let n = n
            .trim()
            .parse()
            .map_err(|_| format!("`{n}` is not a lane count"))?;
        return Ok(Pat::Exact(Type::Vector(e, n)));
    }
    let set = scalar_set(s)?;
    Ok(match set[..] {
        [one] => Pat::Exact(Type::Scalar(one)),
        _ => Pat::Set(set),
    })
}

// --- checking

/// Why a type does not match a pattern.
enum Miss {
    /// The pattern asks for exactly this type.
    Exact(Type),
    /// A type variable bound earlier makes it this type.
    Bound(Type),
    Ptr(Space),
    Set(Vec<ScalarType>),
    Int,
    /// The `where` set of the variable.
    Where(Vec<ScalarType>),
}

/// The one type a pattern without variables or choices stands for.
fn concrete(p: &Pat) -> Option<Type> {
    match p {
        Pat::Exact(t) => Some(t.clone()),
        Pat::Ptr(Space::Is(s), p) => Some(Type::ptr(*s, concrete(p)?)),
        _ => None,
    }
}

struct Env<'s> {
    vars: Vec<(char, Type)>,
    var_set: Option<&'s (char, Vec<ScalarType>)>,
}

impl Env<'_> {
    fn get(&self, v: char) -> Option<&Type> {
        self.vars.iter().find(|(n, _)| *n == v).map(|(_, t)| t)
    }

    /// The type `p` stands for, when nothing in it is left open.
    fn subst(&self, p: &Pat) -> Option<Type> {
        match p {
            Pat::Exact(t) => Some(t.clone()),
            Pat::Var(v, _) => self.get(*v).cloned(),
            Pat::Ptr(Space::Is(s), p) => Some(Type::ptr(*s, self.subst(p)?)),
            _ => None,
        }
    }

    fn matches(&mut self, p: &Pat, t: &Type) -> Result<(), Miss> {
        match p {
            Pat::Any => Ok(()),
            Pat::Exact(want) if want == t => Ok(()),
            Pat::Exact(want) => Err(Miss::Exact(want.clone())),
            Pat::Int if t.is_int() => Ok(()),
            Pat::Int => Err(Miss::Int),
            Pat::Set(set) => match t.as_scalar() {
                Some(s) if set.contains(&s) => Ok(()),
                _ => Err(Miss::Set(set.clone())),
            },
            Pat::Var(v, set) => {
                if let Some(bound) = self.get(*v) {
                    return match bound == t {
                        true => Ok(()),
                        false => Err(Miss::Bound(bound.clone())),
                    };
                }
                let scalar = t.as_scalar();
                if let Some(set) = set {
                    if !scalar.is_some_and(|s| set.contains(&s)) {
                        return Err(Miss::Set(set.clone()));
                    }
                }
                if let Some((w, set)) = self.var_set {
                    if *w == *v && !scalar.is_some_and(|s| set.contains(&s)) {
                        return Err(Miss::Where(set.clone()));
                    }
                }
                self.vars.push((*v, t.clone()));
                Ok(())
            }
            Pat::Ptr(space, pointee) => {
                if let Some(want) = concrete(p) {
                    return self.matches(&Pat::Exact(want), t);
                }
                let Type::Ptr(s, inner) = t else {
                    return Err(Miss::Ptr(*space));
                };
                if !space.accepts(*s) {
                    return Err(Miss::Ptr(*space));
                }
                // A pointee that does not match a bound variable: the whole
                // pointer type is what was expected.
                self.matches(pointee, inner)
                    .map_err(|m| match (m, self.subst(p)) {
                        (Miss::Bound(_), Some(want)) => Miss::Bound(want),
                        (m, _) => m,
                    })
            }
        }
    }
}

/// Checks operand types `args` against `sig`; the type variables they bind.
fn check_args<'s>(
    sig: &'s Sig,
    mn: &str,
    names: &[&str],
    args: &[&Type],
) -> Result<Env<'s>, String> {
    let mut env = Env {
        vars: Vec::new(),
        var_set: sig.var_set.as_ref(),
    };
    // Variables an operand bound as a whole (`T`, not `ptr<_, T>`).
    let mut operand_vars: Vec<char> = Vec::new();
    for (i, (it, t, j)) in expand(sig, mn, args.len())?
        .into_iter()
        .zip(args)
        .enumerate()
        .map(|(i, ((it, j), t))| (i, (it, t, j)))
    {
        let name = names.get(i).copied().unwrap_or("");
        let what = match (j, it.phrase.as_deref()) {
            (Some(j), Some(p)) => Some(format!("{p} {j}")),
            (_, p) => p.or_else(|| phrase(name)).map(str::to_string),
        };
        let var = match &it.pat {
            Pat::Var(v, _) => Some(*v),
            _ => None,
        };
        if let Err(m) = env.matches(&it.pat, t) {
            // Two unnamed operands of one variable: the op's operands disagree.
            if let (Miss::Bound(b), Some(v), None) = (&m, var, &what) {
                if operand_vars.contains(&v) {
                    return Err(format!(
                        "`{mn}` operands must have the same type, got {b} and {t}"
                    ));
                }
            }
            return Err(operand_error(m, mn, name, what.as_deref(), i, t));
        }
        operand_vars.extend(var);
    }
    Ok(env)
}

/// The result types `sig` gives for operand types `args` (checked as
/// [`check`] does); `Ok(None)` when a result is not determined by the
/// operands (`_`, a set, a variable no operand binds).
pub fn infer(
    sig: &Sig,
    mn: &str,
    names: &[&str],
    args: &[&Type],
) -> Result<Option<Vec<Type>>, String> {
    let env = check_args(sig, mn, names, args)?;
    Ok(sig.results.iter().map(|it| env.subst(&it.pat)).collect())
}

/// Checks operand types `args` and result types `results` of op `mn`
/// (operand names `names`) against `sig`.
pub fn check(
    sig: &Sig,
    mn: &str,
    names: &[&str],
    args: &[&Type],
    results: &[&Type],
) -> Result<(), String> {
    let mut env = check_args(sig, mn, names, args)?;
    if results.len() != sig.results.len() {
        return Err(match sig.results.len() {
            0 => format!("`{mn}` has no results, got {}", results.len()),
            n => format!("`{mn}` gives {n} results, got {}", results.len()),
        });
    }
    for (i, (it, t)) in sig.results.iter().zip(results).enumerate() {
        if let Err(m) = env.matches(&it.pat, t) {
            let what = match (results.len(), i) {
                (1, _) => "the result",
                (_, 0) => "the first result",
                _ => "the second result",
            };
            return Err(match m {
                Miss::Exact(w) | Miss::Bound(w) => {
                    format!("`{mn}`: {what} has type {t}, expected {w}")
                }
                m => operand_error(m, mn, "", Some(what), i, t),
            });
        }
    }
    Ok(())
}

/// The item each of `n` operands matches, and its index among a repeated
/// item's operands; an error when `n` does not fit the repetition.
fn expand<'s>(sig: &'s Sig, mn: &str, n: usize) -> Result<Vec<(&'s Item, Option<usize>)>, String> {
    let Some(k) = sig.args.iter().position(|it| it.repeat.is_some()) else {
        // Fixed rows had their count checked with the row's arity.
        if n != sig.args.len() {
            return Err(format!("`{mn}` takes {} operands, got {n}", sig.args.len()));
        }
        return Ok(sig.args.iter().map(|it| (it, None)).collect());
    };
    let rep = &sig.args[k];
    let (lo, hi) = rep.repeat.unwrap_or((1, 1));
    let fixed = sig.args.len() - 1;
    let count = n.checked_sub(fixed).filter(|c| (lo..=hi).contains(c));
    let Some(count) = count else {
        let what = rep.phrase.as_deref().unwrap_or("operand");
        return Err(format!(
            "`{mn}` takes {fixed} operands and {lo} to {hi} {what}s, got {n} operands"
        ));
    };
    let mut out: Vec<(&Item, Option<usize>)> = sig.args[..k].iter().map(|it| (it, None)).collect();
    out.extend((0..count).map(|j| (rep, Some(j))));
    out.extend(sig.args[k + 1..].iter().map(|it| (it, None)));
    Ok(out)
}

/// The error for operand `i` (named `name`, read as `phrase`) of type `t`.
fn operand_error(
    m: Miss,
    mn: &str,
    name: &str,
    phrase: Option<&str>,
    i: usize,
    t: &Type,
) -> String {
    // Without a phrase the operand goes by position, which names the op.
    let what = phrase.map_or_else(
        || format!("operand {i} of `{mn}`"),
        |p| format!("`{mn}`: {p}"),
    );
    match m {
        Miss::Where(set) => format!("`{mn}` works on {}, got {t}", set_text(&set)),
        // The op's one pointer: the op needs it.
        Miss::Ptr(s) if name == "ptr" && phrase.is_none() => {
            format!("{mn} needs a pointer{}, got {t}", s.to())
        }
        Miss::Ptr(s) => format!("{what} must be a pointer{}, got {t}", s.to()),
        // A declared handle or u32 register operand "must be"; a value "has type".
        Miss::Exact(w) if matches!(w, Type::Ptr(..) | Type::TensorMap) => {
            format!("{what} must be a {w}, got {t}")
        }
        Miss::Exact(w) if w == Type::U32 => format!("{what} must be u32, got {t}"),
        Miss::Exact(w) | Miss::Bound(w) => format!("{what} has type {t}, expected {w}"),
        Miss::Set(set) => format!("{what} must be {}, got {t}", set_text(&set)),
        Miss::Int => format!("{what} must be an integer, got {t}"),
    }
}

/// What each operand item of `sig` asks for, for front-ends that turn
/// literals into operands: the one type it must have (`"u32"`), the type
/// variable it shares with other operands (`"T"`), or `""` (anything else:
/// a set, `int`, a pointer pattern with choices).
pub fn operand_wants(sig: &Sig) -> Vec<String> {
    sig.args
        .iter()
        .map(|it| match &it.pat {
            Pat::Var(v, _) => v.to_string(),
            p => concrete(p).map_or_else(String::new, |t| t.to_string()),
        })
        .collect()
}
