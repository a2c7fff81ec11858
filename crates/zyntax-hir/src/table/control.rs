//! Calls and control flow.

use super::*;

/// Calls, branches and returns.
pub(super) const CONTROL: &[OpDef] = &[
    // --- calls and control flow
    row("call", "", "call", NONE, 0, "callee's returns")
        .imms(imms!(Call(callee: String = "the callee (like `@f`)")))
        .syntax("<callee> {args}")
        .variadic(true, true)
        .class(CallC)
        .fx(fx::CALL)
        .rust("call(callee, args, returns)")
        .py(Py::Hand("call"))
        .doc("Call a device or host function of the module."),
    // Branch targets are spelled by hand.
    row("jump", "", "jump", NONE, 0, "–")
        .syntax("<target(args)>")
        .variadic(true, false)
        .class(Term)
        .rust("jump(block, args)")
        .py(Py::Hand("jump"))
        .doc("Unconditional branch."),
    row("branch", "", "br", &["cond"], 0, "–")
        .syntax("{args}, <then(args)>, <else(args)>")
        .variadic(true, false)
        .class(Term)
        .rust("branch(cond, then, else)")
        .py(Py::Hand("br"))
        .doc("Conditional branch."),
    row("return", "", "return", NONE, 0, "–")
        .op(|| Op::Return)
        .variadic(true, false)
        .class(Term)
        .rust("ret(values)")
        .py(Py::Hand("ret"))
        .doc("Return the function's values."),
    row("unreachable", "", "unreachable", NONE, 0, "–")
        .op(|| Op::Unreachable)
        .class(Term)
        .rust_shorthand("unreachable()")
        .py(Py::Hand("unreachable"))
        .doc("Traps if reached."),
];
