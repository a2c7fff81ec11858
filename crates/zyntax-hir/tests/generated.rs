//! The instruction table is complete and the files generated from it are up to date.
//!
//! `ZYNTAX_BLESS=1 cargo test -p zyntax-hir --test generated` rewrites the
//! generated files and regions (see `zyntax_hir::gen::FILES`, `REGIONS`) from the table.

use std::collections::HashSet;
use std::path::PathBuf;
use zyntax_hir::gen::{splice, FILES, REGIONS};
use zyntax_hir::table::{find_mnemonic, op_by_mnemonic, OPS};
use zyntax_hir::*;

fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

#[test]
fn generated_files_match_the_table() {
    let bless = std::env::var_os("ZYNTAX_BLESS").is_some();
    let mut stale = Vec::new();
    for r in REGIONS {
        let path = repo_root().join(r.path);
        let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", r.path));
        let want = splice(&text, r, &(r.render)())
            .unwrap_or_else(|| panic!("{}: generated-region markers missing", r.path));
        if want != text {
            if bless {
                std::fs::write(&path, want).unwrap();
            } else {
                stale.push(r.path);
            }
        }
    }
    for f in FILES {
        let path = repo_root().join(f.path);
        let want = (f.render)();
        if std::fs::read_to_string(&path).ok().as_deref() != Some(want.as_str()) {
            if bless {
                std::fs::write(&path, want).unwrap();
            } else {
                stale.push(f.path);
            }
        }
    }
    assert!(
        stale.is_empty(),
        "generated files or regions out of date in {stale:?}; run `ZYNTAX_BLESS=1 cargo test -p zyntax-hir --test generated`"
    );
}

/// One op of every shape: each sub-op enum in full, one of each other variant.
fn every_op() -> Vec<Op> {
    let fr = FragType {
        kind: FragKind::A,
        shape: MmaShape::M16N16K16,
        elem: ScalarType::F16,
        layout: Some(Layout::Row),
    };
    let mut ops = vec![
        Op::Const(ConstValue::Int(1)),
        Op::Fma,
        Op::Select,
        Op::Cast,
        Op::Bitcast,
        Op::Extract(0),
        Op::Insert(0),
        Op::Load,
        Op::Store,
        Op::PtrAdd,
        Op::PtrCast,
        Op::Alloca {
            elem: Type::F32,
            count: 1,
        },
        Op::SharedAlloc {
            elem: Type::F32,
            count: 1,
            align: 0,
        },
        Op::DynShared {
            elem: Type::F32,
            align: 0,
        },
        Op::LaneId,
        Op::Barrier,
        Op::WarpSync,
        Op::AtomicCas {
            scope: Scope::Device,
        },
        Op::MmaLoad {
            frag: fr,
            layout: Layout::Row,
        },
        Op::MmaFill,
        Op::Mma,
        Op::MmaStore {
            layout: Layout::Row,
        },
        Op::CpAsync {
            bytes: 16,
            cache: CacheHint::Cg,
        },
        Op::CpAsyncCommit,
        Op::CpAsyncWait(0),
        Op::FenceProxyAsync,
        Op::FenceMbarrierInit,
        Op::Call("f".into()),
        Op::Jump,
        Op::Branch,
        Op::Return,
        Op::Unreachable,
    ];
    ops.extend(MbarrierOp::ALL.iter().map(|&m| Op::Mbarrier(m)));
    for &d in Dim::ALL {
        ops.extend([
            Op::ThreadIdx(d),
            Op::BlockIdx(d),
            Op::BlockDim(d),
            Op::GridDim(d),
        ]);
    }
    ops.extend(Scope::ALL.iter().map(|&s| Op::Fence(s)));
    ops.extend(BinOp::ALL.iter().map(|&o| Op::Binary(o)));
    ops.extend(UnOp::ALL.iter().map(|&o| Op::Unary(o)));
    ops.extend(CmpOp::ALL.iter().map(|&o| Op::Cmp(o)));
    for &op in AtomicOp::ALL {
        ops.push(Op::Atomic {
            op,
            scope: Scope::Block,
        });
    }
    ops.extend(
        ShflMode::ALL
            .iter()
            .map(|&mode| Op::Shfl { mode, width: 32 }),
    );
    ops.extend(VoteMode::ALL.iter().map(|&m| Op::Vote(m)));
    ops.extend(MatchMode::ALL.iter().map(|&m| Op::Match(m)));
    // issue 12 (warp-sync)
    ops.extend(BitOp::ALL.iter().map(|&b| Op::Bits(b)));
    for &op in AtomicOp::ALL {
        ops.push(Op::Red {
            op,
            scope: Scope::Device,
        });
    }
    ops.extend([
        Op::LoadAcquire(Scope::Device),
        Op::StoreRelease(Scope::System),
        Op::FenceAcqRel(Scope::Block),
        Op::CompilerFence,
    ]);
    ops.extend(ReduxOp::ALL.iter().map(|&r| Op::Redux(r)));
    // Warp MMA and ldmatrix/stmatrix (issue 12 items 1-2).
    ops.extend(MmaElem::ALL.iter().map(|&elem| Op::MmaSync {
        shape: elem.shape(),
        elem,
    }));
    ops.extend([
        Op::Ldmatrix {
            num: 4,
            trans: true,
        },
        Op::Stmatrix {
            num: 4,
            trans: false,
        },
    ]);
    ops.extend(ApproxOp::ALL.iter().map(|&o| Op::Approx(o)));
    ops.extend([Op::LoadCached(CacheOp::Cs), Op::StoreCached(CacheOp::Wt)]);
    // Warpgroup MMA and warp specialisation (issue 13 items 1 and 5).
    ops.extend(Swizzle::ALL.iter().map(|&s| Op::WgmmaDesc(s)));
    ops.extend([
        Op::Wgmma(Wgmma {
            n: 64,
            a: MmaElem::Bf16,
            b: MmaElem::Bf16,
            trans_a: true,
            trans_b: false,
            neg_a: false,
            neg_b: true,
        }),
        Op::WgmmaZero,
        Op::WgmmaFence,
        Op::WgmmaCommit,
        Op::WgmmaWait(1),
        Op::Setmaxnreg {
            count: 240,
            inc: true,
        },
        Op::ElectSync,
    ]);
    // TMA and bulk copies (issue 13 item 2).
    ops.extend([
        Op::TmaLoad { multicast: false },
        Op::TmaLoad { multicast: true },
        Op::TmaStore,
        Op::BulkCopyG2S,
        Op::BulkCopyS2G,
        Op::BulkCommitGroup,
        Op::BulkWaitGroup {
            pending: 0,
            read: false,
        },
        Op::BulkWaitGroup {
            pending: 1,
            read: true,
        },
        Op::PrefetchTensormap,
    ]);
    ops.extend(BulkRedOp::ALL.iter().map(|&r| Op::TmaReduce(r)));
    // issue 12 (rest)
    for arrive in [false, true] {
        ops.push(Op::NamedBarrier {
            arrive,
            id: 1,
            count: 64,
        });
    }
    ops.extend(PackFmt::ALL.iter().map(|&f| Op::CvtPack(f)));
    ops.push(Op::CvtUnpack(PackFmt::E4m3x2));
    // h13-cluster: clusters, DSMEM, PDL, grid sync.
    for &d in Dim::ALL {
        ops.extend([
            Op::ClusterIdx(d),
            Op::ClusterDim(d),
            Op::ClusterBlockIdx(d),
            Op::ClusterGridDim(d),
        ]);
    }
    ops.extend(ClusterBarrierOp::ALL.iter().map(|&c| Op::ClusterBarrier(c)));
    ops.extend(GriddepOp::ALL.iter().map(|&g| Op::Griddep(g)));
    ops.extend([
        Op::ClusterCtaRank,
        Op::ClusterNctaRank,
        Op::IsExplicitCluster,
        Op::Mapa,
        Op::MbarrierArriveCluster,
        Op::MbarrierArriveClusterRelaxed,
        Op::GridSync,
    ]);
    ops.extend(BulkRedOp::ALL.iter().map(|&r| Op::BulkReduce(r)));
    ops.push(Op::GlobalAddr("g".into()));
    ops
}

