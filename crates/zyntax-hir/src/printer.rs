//! The `.zir` printer. Its output reads back through [`crate::parse_module`]
//! to an equal module (for canonical modules; see [`crate::Function::canonicalize`]).
//! The grammar is documented in `docs/zir.md`.

use crate::entities::InstId;
use crate::imm::{imm_text, Imm, Tok};
use crate::ir::{BlockCall, Function, FunctionKind, GlobalVar, Module};
use crate::op::{ConstValue, Op, OptLevel};
use crate::table::OpDef;
use crate::types::Type;
use std::fmt::Write;

/// Print a whole module.
pub fn print_module(m: &Module) -> String {
    print_module_with(m, false)
}

/// Print a whole module with each instruction's source location as a
/// comment (`; line:col`, or `; file:line:col` outside the function's own
/// file, which a `; source: file` line above the function names). Comments
/// are ignored by the parser, so this reads back to the same module; the
/// locations themselves do not (they are not part of a module's identity).
pub fn print_module_located(m: &Module) -> String {
    print_module_with(m, true)
}

fn print_module_with(m: &Module, located: bool) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "module {} version({})",
        quote(&m.name),
        crate::FORMAT_VERSION
    );
    if !m.targets.is_empty() {
        let names: Vec<&str> = m.targets.iter().map(|a| a.name()).collect();
        let _ = write!(out, " targets({})", names.join(", "));
    }
    if let Some(p) = m.ptx_version {
        let _ = write!(out, " ptx({p})");
    }
    out.push('\n');
    if !m.globals.is_empty() {
        out.push('\n');
    }
    for g in &m.globals {
        out.push_str(&print_global(g));
        out.push('\n');
    }
    for f in &m.functions {
        out.push('\n');
        out.push_str(&print_function_with(f, located));
    }
    out
}

/// `global @name : space elem, count [= [lit, ...]]`.
pub fn print_global(g: &GlobalVar) -> String {
    let mut out = format!("global @{} : {} {}, {}", g.name, g.space, g.elem, g.count);
    if !g.init.is_empty() {
        let lane_ty = g.elem.elem_scalar().map(Type::Scalar);
        let lits: Vec<String> = g
            .init
            .iter()
            .map(|c| format_const(*c, lane_ty.as_ref()))
            .collect();
        let _ = write!(out, " = [{}]", lits.join(", "));
    }
    out
}

