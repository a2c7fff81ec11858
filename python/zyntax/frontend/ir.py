"""A small Python-side HIR recorder used by the kernel front-end.

The translator builds functions here first, because SSA construction (Braun et
al., "Simple and Efficient Construction of SSA Form", with block parameters in
place of phis) needs to add parameters to blocks whose predecessors are already
terminated and to replace trivial parameters afterwards. The finished functions
print as ``.zir`` text exactly as ``crates/zyntax-hir/src/printer.rs`` prints a
canonical function, and replay onto the native builder (``zyntax.hir``) in
:mod:`zyntax.frontend.native`.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass, field
from typing import Any

from zyntax._native import FORMAT_VERSION

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
    """A vector value (``vec<f32, 64>``): wgmma accumulators (issue 13)."""

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


# --------------------------------------------------------------------------- entities


class Value:
    """An SSA value: a block parameter or an instruction result."""

    __slots__ = ("_replaced", "def_block", "ty", "uid")

    def __init__(self, uid: int, ty: HType, def_block: Block | None) -> None:
        self.uid = uid
        self.ty = ty
        self.def_block = def_block
        self._replaced: Value | None = None

    def resolve(self) -> Value:
        v = self
        while v._replaced is not None:
            v = v._replaced
        return v

    def __repr__(self) -> str:
        return f"%{self.uid}:{self.ty}"


@dataclass
class Target:
    block: Block
    args: list[Value]


@dataclass
class Inst:
    op: str  # the .zir mnemonic, e.g. "add", "cmp.lt", "atomic.add.device"
    args: list[Value]
    results: list[Value]
    imm: dict[str, Any] = field(default_factory=dict)
    targets: list[Target] = field(default_factory=list)
    loc: tuple[str, int, int] | None = None

    @property
    def is_terminator(self) -> bool:
        return self.op in ("jump", "br", "return", "unreachable")


class Block:
    __slots__ = ("insts", "name", "params", "preds")

    def __init__(self, name: int) -> None:
        self.name = name
        self.params: list[Value] = []
        self.insts: list[Inst] = []
        self.preds: list[Block] = []

    @property
    def terminated(self) -> bool:
        return bool(self.insts) and self.insts[-1].is_terminator

    def __repr__(self) -> str:
        return f"<block {self.name}>"


class Function:
    """One HIR function under construction."""

    def __init__(
        self,
        name: str,
        kind: str,
        params: list[HType],
        returns: list[HType] | None = None,
    ) -> None:
        self.name = name
        self.kind = kind  # "kernel" | "device" | "host"
        self.returns: list[HType] = list(returns or [])
        self.attrs: list[str] = []  # header attributes in .zir order, e.g. "max_threads(256, 1, 1)"
        self._next_uid = 0
        self._next_block = 0
        self.blocks: list[Block] = []
        self.entry = self.new_block()
        self.layout: list[Block] = [self.entry]
        for t in params:
            self.add_param(self.entry, t)
        self.current: Block | None = self.entry
        self.loc: tuple[str, int, int] | None = None

    # ---- construction
    def _value(self, ty: HType, block: Block | None) -> Value:
        v = Value(self._next_uid, ty, block)
        self._next_uid += 1
        return v

    def new_block(self) -> Block:
        b = Block(self._next_block)
        self._next_block += 1
        self.blocks.append(b)
        return b

    def add_param(self, block: Block, ty: HType) -> Value:
        v = self._value(ty, block)
        block.params.append(v)
        return v

    def switch_to(self, block: Block) -> None:
        if block not in self.layout:
            self.layout.append(block)
        self.current = block

    @property
    def terminated(self) -> bool:
        return self.current is None or self.current.terminated

    def emit(
        self,
        op: str,
        args: list[Value],
        result_types: list[HType],
        imm: dict[str, Any] | None = None,
        targets: list[Target] | None = None,
    ) -> list[Value]:
        blk = self.current
        if blk is None or blk.terminated:
            # Code after return/break/continue is unreachable; record it in a fresh block
            # that nothing jumps to (it is dropped from the output).
            blk = self.new_block()
            self.current = blk
        results = [self._value(t, blk) for t in result_types]
        inst = Inst(op, [a.resolve() for a in args], results, imm or {}, targets or [], self.loc)
        blk.insts.append(inst)
        for t in inst.targets:
            t.block.preds.append(blk)
        return results

    def emit1(self, op: str, args: list[Value], ty: HType, **imm: Any) -> Value:
        return self.emit(op, args, [ty], imm)[0]

    def emit0(self, op: str, args: list[Value], **imm: Any) -> None:
        self.emit(op, args, [], imm)

    def jump(self, block: Block, args: list[Value] | None = None) -> None:
        self.emit("jump", [], [], targets=[Target(block, list(args or []))])

    def branch(self, cond: Value, then_block: Block, else_block: Block) -> None:
        self.emit("br", [cond], [], targets=[Target(then_block, []), Target(else_block, [])])

    def const(self, ty: Scalar, value: int | float | bool) -> Value:
        return self.emit1("const", [], ty, value=value)

    # ---- SSA maintenance
    def replace(self, old: Value, new: Value) -> None:
        old._replaced = new

    def terminator_of(self, block: Block) -> Inst | None:
        return block.insts[-1] if block.terminated else None

    # ---- output
    def reachable_layout(self) -> list[Block]:
        """Blocks reachable from the entry, in layout order."""
        seen = {self.entry.name}
        work = [self.entry]
        while work:
            b = work.pop()
            for inst in b.insts:
                for t in inst.targets:
                    if t.block.name not in seen:
                        seen.add(t.block.name)
                        work.append(t.block)
        return [b for b in self.layout if b.name in seen]

    def print(self) -> str:
        return print_function(self)


@dataclass
class Module:
    name: str
    functions: list[Function] = field(default_factory=list)

    def print(self) -> str:
        out = f"module {quote(self.name)} version({FORMAT_VERSION})\n"
        for f in self.functions:
            out += "\n" + print_function(f)
        return out


# --------------------------------------------------------------------------- printer


def quote(s: str) -> str:
    out = ['"']
    for c in s:
        if c == '"':
            out.append('\\"')
        elif c == "\\":
            out.append("\\\\")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif ord(c) < 32 or 127 <= ord(c) < 160:
            out.append(f"\\u{{{ord(c):x}}}")
        else:
            out.append(c)
    out.append('"')
    return "".join(out)


def format_float(v: float) -> str:
    """Rust's ``{:?}`` for f64 (shortest round-trip digits), as printer.rs prints constants."""
    if math.isnan(v):
        bits = struct.unpack("<Q", struct.pack("<d", v))[0]
        return f"nan:0x{bits:016x}"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    sign = "-" if math.copysign(1.0, v) < 0 else ""
    if v == 0.0:
        return sign + "0.0"
    # Shortest digits and decimal exponent from Python's repr (also shortest round-trip).
    mant, _, exp_s = repr(abs(v)).partition("e")
    intpart, _, frac = mant.partition(".")
    digits = (intpart + frac).lstrip("0")
    exp = int(exp_s or 0) + len(intpart.lstrip("0")) - 1
    if not intpart.lstrip("0"):
        exp = int(exp_s or 0) - (len(frac) - len(frac.lstrip("0"))) - 1
    digits = digits.rstrip("0") or "0"
    if 1e-4 <= abs(v) < 1e16:
        point = exp + 1  # digits before the decimal point
        if point <= 0:
            return sign + "0." + "0" * (-point) + digits
        if point >= len(digits):
            return sign + digits + "0" * (point - len(digits)) + ".0"
        return sign + digits[:point] + "." + digits[point:]
    m = digits[0] + ("." + digits[1:] if len(digits) > 1 else "")
    return f"{sign}{m}e{exp}"