#[test]
fn every_op_has_exactly_one_row() {
    let keys: HashSet<_> = OPS.iter().map(|d| (d.family, d.sub)).collect();
    assert_eq!(keys.len(), OPS.len(), "duplicate table keys");
    let used: HashSet<_> = every_op().iter().map(|op| op.key()).collect();
    for op in every_op() {
        // `def` panics on a missing row.
        let d = op.def();
        if let Some(make) = d.op {
            assert_eq!(make(), op, "row {} builds another op", d.mnemonic);
            assert_eq!(op.mnemonic(), d.mnemonic);
            assert_eq!(op_by_mnemonic(d.mnemonic), Some(op.clone()));
        }
    }
    for d in OPS {
        assert!(
            used.contains(&(d.family, d.sub)),
            "row {} matches no op",
            d.mnemonic
        );
        assert!(
            !d.doc.is_empty() && !d.builder.is_empty(),
            "row {} lacks doc or builder",
            d.mnemonic
        );
    }
}

/// Every row's immediates are written exactly once (in its mnemonic pattern
/// or its operand template, or carried by the result type), and every op's
/// immediates read back to the op: through `Imms` and through its mnemonic.
#[test]
fn immediates_are_declared_once_and_read_back() {
    use zyntax_hir::imm::{pattern, template, ImmKind, Seg, Tok};
    for d in OPS {
        let mut written: Vec<&str> = Vec::new();
        for s in pattern(d.mnemonic) {
            match s {
                Seg::Slot { name, .. } | Seg::Flag(name) => written.push(name),
                Seg::Lit(_) => {}
            }
        }
        for t in template(d.syntax) {
            if let Tok::Imm(name) = t {
                written.push(name);
            }
        }
        if !d.parsed() {
            continue; // `const`, `jump`, `br`: spelled by hand
        }
        let defs = d.imms.map_or(&[][..], |x| x.defs);
        for name in &written {
            assert!(
                defs.iter().any(|x| x.name == *name),
                "row {}: `{name}` is written but not declared",
                d.mnemonic
            );
        }
        for x in defs {
            let n = written.iter().filter(|w| **w == x.name).count();
            let expected = usize::from(x.kind != ImmKind::ResultFrag);
            assert_eq!(
                n, expected,
                "row {}: `{}` written {n} times",
                d.mnemonic, x.name
            );
        }
    }
    for op in every_op() {
        let d = op.def();
        let Some(imms) = d.imms else { continue };
        let values = (imms.values)(&op);
        assert_eq!(values.len(), imms.defs.len(), "{}", d.mnemonic);
        assert_eq!(
            (imms.build)(&mut values.clone().into_iter()),
            Some(op.clone())
        );
        let m = op.mnemonic();
        let (row, written) = find_mnemonic(&m).unwrap_or_else(|e| panic!("{m}: {e}"));
        assert_eq!((row.family, row.sub), (d.family, d.sub), "{m}");
        let frag = match &op {
            Op::MmaLoad { frag, .. } => Some(*frag),
            _ => None,
        };
        // Immediates written after the mnemonic come from the op itself here.
        let mut all = written;
        for (x, v) in imms.defs.iter().zip(values) {
            if !all.iter().any(|(n, _)| *n == x.name) {
                all.push((x.name, v));
            }
        }
        assert_eq!(d.build(all, frag), Some(op.clone()), "{m}");
    }
}

