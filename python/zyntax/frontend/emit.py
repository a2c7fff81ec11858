"""The translator's emission layer over the native builder (``zyntax.hir``).

One :class:`Emitter` per translated function wraps one
``zyntax.hir.FunctionBuilder``: instructions go straight into the Rust
builder by their ``.zir`` mnemonic (``FunctionBuilder.inst``, the op table's
row), with the Python source location set before each statement, and local
variables are the builder's SSA variables (``declare_var``/``def_var``/
``use_var``/``seal_block``: Braun et al.'s construction, in Rust). There is
no Python-side IR, no ``.zir`` text to parse and no JSON to patch.

:class:`Value` pairs a native value with its front-end type
(:mod:`zyntax.frontend.hirtypes`), known when the value is made, so the
translator's type rules never ask the native side for it. An instruction the
op table's type signature rejects raises :class:`KernelTypeError` with the
table's message at the current statement's Python line.
"""

from __future__ import annotations

import re
from typing import Any

from zyntax import hir
from zyntax.errors import BuildError
from zyntax.frontend.errors import KernelTypeError
from zyntax.frontend.hirtypes import (
    SCALAR_NAMES,
    ArrayType,
    Frag,
    HType,
    Ptr,
    Scalar,
    TensorMapT,
    Vec,
    scalar,
)

_TYPES = (Scalar, Ptr, ArrayType, Frag, TensorMapT, Vec)
_NATIVE: dict[HType, Any] = {}
_FRONT: dict[str, HType] = {}
_VEC = re.compile(r"vec<(\w+), (\d+)>")


def native_type(t: HType) -> Any:
    """The ``zyntax.hir.Type`` of a front-end type (memoised)."""
    n = _NATIVE.get(t)
    if n is None:
        n = _NATIVE[t] = hir.Type.parse(str(t))
    return n


def front_type(n: Any) -> HType:
    """The front-end type of a ``zyntax.hir.Type`` the op table inferred
    (scalars, vectors and pointers to them; memoised by spelling)."""
    key = str(n)
    t = _FRONT.get(key)
    if t is None:
        t = _FRONT[key] = _parse(key)
    return t


def _parse(s: str) -> HType:
    if s in SCALAR_NAMES:
        return scalar(s)
    if s == "tensormap":
        return TensorMapT()
    m = _VEC.fullmatch(s)
    if m is not None:
        return Vec(scalar(m.group(1)), int(m.group(2)))
    if s.startswith("ptr<") and s.endswith(">"):
        space, pointee = s[4:-1].split(", ", 1)
        return Ptr(space, _parse(pointee))
    raise AssertionError(f"no front-end type for the inferred type {s}")


def _wrap(value: int | float | bool, t: HType) -> int | float | bool:
    """An integer constant wrapped to its type's width, as HIR integers wrap."""
    if isinstance(value, bool) or not isinstance(value, int) or not isinstance(t, Scalar):
        return value
    if not t.is_int:
        return value
    m = 1 << t.bits
    value &= m - 1
    if t.is_signed and value >= m // 2:
        value -= m
    return value


class Value:
    """An SSA value of the function being built: the native value and its type."""

    __slots__ = ("nv", "ty")

    def __init__(self, nv: Any, ty: HType) -> None:
        self.nv = nv
        self.ty = ty

    def __repr__(self) -> str:
        return f"<{self.nv} : {self.ty}>"


class Block:
    """A native block, whether a terminator ends it and how many branches target it."""

    __slots__ = ("nb", "params", "preds", "terminated")

    def __init__(self, nb: Any, params: list[Value]) -> None:
        self.nb = nb
        self.params = params
        self.preds = 0
        self.terminated = False


_UNDEFINED = re.compile(r"variable `([^`]*)`")
_BUILD_PREFIX = re.compile(r"^in @\S+: ")


class UndefinedVariable(Exception):
    """A variable read that some path reaches without an assignment (found at sealing)."""

    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


