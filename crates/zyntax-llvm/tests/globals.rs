//! Module globals (issue 12 item 7) → `.const` / `.global` PTX variables with
//! their initializers and visible names, through ptxas -Werror on every arch.

mod common;
use common::*;
use zyntax_hir::*;

const TEXT: &str = r#"module "g" version(2)

global @table : constant f32, 4 = [1.5, -2.0, 0.25, 8.0]
global @halves : constant vec<f16, 2>, 2 = [1.0, -0.5, 2.0, 3.0]
global @acc : global u32, 4
global @big : global i64, 2 = [-3, 9000000000]

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

#[test]
fn globals_become_visible_ptx_variables() {
    let m = parse_module(TEXT).unwrap();
    verify_module(&m).unwrap();
    for (_, ptx) in check_archs(&m, Arch::Sm70) {
        assert_in_order(
            &ptx,
            &[
                ".visible .const .align 4 .b8 table[16]",
                ".visible .const .align 4 .b8 halves[8]",
                ".visible .global .align 4 .b8 acc[16]",
                ".visible .global .align 8 .b8 big[16]",
                "cvta.const",
                "ld.global.nc.f32",
            ],
        );
    }
}
