//! A hand-built LLVM module goes through every arch's target machine and
//! ptxas: proves the toolchain (static LLVM, NVPTX features, ptxas runner).

use inkwell::context::Context;
use inkwell::AddressSpace;
use inkwell::OptimizationLevel;
use zyntax_hir::Arch;
use zyntax_llvm::nvptx::{emit_assembly, PtxTarget, Ptxas, TRIPLE};

/// `out[tid] = a[tid] + 1.0f` with the ptx_kernel calling convention.
fn toy_ptx(target: PtxTarget) -> String {
    let ctx = Context::create();
    let module = ctx.create_module("toy");
    let tm = target
        .machine(OptimizationLevel::Aggressive)
        .expect("target machine");
    module.set_triple(&tm.get_triple());
    module.set_data_layout(&tm.get_target_data().get_data_layout());
    let f32t = ctx.f32_type();
    let gptr = ctx.ptr_type(AddressSpace::from(1u16));
    let fty = ctx.void_type().fn_type(&[gptr.into(), gptr.into()], false);
    let f = module.add_function("toy", fty, None);
    f.set_call_conventions(71); // PTX_Kernel
    let b = ctx.create_builder();
    b.position_at_end(ctx.append_basic_block(f, "entry"));
    let tid_fn = module.add_function(
        "llvm.nvvm.read.ptx.sreg.tid.x",
        ctx.i32_type().fn_type(&[], false),
        None,
    );
    let tid = b
        .build_call(tid_fn, &[], "tid")
        .unwrap()
        .try_as_basic_value()
        .basic()
        .unwrap();
    let idx = b
        .build_int_z_extend(tid.into_int_value(), ctx.i64_type(), "idx")
        .unwrap();
    let a = f.get_nth_param(0).unwrap().into_pointer_value();
    let out = f.get_nth_param(1).unwrap().into_pointer_value();
    let pa = unsafe { b.build_gep(f32t, a, &[idx], "pa").unwrap() };
    let po = unsafe { b.build_gep(f32t, out, &[idx], "po").unwrap() };
    let v = b.build_load(f32t, pa, "v").unwrap().into_float_value();
    let w = b.build_float_add(v, f32t.const_float(1.0), "w").unwrap();
    b.build_store(po, w).unwrap();
    b.build_return(None).unwrap();
    module.verify().expect("LLVM verifier");
    emit_assembly(&tm, &module).expect("emit")
}

#[test]
fn toy_module_assembles_for_every_arch() {
    let ptxas = Ptxas::locate().expect("ptxas must be installed (tests never skip)");
    for arch in Arch::ALL {
        let target = PtxTarget::new(arch);
        let ptx = toy_ptx(target);
        assert!(ptx.contains(&format!(".target {}", arch.name())), "{ptx}");
        assert!(ptx.contains(&format!(".version {}", target.ptx)), "{ptx}");
        assert!(ptx.contains(".visible .entry toy("), "{ptx}");
        assert!(ptx.contains("ld.global.f32"), "{ptx}");
        assert!(
            ptx.contains("add.f32") || ptx.contains("add.rn.f32"),
            "{ptx}"
        );
        let out = ptxas
            .assemble(&ptx, arch)
            .unwrap_or_else(|e| panic!("{arch}: {e}"));
        assert!(
            out.cubin.starts_with(b"\x7fELF"),
            "{arch}: cubin is not ELF"
        );
        // Deterministic: a second emission is byte-identical.
        assert_eq!(ptx, toy_ptx(target), "{arch}: PTX differs between runs");
    }
}

#[test]
fn datalayout_is_nvptx64() {
    let dl = PtxTarget::new(Arch::Sm80).data_layout().unwrap();
    assert_eq!(dl, "e-i64:64-i128:128-v16:16-v32:32-n16:32:64");
    assert_eq!(TRIPLE, "nvptx64-nvidia-cuda");
}

#[test]
fn ptxas_rejects_bad_ptx_with_log_and_kept_file() {
    let ptxas = Ptxas::locate().expect("ptxas");
    let bad =
        ".version 7.8\n.target sm_80\n.address_size 64\n.visible .entry k() { bogus.instr; }\n";
    match ptxas.assemble(bad, Arch::Sm80) {
        Err(zyntax_llvm::nvptx::PtxasError::Rejected {
            log,
            ptx_path,
            repro,
            ..
        }) => {
            assert!(log.contains("bogus") || log.contains("syntax"), "{log}");
            assert!(ptx_path.is_file());
            assert!(repro.contains("-arch=sm_80"));
            let _ = std::fs::remove_dir_all(ptx_path.parent().unwrap());
        }
        other => panic!("expected rejection, got {other:?}"),
    }
}

#[test]
fn ptx_features_spell_arch_and_version() {
    assert_eq!(PtxTarget::new(Arch::Sm90a).features(), "+ptx80,+sm_90a");
    assert_eq!(PtxTarget::new(Arch::Sm70).features(), "+ptx64,+sm_70");
}

#[test]
fn ptxas_reports_kernel_resources() {
    let ptxas = Ptxas::locate().expect("ptxas");
    let ptx = toy_ptx(PtxTarget::new(Arch::Sm80));
    let out = ptxas.assemble(&ptx, Arch::Sm80).unwrap();
    let ks = out.kernels();
    assert_eq!(ks.len(), 1, "{}", out.log);
    let k = &ks[0];
    assert_eq!(k.name, "toy");
    assert!(k.registers > 0 && k.registers < 64, "{k:?}\n{}", out.log);
    assert_eq!(k.spill_store_bytes, 0);
    assert!(k.const_bytes > 0, "{k:?}");
}

#[test]
fn resource_log_parser() {
    let log = "ptxas info    : 0 bytes gmem\n\
ptxas info    : Compiling entry function 'block_sum' for 'sm_80'\n\
ptxas info    : Function properties for block_sum\n    \
16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads\n\
ptxas info    : Used 13 registers, used 1 barriers, 128 bytes smem, 372 bytes cmem[0]\n\
ptxas info    : Function properties for helper\n    \
32 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Compiling entry function 'k2' for 'sm_70'\n\
ptxas info    : Function properties for k2\n    \
0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n\
ptxas info    : Used 10 registers, 380 bytes cmem[0]\n";
    let out = zyntax_llvm::PtxasOutput {
        cubin: Vec::new(),
        log: log.into(),
    };
    let ks = out.kernels();
    assert_eq!(ks.len(), 2);
    assert_eq!(
        ks[0],
        zyntax_llvm::KernelResources {
            name: "block_sum".into(),
            registers: 13,
            barriers: 1,
            stack_bytes: 16,
            spill_store_bytes: 8,
            spill_load_bytes: 4,
            shared_bytes: 128,
            const_bytes: 372,
        }
    );
    assert_eq!(
        (
            ks[1].name.as_str(),
            ks[1].registers,
            ks[1].const_bytes,
            ks[1].stack_bytes
        ),
        ("k2", 10, 380, 0)
    );
}