/// A row reached through another row's Python method names a method that
/// exists: one row generates it (`Py::Method`), and no two rows do.
#[test]
fn python_methods_are_declared_once() {
    use zyntax_hir::table::Py;
    let mut declared = HashSet::new();
    for d in OPS {
        if let Py::Method(m) = d.py {
            assert!(declared.insert(m.name), "two rows declare `{}`", m.name);
            // Every parameter name is unique (they become Rust bindings).
            let names: HashSet<_> = m.args.iter().map(|a| a.name()).collect();
            assert_eq!(
                names.len(),
                m.args.len(),
                "`{}` repeats a parameter",
                m.name
            );
        }
    }
    for d in OPS {
        if let Py::Via(name) = d.py {
            assert!(
                declared.contains(name),
                "row `{}` is reached through `{name}`, which no row declares",
                d.mnemonic
            );
        }
    }
}

/// The scalar docs generated from the rows (`docs/lowering.md`'s lowering
/// lines, `docs/hir.md`'s typing lines, `docs/zir.md`'s op lists) say
/// something for every one- and two-operand op: each has its lowering note
/// and its doc, and only those rows carry a lowering note.
#[test]
fn scalar_rows_document_themselves() {
    let mut scalar = 0;
    for d in OPS {
        let one_or_two = d.family == "unary" || d.family == "binary";
        let (llvm, ptx) = d.lower;
        if one_or_two {
            scalar += 1;
            assert!(
                !llvm.is_empty() && !ptx.is_empty() && !d.doc.is_empty(),
                "{}: its line needs a doc and a `lower` note",
                d.mnemonic
            );
        } else {
            assert!(
                llvm.is_empty() && ptx.is_empty(),
                "{}: only unary/binary rows have generated lowering lines",
                d.mnemonic
            );
        }
    }
    assert_eq!(scalar, UnOp::ALL.len() + BinOp::ALL.len());
    // Each op is in each generated list, once.
    let docs = [
        zyntax_hir::gen::scalar_lowering_table(),
        zyntax_hir::gen::scalar_typing_table(),
    ];
    for op in UnOp::ALL
        .iter()
        .map(|o| o.name())
        .chain(BinOp::ALL.iter().map(|o| o.name()))
    {
        let line = format!("| `{op}` |");
        for doc in &docs {
            assert_eq!(doc.matches(&line).count(), 1, "{op} in\n{doc}");
        }
        assert!(zyntax_hir::gen::scalar_syntax_table().contains(&format!("`{op}`")));
    }
}

/// A row's `zyntax.lang` spelling is `name(params)` with its own name, and
/// each name is generated into `python/zyntax/_lang_ops.py` once.
#[test]
fn lang_spellings_are_calls_with_unique_names() {
    let mut seen = HashSet::new();
    for d in OPS.iter().filter(|d| !d.lang.is_empty()) {
        let name = zyntax_hir::gen::lang_name(d);
        assert!(
            !name.is_empty()
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && d.lang.ends_with(')'),
            "{}: lang spelling {:?} is not name(params)",
            d.mnemonic,
            d.lang
        );
        assert!(seen.insert(name), "{name}: two rows spell it");
        let file = zyntax_hir::gen::lang_file();
        assert!(file.contains(&format!("{name} = Primitive(\"{name}\", {:?})", d.lang)));
    }
    assert!(!seen.is_empty());
}
