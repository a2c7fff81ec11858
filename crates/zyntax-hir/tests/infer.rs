//! Result types from the instruction table (`zyntax_hir::infer`): the row's
//! signature, scalar family or fixed result gives them; a rejected operand
//! gets the table's message; rows that do not determine them say so.

use zyntax_hir::infer::result_types;
use zyntax_hir::*;

fn op(mnemonic: &str) -> Op {
    let (d, imms) = zyntax_hir::table::find_mnemonic(mnemonic).unwrap();
    d.build(imms, None).unwrap()
}

fn infer(mnemonic: &str, args: &[Type]) -> Result<Option<Vec<Type>>, String> {
    result_types(&op(mnemonic), args)
}

#[test]
fn results_follow_the_row() {
    let (u32_, i32_, f32_, u64_) = (Type::U32, Type::I32, Type::F32, Type::U64);
    // Scalar families: the operand's type.
    assert_eq!(infer("popc", &[Type::U64]), Ok(Some(vec![u64_.clone()])));
    assert_eq!(
        infer("add", &[f32_.clone(), f32_.clone()]),
        Ok(Some(vec![f32_.clone()]))
    );
    assert_eq!(
        infer("cmp.lt", &[i32_.clone(), i32_.clone()]),
        Ok(Some(vec![Type::BOOL]))
    );
    // Signatures: a type variable bound by an operand, or a fixed type.
    assert_eq!(
        infer("redux.add", &[u32_.clone(), i32_.clone()]),
        Ok(Some(vec![i32_.clone()]))
    );
    assert_eq!(
        infer(
            "bfi",
            &[u64_.clone(), u64_.clone(), u32_.clone(), u32_.clone()]
        ),
        Ok(Some(vec![u64_.clone()]))
    );
    assert_eq!(infer("lane_id", &[]), Ok(Some(vec![u32_.clone()])));
    assert_eq!(infer("elect.sync", &[]), Ok(Some(vec![Type::BOOL])));
    assert_eq!(
        infer("match.all", &[u32_.clone(), u64_.clone()]),
        Ok(Some(vec![u32_.clone(), Type::BOOL]))
    );
    let bar = Type::ptr(AddrSpace::Shared, Type::U64);
    assert_eq!(
        infer("mbarrier.arrive", &[bar]),
        Ok(Some(vec![u64_.clone()]))
    );
    let p = Type::ptr(AddrSpace::Global, Type::F32);
    assert_eq!(
        infer("atomic.cas.device", &[p, u32_.clone(), u32_.clone()]),
        Err("`atomic.cas.device`: the expected value has type u32, expected f32".to_string())
    );
    // No results.
    assert_eq!(infer("barrier", &[]), Ok(Some(vec![])));
    assert_eq!(infer("warp_sync", &[Type::U32]), Ok(Some(vec![])));
    // Not determined by the operands: the front-end gives them.
    assert_eq!(infer("cast", &[Type::U32]), Ok(None));
    assert_eq!(infer("cvt_pack.f16x2", &[f32_.clone(), f32_]), Ok(None));
}

#[test]
fn a_rejected_operand_gets_the_tables_message() {
    assert_eq!(
        infer("popc", &[Type::F32]),
        Err("`popc` takes an integer, got f32".to_string())
    );
    assert_eq!(
        infer("redux.add", &[Type::U32, Type::F32]),
        Err("`redux.add` works on u32 or i32, got f32".to_string())
    );
    assert_eq!(
        infer("bfe", &[Type::F32, Type::U32, Type::U32]),
        Err("`bfe` works on i32, u32, i64 or u64, got f32".to_string())
    );
    let e = infer("prmt", &[Type::U32]).unwrap_err();
    assert!(e.contains("takes 3 operand"), "{e}");
}

#[test]
fn push_inferred_builds_with_the_rows_types() {
    let mut b = FunctionBuilder::kernel("k", &[Type::U64, Type::F32]);
    let (x, f) = (b.param(0), b.param(1));
    let n = b.push_inferred(op("popc"), &[x]).unwrap();
    assert_eq!(b.value_type(n[0]).unwrap(), &Type::U64);
    let e = b.push_inferred(op("popc"), &[f]).unwrap_err();
    assert_eq!(e.message, "`popc` takes an integer, got f32");
    let e = b.push_inferred(op("cast"), &[x]).unwrap_err();
    assert!(e.message.contains("does not determine"), "{}", e.message);
    assert!(b.push_inferred(op("barrier"), &[]).unwrap().is_empty());
}
