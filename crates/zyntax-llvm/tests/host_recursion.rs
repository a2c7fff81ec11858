//! Unbounded recursion in native CPU code is a run-time error, not a SIGSEGV:
//! recursive functions check the stack pointer against the caller's limit on
//! entry (issue 10, item 4). Bounded recursion still runs and gives the right
//! result.

use zyntax_hir::*;
use zyntax_llvm::host::{self, lower::ERR_STACK, Arg, HostError, HostOptions, Scalar};

/// `@down(x) = down(x + 1) + down(x + 2)`: never returns; two calls so that
/// tail-call elimination cannot turn it into a loop at higher levels.
fn runaway(opt: &str) -> Module {
    parse_module(&format!(
        r#"module "m"
host @down -> i64 opt({opt}) {{
block0(v0: i64):
    v1: i64 = const 1
    v2: i64 = add v0, v1
    v3: i64 = call @down v2
    v4: i64 = add v2, v1
    v5: i64 = call @down v4
    v6: i64 = add v3, v5
    return v6
}}

host @entry -> i64 opt({opt}) {{
block0(v0: i64):
    v1: i64 = call @down v0
    return v1
}}
"#
    ))
    .unwrap()
}

/// `@sum(n) = n == 0 ? 0 : n + sum(n - 1)`: bounded recursion.
fn sum(opt: &str) -> Module {
    parse_module(&format!(
        r#"module "m"
host @sum -> i64 opt({opt}) {{
block0(v0: i64):
    v1: i64 = const 0
    v2: bool = cmp.eq v0, v1
    br v2, block1, block2
block1:
    return v1
block2:
    v3: i64 = const 1
    v4: i64 = sub v0, v3
    v5: i64 = call @sum v4
    v6: i64 = add v0, v5
    return v6
}}
"#
    ))
    .unwrap()
}

fn stack_error(m: &Module, entry: &str) -> HostError {
    let jit = host::jit(m, &HostOptions::default()).unwrap();
    jit.call(entry, &mut [Arg::Scalar(Scalar::Int(0))])
        .expect_err("runaway recursion must fail")
}

#[test]
fn runaway_recursion_is_a_runtime_error_at_every_opt_level() {
    for opt in ["O0", "O2", "O3"] {
        for entry in ["down", "entry"] {
            let e = stack_error(&runaway(opt), entry);
            let HostError::Runtime(r) = &e else {
                panic!("{opt} {entry}: expected a runtime error, got {e}");
            };
            assert_eq!(r.code, ERR_STACK, "{opt} {entry}: {e}");
            assert!(e.to_string().contains("stack overflow"), "{e}");
            assert!(e.to_string().contains("@down"), "{e}");
        }
    }
}

#[test]
fn runaway_recursion_on_a_small_thread_stack_is_an_error_too() {
    let m = runaway("O0");
    let e = std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || stack_error(&m, "entry").to_string())
        .unwrap()
        .join()
        .expect("the thread must not crash");
    assert!(e.contains("stack overflow"), "{e}");
}

#[test]
fn bounded_recursion_still_runs() {
    let n = 1000 + (std::process::id() as i64 % 1000);
    for opt in ["O0", "O3"] {
        let jit = host::jit(&sum(opt), &HostOptions::default()).unwrap();
        let out = jit.call("sum", &mut [Arg::Scalar(Scalar::Int(n))]).unwrap();
        assert_eq!(out, vec![Scalar::Int(n * (n + 1) / 2)], "{opt}");
    }
}
