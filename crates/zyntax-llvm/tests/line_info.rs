//! `Options::line_info`: instructions' source locations become PTX `.file` /
//! `.loc` directives (nvcc's `-lineinfo`), ptxas accepts them, and they change
//! nothing else in the PTX.

mod common;

use common::*;
use std::path::PathBuf;
use zyntax_hir::{arch::check_arch, parse_module_named, Arch, Module};
use zyntax_llvm::{compile_ptx, Options};

fn with_lines(m: &Module, arch: Arch) -> String {
    let out = compile_ptx(m, &Options::new(arch).with_line_info(true))
        .unwrap_or_else(|e| panic!("{} for {arch} with line info: {e}", m.name));
    if let Err(e) = ptxas().assemble(&out.ptx, arch) {
        panic!("{} for {arch}: {e}\n--- PTX ---\n{}", m.name, out.ptx);
    }
    out.ptx
}

/// The PTX without what line information adds: `.loc` / `.file` lines, the
/// `$L__` labels the directives hang on, and the empty `.debug_loc` section.
fn code_only(ptx: &str) -> String {
    ptx.lines()
        .filter(|l| {
            let t = l.trim_start();
            !(t.starts_with(".loc")
                || t.starts_with(".file")
                || t.starts_with("$L__tmp")
                || t.starts_with("$L__func_begin")
                || t.starts_with("$L__func_end")
                || t.starts_with(".section\t.debug_loc"))
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// `(file number, line, column)` of every `.loc` directive.
fn locs(ptx: &str) -> Vec<(u32, u32, u32)> {
    ptx.lines()
        .filter_map(|l| {
            let rest = l.trim_start().strip_prefix(".loc")?;
            let n: Vec<u32> = rest
                .split_whitespace()
                .take(3)
                .map(|x| x.parse().unwrap())
                .collect();
            Some((n[0], n[1], n[2]))
        })
        .collect()
}

fn examples() -> Vec<PathBuf> {
    let dir = std::fs::canonicalize(env!("CARGO_MANIFEST_DIR"))
        .unwrap()
        .join("../../examples");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "zir"))
        .collect();
    files.sort();
    files
}

#[test]
fn every_example_gets_loc_lines_at_its_instructions_and_the_same_code() {
    let mut checked = 0;
    for path in examples() {
        let text = std::fs::read_to_string(&path).unwrap();
        let name = path.display().to_string();
        let m = parse_module_named(&text, Some(&name)).unwrap();
        if !m.functions.iter().any(|f| f.kind.is_gpu()) {
            continue;
        }
        // One arch per example (the newest it allows): the examples test
        // covers the others without line information.
        let Some(arch) = Arch::ALL
            .iter()
            .rev()
            .copied()
            .find(|a| check_arch(&m, *a).is_ok())
        else {
            continue;
        };
        let ptx = with_lines(&m, arch);
        let plain = compile(&m, arch).ptx;
        assert!(!plain.contains(".loc"), "{name}: .loc without line info");
        assert_eq!(
            code_only(&ptx),
            code_only(&plain),
            "{name} for {arch}: line information changed the code"
        );
        assert!(
            ptx.contains(&format!(".file\t1 \"{}\"", path.to_string_lossy())),
            "{name}: no .file naming it:\n{ptx}"
        );
        let found = locs(&ptx);
        assert!(!found.is_empty(), "{name}: no .loc lines");
        // Every located line holds an instruction (or the function header),
        // at the column where its text starts.
        let lines: Vec<&str> = text.lines().collect();
        for (file, line, col) in found {
            assert_eq!(file, 1, "{name}");
            if line == 0 {
                continue; // LLVM's "no source line" for code of no instruction
            }
            let src = lines[line as usize - 1];
            let indent = src.len() - src.trim_start().len();
            // Column 0: the function's own line (a subprogram has no column).
            assert!(
                col as usize == indent + 1 || col == 0,
                "{name}:{line}: .loc column {col} in `{src}`"
            );
            let body = src.trim_start();
            assert!(
                !body.is_empty() && !body.starts_with("block") && !body.starts_with(';'),
                "{name}:{line}: .loc at `{src}`"
            );
        }
        assert_eq!(ptx, with_lines(&m, arch), "{name}: not deterministic");
        checked += 1;
    }
    assert!(checked > 5, "only {checked} examples checked");
}

/// A device function inlined into a kernel keeps its own lines (LLVM requires
/// a location on every call between functions with debug information).
#[test]
fn inlined_device_function_keeps_its_lines() {
    let text = "module \"calls\"

device @twice -> f32 {
block0(v0: f32):
    v1: f32 = add v0, v0
    return v1
}

kernel @k {
block0(v0: ptr<global, f32>):
    v1: f32 = load v0
    v2: f32 = call @twice v1
    store v0, v2
    return
}
";
    let m = parse_module_named(text, Some("/src/calls.zir")).unwrap();
    let ptx = with_lines(&m, Arch::Sm80);
    let lines: Vec<u32> = locs(&ptx).iter().map(|l| l.1).collect();
    for want in [5, 11, 13] {
        assert!(lines.contains(&want), "no .loc at line {want}:\n{ptx}");
    }
    assert!(ptx.contains(".file\t1 \"/src/calls.zir\""), "{ptx}");
}

/// No locations, no line information: the same PTX as without the option.
#[test]
fn a_module_without_locations_is_unchanged() {
    let path = examples()
        .into_iter()
        .find(|p| p.ends_with("saxpy.zir"))
        .unwrap();
    let text = std::fs::read_to_string(path).unwrap();
    let mut m = parse_module_named(&text, None).unwrap();
    for f in &mut m.functions {
        f.loc = None;
        for d in &mut f.insts {
            d.loc = None;
        }
    }
    let arch = Arch::ALL
        .iter()
        .copied()
        .find(|a| check_arch(&m, *a).is_ok())
        .unwrap();
    let ptx = compile_ptx(&m, &Options::new(arch).with_line_info(true))
        .unwrap()
        .ptx;
    assert_eq!(ptx, compile(&m, arch).ptx);
}