/// Quote a string with `"` and escape `"`, `\` and control characters.
pub fn quote(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// The function header: kind, name, returns and attributes, up to (not including) `{`.
pub fn print_function_header(f: &Function) -> String {
    let mut out = String::new();
    let _ = write!(out, "{} @{}", f.kind.keyword(), f.name);
    if !f.returns.is_empty() {
        let rets: Vec<String> = f.returns.iter().map(Type::to_string).collect();
        let _ = write!(out, " -> {}", rets.join(", "));
    }
    if let FunctionKind::Kernel(k) = &f.kind {
        if let Some([x, y, z]) = k.max_threads {
            let _ = write!(out, " max_threads({x}, {y}, {z})");
        }
        if let Some([x, y, z]) = k.exact_threads {
            let _ = write!(out, " exact_threads({x}, {y}, {z})");
        }
        if let Some([x, y, z]) = k.cluster {
            let _ = write!(out, " cluster({x}, {y}, {z})");
        }
        if let Some(n) = k.min_blocks {
            let _ = write!(out, " min_blocks({n})");
        }
        if let Some(n) = k.max_registers {
            let _ = write!(out, " max_registers({n})");
        }
        if k.shared_bytes != 0 {
            let _ = write!(out, " shared_bytes({})", k.shared_bytes);
        }
        if let Some(a) = k.arch {
            let _ = write!(out, " arch({a})");
        }
    }
    for flag in f.constraints.flag_names() {
        let _ = write!(out, " {flag}");
    }
    if f.constraints.opt_level != OptLevel::default() {
        let _ = write!(out, " opt({})", f.constraints.opt_level);
    }
    out
}

/// Print one function.
pub fn print_function(f: &Function) -> String {
    print_function_with(f, false)
}

fn print_function_with(f: &Function, located: bool) -> String {
    let file = f.loc.as_ref().and_then(|l| l.file.as_deref());
    let mut out = String::new();
    if let (true, Some(file)) = (located, file) {
        let _ = writeln!(out, "; source: {file}");
    }
    out.push_str(&print_function_header(f));
    out.push_str(" {");
    if let (true, Some(loc)) = (located, &f.loc) {
        let _ = write!(out, "  ; {}:{}", loc.line, loc.col);
    }
    out.push('\n');
    for b in &f.layout {
        let Some(bd) = f.blocks.get(b.index()) else {
            continue;
        };
        let _ = write!(out, "{b}");
        if !bd.params.is_empty() {
            let params: Vec<String> = bd.params.iter().map(|v| typed_value(f, *v)).collect();
            let _ = write!(out, "({})", params.join(", "));
        }
        out.push_str(":\n");
        for i in &bd.insts {
            let _ = write!(out, "    {}", print_inst(f, *i));
            let loc = f.insts.get(i.index()).and_then(|d| d.loc.as_ref());
            if let (true, Some(loc)) = (located, loc) {
                if loc.file.as_deref() == file {
                    let _ = write!(out, "  ; {}:{}", loc.line, loc.col);
                } else {
                    let _ = write!(out, "  ; {loc}");
                }
            }
            out.push('\n');
        }
    }
    out.push_str("}\n");
    out
}

fn typed_value(f: &Function, v: crate::ValueId) -> String {
    match f.values.get(v.index()) {
        Some(d) => format!("{v}: {}", d.ty),
        None => format!("{v}: <invalid>"),
    }
}

fn block_call(c: &BlockCall) -> String {
    if c.args.is_empty() {
        c.block.to_string()
    } else {
        let args: Vec<String> = c.args.iter().map(ToString::to_string).collect();
        format!("{}({})", c.block, args.join(", "))
    }
}

/// Format a float constant so that it reads back to the same bits.
pub fn format_float(bits: u64) -> String {
    let v = f64::from_bits(bits);
    if v.is_nan() {
        format!("nan:0x{bits:016x}")
    } else if v.is_infinite() {
        if v > 0.0 {
            "inf".into()
        } else {
            "-inf".into()
        }
    } else {
        // `{:?}` gives the shortest text that parses back to the same f64.
        format!("{v:?}")
    }
}

/// Format a constant for the type it has.
pub fn format_const(c: ConstValue, ty: Option<&Type>) -> String {
    match c {
        ConstValue::Bool(b) => b.to_string(),
        ConstValue::Float(bits) => format_float(bits),
        ConstValue::Int(v) => match ty.and_then(Type::as_scalar) {
            Some(s) if s.is_unsigned() => {
                let bits = s.bits();
                let mask = if bits == 64 {
                    u64::MAX
                } else {
                    (1u64 << bits) - 1
                };
                ((v as u64) & mask).to_string()
            }
            _ => v.to_string(),
        },
    }
}

/// Print one instruction (without indentation or newline).
pub fn print_inst(f: &Function, inst: InstId) -> String {
    let Some(d) = f.insts.get(inst.index()) else {
        return format!("<invalid {inst}>");
    };
    let mut out = String::new();
    if !d.results.is_empty() {
        let rs: Vec<String> = d.results.iter().map(|v| typed_value(f, *v)).collect();
        let _ = write!(out, "{} = ", rs.join(", "));
    }
    let def = d.op.def();
    let values = def.imms.map(|x| (x.values)(&d.op)).unwrap_or_default();
    out.push_str(&Op::mnemonic_in(def, &values));
    let args: Vec<String> = d.args.iter().map(ToString::to_string).collect();
    let args = args.join(", ");
    let result_ty = d
        .results
        .first()
        .and_then(|v| f.values.get(v.index()))
        .map(|v| &v.ty);
    match &d.op {
        // Spelled by hand (as in the parser): `const`'s literal by its type, branch targets.
        Op::Const(c) => {
            let _ = write!(out, " {}", format_const(*c, result_ty));
        }
        Op::Jump => {
            if let Some(t) = d.targets.first() {
                let _ = write!(out, " {}", block_call(t));
            }
        }
        Op::Branch => {
            let targets: Vec<String> = d.targets.iter().map(block_call).collect();
            let _ = write!(out, " {args}");
            for t in targets {
                let _ = write!(out, ", {t}");
            }
        }
        _ => write_operands(&mut out, def, &values, &args),
    }
    out
}

/// The operands and immediates after the mnemonic, as row `def`'s template says.
fn write_operands(out: &mut String, def: &OpDef, values: &[Imm], args: &str) {
    let value = |name: &str| {
        let (k, x) = def.imms.as_ref()?.def(name)?;
        Some((values.get(k)?, x))
    };
    let toks = crate::table::template_of(def);
    let mut i = 0;
    while let Some(t) = toks.get(i) {
        match *t {
            Tok::Args if !args.is_empty() => {
                let _ = write!(out, " {args}");
            }
            Tok::Args | Tok::Close => {}
            Tok::Comma => out.push(','),
            Tok::Word(w) => {
                let _ = write!(out, " {w}");
            }
            Tok::Imm(name) => {
                if let Some((v, x)) = value(name) {
                    let _ = write!(out, " {}", imm_text(v, x));
                }
            }
            // An optional group is written when its immediate is not 0.
            Tok::Open => {
                let zero = toks[i..].iter().take_while(|t| **t != Tok::Close).any(
                    |t| matches!(t, Tok::Imm(n) if matches!(value(n), Some((Imm::Int(0), _)))),
                );
                if zero {
                    while toks.get(i).is_some_and(|t| *t != Tok::Close) {
                        i += 1;
                    }
                }
            }
        }
        i += 1;
    }
}

impl std::fmt::Display for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&print_module(self))
    }
}

impl std::fmt::Display for Function {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&print_function(self))
    }
}
