//! Memory rows: loads, stores, pointers and allocations, the scoped memory
//! model (`red`, acquire/release, fences) and module globals.

use super::*;

macro_rules! red {
    ($sub:literal, $v:ident, $py:literal, $doc:literal) => {
        row(
            "red",
            $sub,
            concat!("red.", $sub, ".<scope>"),
            &["ptr", "value"],
            0,
            "–",
        )
        .imms(imms!(Red { scope: Scope = "scope"; op: AtomicOp::$v }))
        .sig("ptr<mem, T>, T")
        .what("reduction operation")
        .gpu()
        .fx(fx::READ | fx::WRITE)
        .rust(concat!(
            "red(AtomicOp::",
            stringify!($v),
            ", scope, ptr, value)"
        ))
        .py(Py::Red($py))
        .doc($doc)
    };
}

/// Loads, stores, pointer arithmetic and allocations.
pub(super) const MEMORY: &[OpDef] = &[
    // --- memory
    row("load", "", "load", &["ptr"], 1, "pointee")
        .op(|| Op::Load)
        .class(Mem)
        .fx(fx::READ)
        .rust("load(ptr)")
        .py(Py::Hand("load"))
        .doc("Read memory."),
    row("store", "", "store", &["ptr", "value"], 0, "–")
        .op(|| Op::Store)
        .class(Mem)
        .fx(fx::WRITE)
        .rust_shorthand("store(ptr, value)")
        .py(Py::Hand("store"))
        .doc("Write memory."),
    row(
        "ptr_add",
        "",
        "ptr_add",
        &["ptr", "index"],
        1,
        "type of ptr",
    )
    .op(|| Op::PtrAdd)
    .class(Mem)
    .rust("ptr_add(ptr, index)")
    .py(Py::Hand("ptr_add"))
    .doc("Advance a pointer by index elements."),
    row(
        "ptr_cast",
        "",
        "ptr_cast",
        &["ptr"],
        1,
        "the given pointer type",
    )
    .op(|| Op::PtrCast)
    .class(Mem)
    .rust("ptr_cast(ptr, ty)")
    .py(Py::Hand("ptr_cast"))
    .doc("Address-space cast to or from generic, or a change of pointee."),
    row("alloca", "", "alloca", NONE, 1, "ptr<local, elem>")
        .imms(imms!(Alloca {
            elem: Type = "an element type",
            count: u64 = "an element count"
        }))
        .syntax("<elem>, <count>")
        .class(Mem)
        .rust("alloca(elem, count)")
        .py(Py::Hand("alloca"))
        .doc("Per-thread stack memory."),
    row(
        "shared_alloc",
        "",
        "shared_alloc",
        NONE,
        1,
        "ptr<shared, elem>",
    )
    .imms(imms!(SharedAlloc {
        elem: Type = "an element type",
        count: u64 = "an element count",
        align: u32 = "an alignment in bytes"
    }))
    .syntax("<elem>, <count> [align <align>]")
    .gpu()
    .rust("shared_alloc(elem, count)")
    .py(Py::Hand("shared_alloc"))
    .doc("Static shared memory of the block."),
    row("dyn_shared", "", "dyn_shared", NONE, 1, "ptr<shared, elem>")
        .imms(imms!(DynShared {
            elem: Type = "an element type",
            align: u32 = "an alignment in bytes"
        }))
        .syntax("<elem> [align <align>]")
        .gpu()
        .rust("dyn_shared(elem)")
        .py(Py::Hand("dyn_shared"))
        .doc("The block's dynamic shared memory (size set at launch)."),
];

/// The scoped memory model (issue 12): `red`, acquire loads, release stores, fences.
pub(super) const MEMORY_MODEL: &[OpDef] = &[
    // --- issue 12 (warp-sync): scoped memory model
    red!("add", Add, "red_add", "Atomic add, no result (`red`)."),
    red!("sub", Sub, "red_sub", "Atomic subtract, no result."),
    red!("min", Min, "red_min", "Atomic minimum, no result."),
    red!("max", Max, "red_max", "Atomic maximum, no result."),
    red!("and", And, "red_and", "Atomic and, no result."),
    red!("or", Or, "red_or", "Atomic or, no result."),
    red!("xor", Xor, "red_xor", "Atomic xor, no result."),
    red!("exch", Exch, "red_exch", "Atomic exchange, no result."),
    red!("inc", Inc, "red_inc", "Wrapping u32 increment, no result."),
    red!("dec", Dec, "red_dec", "Wrapping u32 decrement, no result."),
    row(
        "load_acquire",
        "",
        "load.acquire.<scope>",
        &["ptr"],
        1,
        "pointee",
    )
    .imms(imms!(LoadAcquire(scope: Scope = "scope")))
    .sig("ptr<mem, T> -> T")
    .gpu()
    .fx(fx::READ | fx::SYNC)
    .rust("load_acquire(scope, ptr)")
    .py(Py::Hand("load_acquire"))
    .doc("Load with acquire semantics at a scope (`ld.acquire`)."),
    row(
        "store_release",
        "",
        "store.release.<scope>",
        &["ptr", "value"],
        0,
        "–",
    )
    .imms(imms!(StoreRelease(scope: Scope = "scope")))
    .sig("ptr<mem, T>, T 'the stored value'")
    .gpu()
    .fx(fx::WRITE | fx::SYNC)
    .rust("store_release(scope, ptr, value)")
    .py(Py::Hand("store_release"))
    .doc("Store with release semantics at a scope (`st.release`)."),
    row("fence_acq_rel", "", "fence.acq_rel.<scope>", NONE, 0, "–")
        .imms(imms!(FenceAcqRel(scope: Scope = "scope")))
        .gpu()
        .fx(fx::SYNC)
        .rust("fence_acq_rel(scope)")
        .py(Py::Hand("fence_acq_rel"))
        .doc("Acquire-release fence at a scope (the plain `fence` is sequentially consistent)."),
    row("compiler_fence", "", "compiler_fence", NONE, 0, "–")
        .op(|| Op::CompilerFence)
        .fx(fx::SYNC)
        .rust_shorthand("compiler_fence()")
        .py(Py::Nullary("compiler_fence"))
        .doc(
            "Thread-scope fence: the compiler keeps memory accesses on their side; no instruction.",
        ),
];

/// Module globals (issue 12 item 7).
pub(super) const GLOBALS: &[OpDef] = &[
    // --- module globals (issue 12 item 7)
    row(
        "global_addr",
        "",
        "global_addr",
        NONE,
        1,
        "ptr<space, elem> of the global",
    )
    .imms(imms!(GlobalAddr(name: String = "the global (like `@table`)")))
    .syntax("<name>")
    .gpu()
    .rust("global_addr(name, ty)")
    .py(Py::Hand("global_addr"))
    .doc("Pointer to a module-level `global` variable (`__constant__` or `__device__`)."),
];