class Emitter:
    """Builds one function through a native ``FunctionBuilder``."""

    def __init__(self, b: Any, params: list[HType], kernel: str | None = None) -> None:
        self.b = b
        #: The Python function's name, for errors.
        self.kernel = kernel
        self.entry = Block(b.entry, [Value(v, t) for v, t in zip(b.params, params, strict=True)])
        self.entry.preds = 0
        self.current: Block | None = self.entry
        self.vars: dict[str, Any] = {}
        self._loc: tuple[str, int, int] | None = None

    # ---- locations
    @property
    def loc(self) -> tuple[str, int, int] | None:
        return self._loc

    @loc.setter
    def loc(self, loc: tuple[str, int, int] | None) -> None:
        if loc != self._loc and loc is not None:
            self.b.set_location(*loc)
        self._loc = loc

    def set_function_loc(self, loc: tuple[str, int, int]) -> None:
        """The function's own location (its ``def`` line), and the current one."""
        self.b.set_location(*loc, function=True)
        self._loc = loc

    # ---- blocks
    def new_block(self, *param_types: HType) -> Block:
        nb = self.b.block(*(native_type(t) for t in param_types))
        return Block(nb, [Value(v, t) for v, t in zip(nb.params, param_types, strict=True)])

    def switch_to(self, block: Block) -> None:
        self.b.switch_to(block.nb)
        self.current = block

    @property
    def terminated(self) -> bool:
        return self.current is None or self.current.terminated

    def _open(self) -> Block:
        blk = self.current
        if blk is None or blk.terminated:
            # Code after return/break/continue is unreachable: it goes into a fresh
            # block that nothing jumps to, which ``finish(prune=True)`` drops.
            blk = self.new_block()
            self.switch_to(blk)
        return blk

    # ---- instructions
    def emit(
        self,
        op: str,
        args: list[Value],
        result_types: list[HType] | None = None,
        imm: dict[str, Any] | None = None,
    ) -> list[Value]:
        """Appends ``op``; ``result_types`` None: the types the op table's row
        gives for the operands (the native builder infers and checks them)."""
        blk = self._open()
        b = self.b
        nargs = [a.nv for a in args]
        if op == "const":
            assert result_types is not None
            (t,) = result_types
            assert imm is not None
            return [Value(b.const(_wrap(imm["value"], t), native_type(t)), t)]
        if op == "call":
            assert imm is not None
            assert result_types is not None
            r = b.call(imm["callee"], *nargs, returns=[native_type(t) for t in result_types])
            rs = [] if r is None else list(r) if isinstance(r, tuple) else [r]
            return [Value(v, t) for v, t in zip(rs, result_types, strict=True)]
        if op == "return":
            b.ret(*nargs)
            blk.terminated = True
            return []
        if op == "unreachable":
            b.unreachable()
            blk.terminated = True
            return []
        if imm:
            # Type immediates (alloca's element type, ...) travel as their .zir spelling.
            imm = {k: (str(v) if isinstance(v, _TYPES) else v) for k, v in imm.items()}
        given = None if result_types is None else [native_type(t) for t in result_types]
        try:
            rs = b.inst(op, nargs, given, imm)
        except BuildError as e:
            # The instruction table's type rule for the op, at the statement's line.
            raise self.type_error(_BUILD_PREFIX.sub("", str(e))) from None
        if result_types is None:
            return [Value(v, front_type(v.type)) for v in rs]
        return [Value(v, t) for v, t in zip(rs, result_types, strict=True)]

    def type_error(self, message: str) -> KernelTypeError:
        """A KernelTypeError at the current statement's source location."""
        file, line, col = self._loc or (None, None, None)
        return KernelTypeError(message, file=file, line=line, col=col, kernel=self.kernel)

    def emit1(self, op: str, args: list[Value], ty: HType | None = None, **imm: Any) -> Value:
        """One result; ``ty`` None: the type the op table's row gives."""
        return self.emit(op, args, None if ty is None else [ty], imm)[0]

    def emit0(self, op: str, args: list[Value], **imm: Any) -> None:
        self.emit(op, args, [], imm)

    def const(self, ty: Scalar, value: int | float | bool) -> Value:
        return self.emit1("const", [], ty, value=value)

    def jump(self, block: Block, args: list[Value] | None = None) -> None:
        blk = self._open()
        self.b.jump(block.nb, *(a.nv for a in args or []))
        blk.terminated = True
        block.preds += 1

    def branch(
        self,
        cond: Value,
        then_block: Block,
        else_block: Block,
        then_args: list[Value] | None = None,
        else_args: list[Value] | None = None,
    ) -> None:
        blk = self._open()
        self.b.br(
            cond.nv,
            then_block.nb,
            else_block.nb,
            [a.nv for a in then_args or []],
            [a.nv for a in else_args or []],
        )
        blk.terminated = True
        then_block.preds += 1
        else_block.preds += 1

    # ---- variables (SSA construction in the Rust builder)
    def write_var(self, name: str, ty: HType, v: Value) -> None:
        """Assign ``v`` to variable ``name`` (of type ``ty``) in the current block."""
        var = self.vars.get(name)
        if var is None:
            var = self.vars[name] = (self.b.declare_var(native_type(ty), name), ty)
        self._open()
        self.b.def_var(var[0], v.nv)

    def read_var(self, name: str) -> Value | None:
        """The value of ``name`` in the current block; None where some path has none."""
        var = self.vars.get(name)
        if var is None:
            return None
        self._open()
        try:
            return Value(self.b.use_var(var[0]), var[1])
        except BuildError:
            return None

    def seal(self, block: Block) -> None:
        """Every branch to ``block`` exists (reads waiting in it are resolved)."""
        try:
            self.b.seal_block(block.nb)
        except BuildError as e:
            m = _UNDEFINED.search(str(e))
            if m is None:
                raise
            raise UndefinedVariable(m.group(1)) from None

    def finish(self) -> None:
        self.b.finish(prune=True)

    def abandon(self) -> None:
        """Drop the function (its name is free again for the next attempt)."""
        self.b.abandon()
