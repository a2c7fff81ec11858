"""The front-end's HIR types: small frozen dataclasses the translator's type
rules (promotion, literal typing) compare and hash cheaply. ``str()`` of each
is its ``.zir`` spelling, which is how they reach the native builder
(:mod:`zyntax.frontend.emit`)."""

from __future__ import annotations

from dataclasses import dataclass

# --------------------------------------------------------------------------- types


@dataclass(frozen=True)
class Scalar:
    name: str

    def __str__(self) -> str:
        return self.name

    @property
    def bits(self) -> int:
        return _SCALAR_BITS[self.name]

    @property
    def is_bool(self) -> bool:
        return self.name == "bool"

    @property
    def is_float(self) -> bool:
        return self.name in ("f16", "bf16", "f32", "f64")

    @property
    def is_signed(self) -> bool:
        return self.name[0] == "i"

    @property
    def is_unsigned(self) -> bool:
        return self.name[0] == "u"

    @property
    def is_int(self) -> bool:
        return self.is_signed or self.is_unsigned

    @property
    def size_bytes(self) -> int:
        return max(1, self.bits // 8)


_SCALAR_BITS = {
    "bool": 1,
    "i8": 8,
    "i16": 16,
    "i32": 32,
    "i64": 64,
    "u8": 8,
    "u16": 16,
    "u32": 32,
    "u64": 64,
    "f16": 16,
    "bf16": 16,
    "f32": 32,
    "f64": 64,
}
SCALAR_NAMES = tuple(_SCALAR_BITS)


@dataclass(frozen=True)
class Ptr:
    space: str
    pointee: HType

    def __str__(self) -> str:
        return f"ptr<{self.space}, {self.pointee}>"


@dataclass(frozen=True)
class ArrayType:
    elem: HType
    length: int

    def __str__(self) -> str:
        return f"[{self.elem}; {self.length}]"


@dataclass(frozen=True)
class Frag:
    kind: str  # "a" | "b" | "acc"
    shape: str  # "m16n16k16" ...
    elem: Scalar
    layout: str | None  # None for accumulators

    def __str__(self) -> str:
        tail = f", {self.layout}" if self.layout is not None else ""
        return f"frag<{self.kind}, {self.shape}, {self.elem}{tail}>"


@dataclass(frozen=True)
class TensorMapT:
    """A TMA tensor map (issue 13): only a kernel parameter."""

    def __str__(self) -> str:
        return "tensormap"


@dataclass(frozen=True)
class Vec:
    """A vector value: wgmma accumulators (``vec<f32, 64>``), packed half
    pairs and 2/4-element vector loads and stores."""

    elem: Scalar
    lanes: int

    def __str__(self) -> str:
        return f"vec<{self.elem}, {self.lanes}>"


HType = Scalar | Ptr | ArrayType | Frag | TensorMapT | Vec

BOOL = Scalar("bool")
I32 = Scalar("i32")
I64 = Scalar("i64")
U32 = Scalar("u32")
U64 = Scalar("u64")
F16 = Scalar("f16")
F32 = Scalar("f32")
F64 = Scalar("f64")


def scalar(name: str) -> Scalar:
    if name not in _SCALAR_BITS:
        raise ValueError(f"unknown scalar type {name!r}")
    return Scalar(name)