def format_const(value: int | float | bool, ty: HType) -> str:
    if isinstance(value, bool) and isinstance(ty, Scalar) and ty.is_bool:
        return "true" if value else "false"
    if isinstance(ty, Scalar) and ty.is_float:
        return format_float(float(value))
    iv = int(value)
    if isinstance(ty, Scalar) and ty.is_unsigned:
        return str(iv & ((1 << ty.bits) - 1))
    if isinstance(ty, Scalar) and ty.is_signed and ty.bits < 64:
        m = 1 << ty.bits
        iv &= m - 1
        if iv >= m // 2:
            iv -= m
    return str(iv)


def print_function(f: Function) -> str:
    blocks = f.reachable_layout()
    bnum = {b.name: n for n, b in enumerate(blocks)}
    vnum: dict[int, int] = {}

    def num(v: Value) -> str:
        v = v.resolve()
        if v.uid not in vnum:
            vnum[v.uid] = len(vnum)
        return f"v{vnum[v.uid]}"

    # Canonical numbering: block params, then results, top to bottom.
    for b in blocks:
        for p in b.params:
            num(p)
        for inst in b.insts:
            for r in inst.results:
                num(r)

    def typed(v: Value) -> str:
        return f"{num(v)}: {v.resolve().ty}"

    def bcall(t: Target) -> str:
        name = f"block{bnum[t.block.name]}"
        if not t.args:
            return name
        return f"{name}({', '.join(num(a) for a in t.args)})"

    head = f"{f.kind} @{f.name}"
    if f.returns:
        head += " -> " + ", ".join(str(t) for t in f.returns)
    for a in f.attrs:
        head += f" {a}"
    lines = [head + " {"]
    for b in blocks:
        label = f"block{bnum[b.name]}"
        if b.params:
            label += "(" + ", ".join(typed(p) for p in b.params) + ")"
        lines.append(label + ":")
        for inst in b.insts:
            lines.append("    " + _print_inst(inst, num, typed, bcall))
    return "\n".join(lines) + "\n}\n"


def _print_inst(inst: Inst, num: Any, typed: Any, bcall: Any) -> str:
    out = ""
    if inst.results:
        out = ", ".join(typed(r) for r in inst.results) + " = "
    out += inst.op
    args = ", ".join(num(a) for a in inst.args)
    imm = inst.imm
    op = inst.op
    if op == "const":
        out += " " + format_const(imm["value"], inst.results[0].ty)
    elif op in ("extract", "insert"):
        out += f" {args}, {imm['lane']}"
    elif op in ("alloca", "shared_alloc"):
        out += f" {imm['elem']}, {imm['count']}"
    elif op == "dyn_shared":
        out += f" {imm['elem']}"
    elif op.startswith("shfl."):
        out += f" {args} width {imm['width']}"
    elif op in ("cp.async.wait", "bulk.wait_group", "bulk.wait_group.read"):
        out += f" {imm['pending']}"
    elif op == "call":
        out += f" @{imm['callee']}"
        if args:
            out += f" {args}"
    elif op == "jump":
        out += " " + bcall(inst.targets[0])
    elif op == "br":
        out += f" {args}" + "".join(f", {bcall(t)}" for t in inst.targets)
    elif args:
        out += f" {args}"
    return out
