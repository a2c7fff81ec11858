//! Calls and branches: callees and their signatures, branch targets and
//! their arguments.

use crate::ir::{FunctionKind, InstData};
use crate::op::Op;
use crate::types::Type;

use super::diag::Ctx;
use super::inst::{same, Check};

pub(super) fn check_call(cx: &Ctx, d: &InstData, name: &str, a: &[&Type], r: &[&Type]) -> Check {
    let f = cx.f;
    let Some(callee) = cx.m.function(name) else {
        return Err(format!("call to @{name}, which is not in the module"));
    };
    match (&f.kind, &callee.kind) {
        (_, FunctionKind::Kernel(_)) => {
            return Err(format!(
                "@{name} is a kernel; kernels are launched, not called"
            ))
        }
        (FunctionKind::Host, FunctionKind::Device) => {
            return Err(format!(
                "host function calls device function @{name}; launch a kernel instead"
            ))
        }
        (FunctionKind::Kernel(_) | FunctionKind::Device, FunctionKind::Host) => {
            return Err(format!("GPU function calls host function @{name}"))
        }
        _ => {}
    }
    let params: Vec<Option<&Type>> = callee
        .entry()
        .and_then(|b| callee.blocks.get(b.index()))
        .map(|bd| {
            bd.params
                .iter()
                .map(|v| callee.values.get(v.index()).map(|x| &x.ty))
                .collect()
        })
        .unwrap_or_default();
    if a.len() != params.len() {
        return Err(format!(
            "@{name} takes {} argument{}, got {}",
            params.len(),
            if params.len() == 1 { "" } else { "s" },
            a.len()
        ));
    }
    for (n, (got, want)) in a.iter().zip(&params).enumerate() {
        if let Some(want) = want {
            same(&format!("argument {n}"), got, want)?;
        }
    }
    if d.results.len() != callee.returns.len() {
        return Err(format!(
            "@{name} returns {} value{}, the call has {} result{}",
            callee.returns.len(),
            if callee.returns.len() == 1 { "" } else { "s" },
            d.results.len(),
            if d.results.len() == 1 { "" } else { "s" }
        ));
    }
    for (n, (got, want)) in r.iter().zip(&callee.returns).enumerate() {
        same(&format!("result {n}"), got, want)?;
    }
    Ok(())
}

pub(super) fn check_branch(cx: &Ctx, d: &InstData, a: &[&Type]) -> Check {
    let f = cx.f;
    let is_jump = d.op == Op::Jump;
    let (nargs, ntargets) = if is_jump { (0, 1) } else { (1, 2) };
    if d.args.len() != nargs || !d.results.is_empty() || d.targets.len() != ntargets {
        return Err(format!(
            "`{}` takes {nargs} operand{}, {ntargets} target{} and no results, got {}, {} and {}",
            d.op.mnemonic(),
            if nargs == 1 { "" } else { "s" },
            if ntargets == 1 { "" } else { "s" },
            d.args.len(),
            d.targets.len(),
            d.results.len()
        ));
    }
    if !is_jump {
        same("the branch condition", a[0], &Type::BOOL)?;
    }
    let entry = f.entry();
    let mut problems = Vec::new();
    if let [t0, t1] = d.targets.as_slice() {
        // LLVM allows two phi entries for one predecessor only if they agree.
        if t0.block == t1.block && t0.args != t1.args {
            problems.push(format!(
                "both targets are {} but pass different arguments; use select on the arguments and a jump",
                t0.block
            ));
        }
    }
    for t in &d.targets {
        let tb = t.block;
        if !f.has_block(tb) {
            problems.push(format!(
                "target {tb} does not exist ({} blocks)",
                f.blocks.len()
            ));
            continue;
        }
        if cx.layout_pos[tb.index()].is_none() {
            problems.push(format!("target {tb} is not in the layout"));
            continue;
        }
        if Some(tb) == entry {
            problems.push(format!(
                "target {tb} is the entry block, which cannot be branched to (add a loop header block)"
            ));
        }
        let params = &f.blocks[tb.index()].params;
        if params.len() != t.args.len() {
            problems.push(format!(
                "{tb} takes {} argument{}, got {}",
                params.len(),
                if params.len() == 1 { "" } else { "s" },
                t.args.len()
            ));
            continue;
        }
        for (n, (arg, p)) in t.args.iter().zip(params).enumerate() {
            let (Some(at), Some(pt)) = (cx.ty(*arg), cx.ty(*p)) else {
                continue;
            };
            if at != pt {
                problems.push(format!(
                    "argument {n} to {tb} ({arg}) has type {at}, but the parameter {p} has type {pt}"
                ));
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems.join("; "))
    }
}
