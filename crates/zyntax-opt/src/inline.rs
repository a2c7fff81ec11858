//! HIR inliner: replaces `call @g` by a copy of `g`'s body.
//!
//! The call's block is split at the call: the call becomes a `jump` to the
//! copied entry block (passing the call's arguments as its parameters), every
//! `return` of the copy becomes a `jump` to a continuation block whose
//! parameters *are* the call's former results, so no use needs rewriting.

use zyntax_hir::{
    BlockCall, BlockData, BlockId, Function, InstData, InstId, Op, ValueData, ValueDef, ValueId,
};

/// Inline the call `call` (an instruction of `f` in block `block`) with a copy of `callee`.
/// Returns false (and changes nothing) if the call does not match the callee's signature.
pub fn inline_call(f: &mut Function, block: BlockId, call: InstId, callee: &Function) -> bool {
    let Some(cd) = f.insts.get(call.index()) else {
        return false;
    };
    let Some(entry) = callee.entry() else {
        return false;
    };
    if cd.args.len() != callee.params().len() || cd.results.len() != callee.returns.len() {
        return false;
    }
    let Some(pos) = f
        .blocks
        .get(block.index())
        .and_then(|bd| bd.insts.iter().position(|i| *i == call))
    else {
        return false;
    };
    let call_args = cd.args.clone();
    let call_results = cd.results.clone();
    let loc = cd.loc.clone();

    // Continuation block: the instructions after the call; its params are the call's results.
    let cont = BlockId::from_index(f.blocks.len());
    let tail: Vec<InstId> = f.blocks[block.index()].insts.split_off(pos + 1);
    for (k, r) in call_results.iter().enumerate() {
        if let Some(v) = f.values.get_mut(r.index()) {
            v.def = ValueDef::Param(cont, k as u32);
        }
    }
    f.blocks.push(BlockData {
        params: call_results,
        insts: tail,
    });

    // Copy the callee's arenas with fresh ids.
    let vbase = f.values.len();
    let bbase = f.blocks.len();
    let ibase = f.insts.len();
    let mv = |v: ValueId| ValueId::from_index(vbase + v.index());
    let mb = |b: BlockId| BlockId::from_index(bbase + b.index());
    let mi = |i: InstId| InstId::from_index(ibase + i.index());
    for v in &callee.values {
        f.values.push(ValueData {
            ty: v.ty.clone(),
            def: match v.def {
                ValueDef::Param(b, n) => ValueDef::Param(mb(b), n),
                ValueDef::Result(i, n) => ValueDef::Result(mi(i), n),
            },
        });
    }
    for bd in &callee.blocks {
        f.blocks.push(BlockData {
            params: bd.params.iter().map(|v| mv(*v)).collect(),
            insts: bd.insts.iter().map(|i| mi(*i)).collect(),
        });
    }
    for d in &callee.insts {
        let mut nd = InstData {
            op: d.op.clone(),
            args: d.args.iter().map(|v| mv(*v)).collect(),
            results: d.results.iter().map(|v| mv(*v)).collect(),
            targets: d
                .targets
                .iter()
                .map(|t| BlockCall {
                    block: mb(t.block),
                    args: t.args.iter().map(|v| mv(*v)).collect(),
                })
                .collect(),
            // Keep the callee's own location: diagnostics point at the source line.
            loc: d.loc.clone().or_else(|| loc.clone()),
        };
        if nd.op == Op::Return {
            nd.op = Op::Jump;
            nd.targets = vec![BlockCall {
                block: cont,
                args: std::mem::take(&mut nd.args),
            }];
        }
        f.insts.push(nd);
    }

    // The call becomes a jump into the copied entry.
    if let Some(cd) = f.insts.get_mut(call.index()) {
        cd.op = Op::Jump;
        cd.args = Vec::new();
        cd.results = Vec::new();
        cd.targets = vec![BlockCall {
            block: mb(entry),
            args: call_args,
        }];
    }

    // Layout: caller block, copied blocks, continuation.
    let at = f
        .layout
        .iter()
        .position(|b| *b == block)
        .map_or(f.layout.len(), |p| p + 1);
    let mut new_blocks: Vec<BlockId> = callee.layout.iter().map(|b| mb(*b)).collect();
    new_blocks.push(cont);
    f.layout.splice(at..at, new_blocks);
    true
}

/// Number of instructions (a size estimate for inlining decisions).
pub fn size(f: &Function) -> usize {
    f.insts_in_order().count()
}
