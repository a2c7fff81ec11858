//! Module globals in the interpreter: initial values, host writes by name,
//! kernel writes kept across launches, and read-only constants.

use zyntax_hir::parse_module;
use zyntax_interp::{Arg, Interpreter};

const TEXT: &str = r#"module "g" version(2)

global @table : constant f32, 4 = [1.5, -2.0, 0.25, 8.0]
global @acc : global u32, 4

kernel @k {
block0(v0: ptr<global, f32>):
    v1: u32 = thread_idx.x
    v2: ptr<constant, f32> = global_addr @table
    v3: ptr<constant, f32> = ptr_add v2, v1
    v4: f32 = load v3
    v5: ptr<global, f32> = ptr_add v0, v1
    store v5, v4
    v6: ptr<global, u32> = global_addr @acc
    v7: ptr<global, u32> = ptr_add v6, v1
    v8: u32 = load v7
    v9: u32 = add v8, v1
    store v7, v9
    return
}
"#;

fn f32s(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

fn u32s(b: &[u8]) -> Vec<u32> {
    b.chunks(4)
        .map(|c| u32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn globals_start_initialized_and_persist_across_launches() {
    let m = parse_module(TEXT).unwrap();
    let it = Interpreter::new(&m).unwrap();
    assert_eq!(
        f32s(&it.global_bytes("table").unwrap()),
        [1.5, -2.0, 0.25, 8.0]
    );
    assert_eq!(u32s(&it.global_bytes("acc").unwrap()), [0; 4]);
    let mut bufs = vec![vec![0xffu8; 16]];
    it.launch("k", [1, 1, 1], [4, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap();
    assert_eq!(f32s(&bufs[0]), [1.5, -2.0, 0.25, 8.0]);
    // The host rewrites the constant table by name; the device global keeps its sum.
    let table: Vec<u8> = [3.0f32, 4.0, -5.0, 6.5]
        .iter()
        .flat_map(|x| x.to_le_bytes())
        .collect();
    it.set_global_bytes("table", &table).unwrap();
    it.launch("k", [1, 1, 1], [4, 1, 1], 0, &[Arg::Buffer(0)], &mut bufs)
        .unwrap();
    assert_eq!(f32s(&bufs[0]), [3.0, 4.0, -5.0, 6.5]);
    assert_eq!(u32s(&it.global_bytes("acc").unwrap()), [0, 2, 4, 6]);
}

#[test]
fn bad_names_and_sizes_are_errors() {
    let m = parse_module(TEXT).unwrap();
    let it = Interpreter::new(&m).unwrap();
    assert!(it
        .global_bytes("nope")
        .unwrap_err()
        .to_string()
        .contains("no global @nope"));
    let e = it
        .set_global_bytes("table", &[0; 12])
        .unwrap_err()
        .to_string();
    assert!(e.contains("has 16 bytes, got 12"), "{e}");
}
