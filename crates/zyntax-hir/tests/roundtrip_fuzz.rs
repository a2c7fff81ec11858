//! Fuzzing the parser: random bytes and random mutations of valid `.zir` files
//! must never panic (or overflow the stack), and whatever the parser accepts
//! must print to text that parses back to an equal module.

use proptest::prelude::*;
use std::path::PathBuf;
use zyntax_hir::*;

/// Valid inputs to mutate: the example files plus a small module using the
/// rarer syntax (vectors, arrays, fragments, NaN, calls, attributes).
fn corpus() -> Vec<String> {
    let mut out = vec![r#"module "seed" targets(sm_80) ptx(7.8)

device @d -> f32 inline_always {
block0(v0: f32):
    return v0
}

kernel @k max_threads(64, 2, 1) min_blocks(2) max_registers(32) shared_bytes(128) arch(sm_80) {
block0(v0: ptr<global, vec<f32, 4>>, v1: ptr<global, f16>, v2: u32):
    v3: vec<f32, 4> = load v0
    v4: f32 = extract v3, 1
    v5: vec<f32, 4> = insert v3, v4, 2
    v6: ptr<local, [f32; 4]> = alloca [f32; 4], 1
    v7: frag<a, m16n16k16, f16, row> = mma.load.row v1, v2
    v8: f32 = const nan:0x7ff8000000000001
    v9: f32 = call @d v8
    v10: u32 = const 4294967295
    v11: f32 = shfl.down v10, v9, v2 width 16
    v12: bool = cmp.lt v2, v10
    br v12, block1(v11), block2
block1(v13: f32):
    jump block2
block2:
    return
}
"#
    .to_string()];
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    if let Ok(entries) = std::fs::read_dir(dir) {
        let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        paths.sort();
        for p in paths {
            if p.extension().is_some_and(|e| e == "zir") {
                if let Ok(t) = std::fs::read_to_string(&p) {
                    out.push(t);
                }
            }
        }
    }
    out
}

/// Fragments that are likely to confuse a parser.
const TOKENS: &[&str] = &[
    "(",
    ")",
    "[",
    "]",
    "<",
    ">",
    "{",
    "}",
    ",",
    ":",
    ";",
    "=",
    "-",
    "->",
    "@",
    "@f",
    "\"",
    "\\",
    "\n",
    " ",
    "v0",
    "v99999999999999999999999",
    "block0",
    "block7",
    "0x",
    "0xffffffffffffffffffffffffffffffffff",
    "1e999",
    "-1e-999",
    "nan",
    "nan:",
    "nan:0x1",
    "inf",
    "-inf",
    "18446744073709551616",
    "-9223372036854775809",
    "const",
    "br",
    "jump",
    "call",
    "return",
    "shfl.down",
    "width",
    "mma.load.row",
    "cp.async.cg.16",
    "frag<",
    "ptr<",
    "vec<",
    "[f32;",
    "i8",
    "bool",
    "kernel",
    "host",
    "device",
    "module",
    "\u{e9}",
    "\u{1F600}",
    "\t",
    "\r\n",
];

fn mutate(text: &str, ops: &[(u8, u32, u32)]) -> String {
    let mut chars: Vec<char> = text.chars().collect();
    for &(kind, a, b) in ops {
        let len = chars.len().max(1);
        let i = a as usize % len;
        match kind % 6 {
            0 => {
                // Delete a short range.
                let end = (i + 1 + b as usize % 12).min(chars.len());
                if i < end {
                    chars.drain(i..end);
                }
            }
            1 => {
                let t = TOKENS[b as usize % TOKENS.len()];
                let at = i.min(chars.len());
                chars.splice(at..at, t.chars());
            }
            2 => {
                if i < chars.len() {
                    chars[i] = char::from_u32(b % 0x80).unwrap_or(' ');
                }
            }
            3 => {
                // Duplicate a range (duplicate definitions, functions, attributes).
                let end = (i + 1 + b as usize % 80).min(chars.len());
                if i < end {
                    let piece: Vec<char> = chars[i..end].to_vec();
                    chars.splice(end..end, piece);
                }
            }
            4 => {
                // Swap two lines.
                let s: String = chars.iter().collect();
                let mut lines: Vec<&str> = s.split('\n').collect();
                let n = lines.len();
                if n > 1 {
                    lines.swap(a as usize % n, b as usize % n);
                }
                chars = lines.join("\n").chars().collect();
            }
            _ => {
                // Change a digit (renumber a value or block, change a constant).
                if let Some(pos) = (i..chars.len()).find(|&k| chars[k].is_ascii_digit()) {
                    chars[pos] = char::from(b'0' + (b % 10) as u8);
                }
            }
        }
    }
    chars.into_iter().collect()
}

/// Parse; if accepted, print and reparse: the module must survive unchanged.
fn check(text: &str) -> Result<(), TestCaseError> {
    if let Ok(m) = parse_module(text) {
        let printed = print_module(&m);
        match parse_module(&printed) {
            Ok(again) => {
                prop_assert_eq!(&again, &m, "accepted text did not round trip:\n{}", text);
                prop_assert_eq!(print_module(&again), printed);
            }
            Err(e) => {
                return Err(TestCaseError::fail(format!(
                    "printed form of accepted text does not parse: {e}\ninput:\n{text}\nprinted:\n{printed}"
                )))
            }
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1500, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        check(&String::from_utf8_lossy(&bytes))?;
    }

    #[test]
    fn random_token_soup_never_panics(picks in proptest::collection::vec(any::<u16>(), 0..120)) {
        let mut s = String::from("module \"m\"\nkernel @k {\nblock0:\n");
        for p in picks {
            s.push_str(TOKENS[p as usize % TOKENS.len()]);
            s.push(' ');
        }
        check(&s)?;
    }

    #[test]
    fn mutated_valid_files_never_panic(
        which in any::<usize>(),
        ops in proptest::collection::vec((any::<u8>(), any::<u32>(), any::<u32>()), 1..6),
    ) {
        let corpus = corpus();
        let text = &corpus[which % corpus.len()];
        check(&mutate(text, &ops))?;
    }
}

#[test]
fn corpus_is_valid() {
    let c = corpus();
    assert!(c.len() >= 7, "examples missing: {}", c.len());
    for t in &c {
        if let Err(e) = parse_module(t) {
            panic!("{e}\n{t}");
        }
    }
}
