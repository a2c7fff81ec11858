//! Runs a lowered nest ([`NestKernel`]) on the reference interpreter over
//! the spec's buffers (one byte vector each, updated in place), as a GPU
//! launcher would: each view from its buffer and offset, then the TMA
//! tensor maps of a warp-specialised kernel, then a persistent kernel's
//! program grid on a few CTAs. Shared by the nest tests and the `nest_dsl`
//! example (`#[path]`).

use zyntax_hir::tensormap::{Interleave, L2Promotion, OobFill, Swizzle, TensorMapDesc};
use zyntax_hir::Type;
use zyntax_interp::tma::InterpTensorMap;
use zyntax_interp::{Arg, Interpreter};
use zyntax_opt::nest_tile::{NestKernel, NestSpec};

/// CTAs a persistent kernel walks its program grid with (a few, so that
/// each takes several instances, as SMs do).
const INTERP_SMS: u32 = 3;

pub fn interp_launch(
    spec: &NestSpec,
    nk: &NestKernel,
    buffers: &mut [Vec<u8>],
) -> Result<(), String> {
    let size = |b: usize| spec.buffers[b].elem.size_bytes().unwrap_or(4);
    let mut args = Vec::new();
    for a in &nk.args {
        args.push(Arg::BufferAt(a.buffer, a.offset * size(a.buffer)));
        args.extend(a.extents.iter().map(|&e| Arg::Int(e.into())));
        args.extend(a.strides.iter().map(|&s| Arg::Int(s.into())));
    }
    let mut it = Interpreter::new(&nk.kernel.module).map_err(|e| e.to_string())?;
    let maps = &nk.kernel.launch.tensor_maps;
    for (i, (m, v)) in maps.iter().zip(nk.tensor_map_views()).enumerate() {
        let a = &nk.args[v];
        // The buffer's own element type: an f32 output stored through TMA
        // (the operands are 16-bit) is an f32 map, as the GPU launcher makes.
        let dtype = match spec.buffers[a.buffer].elem {
            Type::F16 => zyntax_hir::ScalarType::F16,
            Type::F32 => zyntax_hir::ScalarType::F32,
            _ => zyntax_hir::ScalarType::BF16,
        };
        it.tensor_maps.push(InterpTensorMap {
            buffer: a.buffer,
            offset: a.offset * size(a.buffer),
            desc: TensorMapDesc {
                dtype,
                dims: vec![a.extents[m.inner_dim].into(), a.extents[m.outer_dim].into()],
                strides: vec![u64::from(a.strides[m.outer_dim]) * size(a.buffer)],
                box_dims: m.box_dims.to_vec(),
                elem_strides: vec![1, 1],
                swizzle: Swizzle::B128,
                interleave: Interleave::None,
                oob_fill: OobFill::Zero,
                l2_promotion: L2Promotion::None,
            },
        });
        args.push(Arg::TensorMap(i));
    }
    let (grid, extra) = nk.launch_grid(INTERP_SMS);
    args.extend(extra.into_iter().map(|x| Arg::Int(x.into())));
    it.launch(
        &nk.kernel.name,
        grid,
        nk.kernel.launch.block,
        0,
        &args,
        buffers,
    )
    .map_err(|e| e.to_string())?;
    Ok(())
}
