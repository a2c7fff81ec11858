"""Hand-written PTX kernels that exercise the runtime independently of the
compiler. ``test_runtime_cpu.py`` checks that ptxas accepts each of them (no
GPU needed); ``test_runtime_gpu.py`` runs them."""

from __future__ import annotations

HEADER = """.version 7.0
.target sm_70
.address_size 64
"""

EMPTY = (
    HEADER
    + """
.visible .entry empty()
{
    ret;
}
"""
)

# y[i] = a * x[i] + y[i] for i < n; parameters as in examples/saxpy.zir.
SAXPY = (
    HEADER
    + """
.visible .entry saxpy(
    .param .u32 saxpy_n,
    .param .f32 saxpy_a,
    .param .u64 .ptr .global .align 4 saxpy_x,
    .param .u64 .ptr .global .align 4 saxpy_y
)
{
    .reg .pred %p<2>;
    .reg .b32 %r<6>;
    .reg .f32 %f<5>;
    .reg .b64 %rd<8>;

    ld.param.u32 %r1, [saxpy_n];
    ld.param.f32 %f1, [saxpy_a];
    ld.param.u64 %rd1, [saxpy_x];
    ld.param.u64 %rd2, [saxpy_y];
    mov.u32 %r2, %ctaid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r4, %tid.x;
    mad.lo.s32 %r5, %r2, %r3, %r4;
    setp.ge.u32 %p1, %r5, %r1;
    @%p1 bra DONE;
    cvta.to.global.u64 %rd3, %rd1;
    cvta.to.global.u64 %rd4, %rd2;
    mul.wide.u32 %rd5, %r5, 4;
    add.s64 %rd6, %rd3, %rd5;
    add.s64 %rd7, %rd4, %rd5;
    ld.global.f32 %f2, [%rd6];
    ld.global.f32 %f3, [%rd7];
    fma.rn.f32 %f4, %f1, %f2, %f3;
    st.global.f32 [%rd7], %f4;
DONE:
    ret;
}
"""
)

# out[i] = smem[nwords - 1 - i] after smem[i] = 3 * i + 1, over dynamic shared
# memory of nwords 32-bit words (one block, strided loops).
DYN_SMEM = (
    HEADER
    + """
.extern .shared .align 16 .b8 dsmem[];

.visible .entry reverse_smem(
    .param .u64 .ptr .global .align 4 rs_out,
    .param .u32 rs_nwords
)
{
    .reg .pred %p<3>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<8>;

    ld.param.u64 %rd1, [rs_out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u32 %r1, [rs_nwords];
    mov.u32 %r2, %tid.x;
    mov.u32 %r3, %ntid.x;
    mov.u32 %r10, dsmem;
    mov.u32 %r4, %r2;
FILL:
    setp.ge.u32 %p1, %r4, %r1;
    @%p1 bra FILLED;
    mad.lo.s32 %r5, %r4, 3, 1;
    shl.b32 %r6, %r4, 2;
    add.s32 %r7, %r10, %r6;
    st.shared.u32 [%r7], %r5;
    add.s32 %r4, %r4, %r3;
    bra FILL;
FILLED:
    bar.sync 0;
    mov.u32 %r4, %r2;
COPY:
    setp.ge.u32 %p2, %r4, %r1;
    @%p2 bra DONE;
    sub.s32 %r8, %r1, %r4;
    sub.s32 %r8, %r8, 1;
    shl.b32 %r6, %r8, 2;
    add.s32 %r7, %r10, %r6;
    ld.shared.u32 %r9, [%r7];
    mul.wide.u32 %rd2, %r4, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r9;
    add.s32 %r4, %r4, %r3;
    bra COPY;
DONE:
    ret;
}
"""
)

# A kernel with launch bounds of 128 threads: out[tid] = tid.
BOUNDED = (
    HEADER
    + """
.visible .entry bounded(
    .param .u64 .ptr .global .align 4 b_out
)
.maxntid 128, 1, 1
{
    .reg .b32 %r<2>;
    .reg .b64 %rd<4>;
    ld.param.u64 %rd1, [b_out];
    cvta.to.global.u64 %rd1, %rd1;
    mov.u32 %r1, %tid.x;
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.u32 [%rd3], %r1;
    ret;
}
"""
)

# out[i] = i * step for i < n, 3-D grid/block flattened: checks all six dims.
IOTA3D = (
    HEADER
    + """
.visible .entry iota3d(
    .param .u64 .ptr .global .align 8 i_out,
    .param .u64 i_step
)
{
    .reg .b32 %r<24>;
    .reg .b64 %rd<8>;
    ld.param.u64 %rd1, [i_out];
    cvta.to.global.u64 %rd1, %rd1;
    ld.param.u64 %rd2, [i_step];
    // block linear id = (ctaid.z * nctaid.y + ctaid.y) * nctaid.x + ctaid.x
    mov.u32 %r1, %ctaid.x;
    mov.u32 %r2, %ctaid.y;
    mov.u32 %r3, %ctaid.z;
    mov.u32 %r4, %nctaid.x;
    mov.u32 %r5, %nctaid.y;
    mad.lo.s32 %r6, %r3, %r5, %r2;
    mad.lo.s32 %r7, %r6, %r4, %r1;
    // thread linear id = (tid.z * ntid.y + tid.y) * ntid.x + tid.x
    mov.u32 %r8, %tid.x;
    mov.u32 %r9, %tid.y;
    mov.u32 %r10, %tid.z;
    mov.u32 %r11, %ntid.x;
    mov.u32 %r12, %ntid.y;
    mov.u32 %r13, %ntid.z;
    mad.lo.s32 %r14, %r10, %r12, %r9;
    mad.lo.s32 %r15, %r14, %r11, %r8;
    mul.lo.s32 %r16, %r11, %r12;
    mul.lo.s32 %r17, %r16, %r13;
    mad.lo.s32 %r18, %r7, %r17, %r15;
    cvt.u64.u32 %rd3, %r18;
    mul.lo.s64 %rd4, %rd3, %rd2;
    shl.b64 %rd5, %rd3, 3;
    add.s64 %rd6, %rd1, %rd5;
    st.global.u64 [%rd6], %rd4;
    ret;
}
"""
)

ALL = {
    "empty": EMPTY,
    "saxpy": SAXPY,
    "reverse_smem": DYN_SMEM,
    "bounded": BOUNDED,
    "iota3d": IOTA3D,
}
