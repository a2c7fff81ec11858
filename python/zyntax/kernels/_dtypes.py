"""The element types of ``zyntax.kernels``, declared once: each zyntax dtype
name with its size and its spellings in the array protocols and libraries
(``_problem`` for matmul and ``_tensors`` for the other kernels derive their
lookup tables from this one)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    name: str  # zyntax's name (also the HIR scalar type's)
    itemsize: int
    typestr: str  # __cuda_array_interface__ / numpy `dtype.str` (bf16: an opaque 2-byte type)
    torch: str  # the torch dtype attribute (`torch.<torch>`)
    numpy: str | None  # numpy's dtype name (bfloat16: ml_dtypes'); None when numpy has none


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("f32", 4, "<f4", "float32", "float32"),
        DType("f16", 2, "<f2", "float16", "float16"),
        DType("bf16", 2, "<V2", "bfloat16", "bfloat16"),
        DType("i32", 4, "<i4", "int32", "int32"),
        DType("i64", 8, "<i8", "int64", "int64"),
        DType("e4m3", 1, "|u1", "float8_e4m3fn", None),
    )
}
