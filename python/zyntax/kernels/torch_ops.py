"""PyTorch integration of ``zyntax.kernels``: every public function that takes
torch tensors as a ``torch.library`` custom op in the namespace ``zyntax::``
(``torch.ops.zyntax.softmax``, ...), with a fake (meta) implementation that
gives the output's shape and dtype, so that ``torch.compile`` traces a model
calling them without a graph break, and an autograd formula where a backward
exists (docs/kernels.md, "PyTorch integration").

Importing this module registers the ops when torch is installed (importing
torch), so that the first call of a model traced by ``torch.compile`` or
``torch._dynamo.explain`` does not register them inside the traced frame:
the registration (a lock, ``torch.library`` definitions) is not traceable,
and dynamo broke the graph there, a break that explain counted without a
reason (the graph before it was empty). Without torch the module imports
and :func:`register` raises ``ArgumentError``; the functions below call it::

    from zyntax.kernels import torch_ops as zt
    y = zt.layer_norm(x, w, b)         # = torch.ops.zyntax.layer_norm(x, w, b, 1e-5)

Backward passes: ``matmul`` (through zyntax matmuls of the gradient, a
zyntax row sum for the bias, and with an activation the recomputed
pre-activation and :func:`activation_backward`), ``reduce_sum`` (a broadcast
of the gradient, no kernel), and softmax, layer_norm, rms_norm and
cross_entropy through their backward kernels (``zyntax.kernels.<name>_backward``,
registered as the ops ``zyntax::<name>_backward`` when the kernel module has
one), attention through ``zyntax.kernels.attention_backward`` (the wgmma
kernel of attention_bwd_sm90.py on sm_90 for head dims 64/96/128, the tile
programs of attention_bwd.py elsewhere, from the saved output and log-sum-exp; the
LSE output's gradient included). The others (reduce_max, matmul with fp8 scales)
have no backward kernel yet: a backward through them raises
``zyntax.ArgumentError`` naming the op and the input that needs a gradient,
never a wrong gradient.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from zyntax import kernels as zk
from zyntax.errors import ArgumentError
from zyntax.kernels._plans import planned

NAMESPACE = "zyntax"

#: The ops' schemas (argument order is the Python functions' order).
SCHEMAS: dict[str, str] = {
    "matmul": (
        "(Tensor a, Tensor b, Tensor? bias=None, str? activation=None, str? out_dtype=None, "
        "float? scale_a=None, float? scale_b=None, bool allow_tf32=False) -> Tensor"
    ),
    "softmax": "(Tensor x) -> Tensor",
    "layer_norm": "(Tensor x, Tensor weight, Tensor? bias=None, float eps=1e-05) -> Tensor",
    "rms_norm": "(Tensor x, Tensor weight, float eps=1e-06) -> Tensor",
    # The log-sum-exp is always returned: the backward needs it.
    "attention": (
        "(Tensor q, Tensor k, Tensor v, bool causal=False, float? scale=None, "
        "str? variant=None) -> (Tensor, Tensor)"
    ),
    "cross_entropy": "(Tensor logits, Tensor targets, str reduction='none') -> Tensor",
    "reduce_sum": "(Tensor x, int? axis=None) -> Tensor",
    "reduce_max": "(Tensor x, int? axis=None) -> Tensor",
    "saxpy": "(float a, Tensor x, Tensor(a!) y) -> ()",
}

_lock = threading.Lock()
_registered: list[Any] = []  # [torch.ops.zyntax] once registered
_torch: list[Any] = []  # [torch] once registered
#: Per op, the ``torch.autograd.Function`` of eager calls that need a
#: gradient (:func:`_route`), made at registration.
_functions: dict[str, Any] = {}


def register() -> Any:
    """Registers the ops (once) and returns ``torch.ops.zyntax``. Raises
    ArgumentError when torch cannot be imported."""
    if _registered:
        return _registered[0]
    with _lock:
        if not _registered:
            try:
                import torch  # type: ignore[import-not-found, unused-ignore]
            except ImportError as e:
                raise ArgumentError(
                    f"zyntax.kernels.torch_ops needs PyTorch, which does not import: {e}"
                ) from None
            _define(torch)
            _torch.append(torch)
            _registered.append(getattr(torch.ops, NAMESPACE))
    return _registered[0]


#: What :func:`_route` says a call runs: the custom op (the dispatcher),
#: ``zyntax.kernels`` directly, or the op's eager ``autograd.Function``.
_OP, _DIRECT, _FUNCTION = 0, 1, 2


def _route(*tensors: Any) -> int:
    """How a ``zt.*`` call runs. In plain eager mode (CUDA tensors of no
    subclass, no mode: fake tensors, functionalization, torch function
    modes; nothing being compiled) it skips the dispatcher, whose Python
    custom op costs ~10-15 us more per call (its dispatch and autograd
    wrapper): ``_DIRECT`` (``zyntax.kernels`` itself) when no tensor needs a
    gradient, else ``_FUNCTION`` (a ``torch.autograd.Function`` calling
    ``zyntax.kernels`` with the op's own backward formula; not under
    torch.func transforms, whose wrapped tensors only the op handles).
    Under ``torch.compile`` the op is traced (``is_compiling`` is True):
    ``_OP``."""
    # torch's functions, looked up once at registration (_define).
    is_compiling, dispatch_modes, function_modes, grad_enabled, transforms = _checks
    if is_compiling() or dispatch_modes() or function_modes():
        return _OP
    grad = grad_enabled()
    route = _DIRECT
    for t in tensors:
        if t is None:
            continue
        if type(t) not in _PLAIN or not t.is_cuda:
            return _OP
        if grad and t.requires_grad:
            route = _FUNCTION
    if route == _FUNCTION and transforms():
        return _OP
    return route


_PLAIN: tuple[Any, ...] = ()  # (torch.Tensor, torch.nn.Parameter) once registered
#: (is_compiling, dispatch mode stack length, torch function mode enabled,
#: grad enabled, functorch transforms active) once registered.
_checks: tuple[Callable[[], Any], ...] = ()


def _direct(*tensors: Any) -> bool:
    """Whether a call runs ``zyntax.kernels`` directly (:func:`_route`)."""
    return _route(*tensors) == _DIRECT


#: The derivative of matmul's epilogue activation: ``dpre = dout * act'(pre)``
#: (an elementwise kernel of this module, :func:`activation_backward`).
ACTIVATION_BACKWARD_SCHEMA = "(Tensor pre, Tensor dout, str activation) -> Tensor"
#: The bias gradient of matmul (:func:`bias_backward`) as an op: (dpre,
#: dbias), dpre empty without an activation (an op returns tensors only).
BIAS_BACKWARD_SCHEMA = (
    "(Tensor g, Tensor? pre=None, str? activation=None, str? out_dtype=None) -> (Tensor, Tensor)"
)

#: The backward ops, registered for each kernel that has a backward
#: function in ``zyntax.kernels`` (``<name>_backward``). layer_norm's third
#: result is dbias, empty without a bias (an op returns tensors only).
BACKWARD_SCHEMAS: dict[str, str] = {
    "softmax": "(Tensor y, Tensor dy) -> Tensor",
    "layer_norm": (
        "(Tensor dy, Tensor x, Tensor weight, Tensor? bias=None, float eps=1e-05) "
        "-> (Tensor, Tensor, Tensor)"
    ),
    "rms_norm": "(Tensor dy, Tensor x, Tensor weight, float eps=1e-06) -> (Tensor, Tensor)",
    "cross_entropy": (
        "(Tensor dloss, Tensor logits, Tensor targets, str reduction='none') -> Tensor"
    ),
    # (dq, dk, dv); dlse: the gradient of the forward's LSE output, if any.
    "attention": (
        "(Tensor q, Tensor k, Tensor v, Tensor o, Tensor lse, Tensor do, Tensor? dlse=None, "
        "bool causal=False, float? scale=None, bool deterministic=False) "
        "-> (Tensor, Tensor, Tensor)"
    ),
}


def backward_kernel(name: str) -> Callable[..., Any] | None:
    """The zyntax function that computes op `name`'s input gradients
    (``zyntax.kernels.<name>_backward``), or None where the op has no
    backward kernel (its backward raises)."""
    if name not in BACKWARD_SCHEMAS:
        return None
    found: Callable[..., Any] | None = getattr(zk, f"{name}_backward", None)
    return found


# ------------------------------------------------------------------ the public functions


def matmul(
    a: Any,
    b: Any,
    bias: Any = None,
    activation: str | None = None,
    out_dtype: str | None = None,
    scale_a: float | None = None,
    scale_b: float | None = None,
    allow_tf32: bool = False,
) -> Any:
    """``zyntax.kernels.matmul`` as ``torch.ops.zyntax.matmul`` (differentiable)."""
    ops = register()
    route = _route(a, b, bias)
    if route == _DIRECT:
        # Only the keywords given (each is a part of the plan's key to read).
        if activation is None and out_dtype is None and scale_a is None and scale_b is None:
            if not allow_tf32:
                return zk.matmul(a, b) if bias is None else zk.matmul(a, b, bias=bias)
        return zk.matmul(
            a,
            b,
            bias=bias,
            activation=activation,
            out_dtype=out_dtype,
            scale_a=scale_a,
            scale_b=scale_b,
            allow_tf32=allow_tf32,
        )
    args = (a, b, bias, activation, out_dtype, scale_a, scale_b, allow_tf32)
    return _functions["matmul"].apply(*args) if route == _FUNCTION else ops.matmul(*args)


def softmax(x: Any) -> Any:
    """``zyntax.kernels.softmax`` as ``torch.ops.zyntax.softmax``."""
    ops = register()
    route = _route(x)
    if route == _DIRECT:
        return zk.softmax(x)
    return _functions["softmax"].apply(x) if route == _FUNCTION else ops.softmax(x)


def layer_norm(x: Any, weight: Any, bias: Any = None, eps: float = 1e-5) -> Any:
    """``zyntax.kernels.layer_norm`` as ``torch.ops.zyntax.layer_norm``."""
    ops = register()
    route = _route(x, weight, bias)
    if route == _DIRECT:
        return zk.layer_norm(x, weight, bias, eps)
    args = (x, weight, bias, eps)
    return _functions["layer_norm"].apply(*args) if route == _FUNCTION else ops.layer_norm(*args)


def rms_norm(x: Any, weight: Any, eps: float = 1e-6) -> Any:
    """``zyntax.kernels.rms_norm`` as ``torch.ops.zyntax.rms_norm``."""
    ops = register()
    route = _route(x, weight)
    if route == _DIRECT:
        return zk.rms_norm(x, weight, eps)
    args = (x, weight, eps)
    return _functions["rms_norm"].apply(*args) if route == _FUNCTION else ops.rms_norm(*args)


def attention(
    q: Any,
    k: Any,
    v: Any,
    causal: bool = False,
    scale: float | None = None,
    return_lse: bool = False,
    variant: str | None = None,
) -> Any:
    """``zyntax.kernels.attention`` as ``torch.ops.zyntax.attention``: the
    output, and with `return_lse` also the f32 log-sum-exp."""
    ops = register()
    route = _route(q, k, v)
    if route == _DIRECT:
        # Only the keywords given (each is a part of the plan's key to read).
        if scale is None and return_lse is False and variant is None:
            if causal is True:
                return zk.attention(q, k, v, causal=True)
            if causal is False:
                return zk.attention(q, k, v)
        return zk.attention(
            q, k, v, causal=causal, scale=scale, return_lse=return_lse, variant=variant
        )
    args = (q, k, v, causal, scale, variant)
    if route == _FUNCTION:
        out, lse = _functions["attention"].apply(*args)
    else:
        out, lse = ops.attention(*args)
    return (out, lse) if return_lse else out


def cross_entropy(logits: Any, targets: Any, reduction: str = "none") -> Any:
    """``zyntax.kernels.cross_entropy`` as ``torch.ops.zyntax.cross_entropy``."""
    ops = register()
    route = _route(logits, targets)
    if route == _DIRECT:
        return zk.cross_entropy(logits, targets, reduction=reduction)
    if route == _FUNCTION:
        return _functions["cross_entropy"].apply(logits, targets, reduction)
    return ops.cross_entropy(logits, targets, reduction)


def reduce_sum(x: Any, axis: int | None = None) -> Any:
    """``zyntax.kernels.reduce_sum`` as ``torch.ops.zyntax.reduce_sum`` (differentiable)."""
    ops = register()
    route = _route(x)
    if route == _DIRECT:
        return zk.reduce_sum(x, axis)
    if route == _FUNCTION:
        return _functions["reduce_sum"].apply(x, axis)
    return ops.reduce_sum(x, axis)


def reduce_max(x: Any, axis: int | None = None) -> Any:
    """``zyntax.kernels.reduce_max`` as ``torch.ops.zyntax.reduce_max``."""
    ops = register()
    route = _route(x)
    if route == _DIRECT:
        return zk.reduce_max(x, axis)
    if route == _FUNCTION:
        return _functions["reduce_max"].apply(x, axis)
    return ops.reduce_max(x, axis)


def saxpy(a: float, x: Any, y: Any) -> Any:
    """``zyntax.kernels.saxpy`` (``y += a * x`` in place) as
    ``torch.ops.zyntax.saxpy``; returns `y`. Not differentiable: a tensor
    that requires grad is refused."""
    ops = register()
    import torch  # type: ignore[import-not-found, unused-ignore]

    if torch.is_grad_enabled():
        for name, t in (("x", x), ("y", y)):
            if getattr(t, "requires_grad", False):
                raise ArgumentError(
                    f"argument '{name}': requires grad; zyntax::saxpy updates y in place and "
                    "has no backward"
                )
    ops.saxpy(a, x, y)
    return y


# ------------------------------------------------------------------ registration


def _define(torch: Any) -> None:
    # zk: the package's functions (its submodules `softmax` and `attention`
    # are shadowed by the functions of those names).
    impls: dict[str, Callable[..., Any]] = {
        "matmul": lambda a, b, bias, act, odt, sa, sb, tf32: zk.matmul(
            a,
            b,
            bias=bias,
            activation=act,
            out_dtype=odt,
            scale_a=sa,
            scale_b=sb,
            allow_tf32=tf32,
        ),
        "softmax": lambda x: zk.softmax(x),
        "layer_norm": lambda x, w, bias, eps: zk.layer_norm(x, w, bias, eps),
        "rms_norm": lambda x, w, eps: zk.rms_norm(x, w, eps),
        "attention": lambda q, k, v, causal, scale, variant: zk.attention(
            q, k, v, causal=causal, scale=scale, return_lse=True, variant=variant
        ),
        "cross_entropy": lambda lg, tg, red: zk.cross_entropy(lg, tg, reduction=red),
        "reduce_sum": lambda x, axis: zk.reduce_sum(x, axis),
        "reduce_max": lambda x, axis: zk.reduce_max(x, axis),
        "saxpy": _saxpy_impl,
    }
    fakes = _fakes(torch)
    fast: list[tuple[str, Any, Callable[..., Any], Callable[..., Any], int, bool]] = []
    for name, schema in BACKWARD_SCHEMAS.items():
        kernel = backward_kernel(name)
        if kernel is not None:
            full = _full_args(torch, f"{name}_backward", schema)
            op = torch.library.custom_op(
                f"{NAMESPACE}::{name}_backward",
                full(_backward_impl(name, kernel)),
                mutates_args=(),
                schema=schema,
            )
            op.register_fake(full(fakes[f"{name}_backward"]))
            impl = full(_backward_impl(name, kernel))
            _backward_direct[name] = (impl, _leading_tensors(schema))
            n = _leading_tensors(schema)
            fast.append((f"{name}_backward", op, impl, full(_args), n, False))
    op = torch.library.custom_op(
        f"{NAMESPACE}::activation_backward",
        activation_backward,
        mutates_args=(),
        schema=ACTIVATION_BACKWARD_SCHEMA,
    )
    op.register_fake(
        lambda pre, dout, act: torch.empty_like(dout, memory_format=torch.contiguous_format)
    )
    full = _full_args(torch, "bias_backward", BIAS_BACKWARD_SCHEMA)
    op = torch.library.custom_op(
        f"{NAMESPACE}::bias_backward",
        full(_bias_backward_op),
        mutates_args=(),
        schema=BIAS_BACKWARD_SCHEMA,
    )
    op.register_fake(full(_bias_backward_fake(torch)))
    for name, schema in SCHEMAS.items():
        full = _full_args(torch, name, schema)
        mutates = ("y",) if name == "saxpy" else ()
        op = torch.library.custom_op(
            f"{NAMESPACE}::{name}", full(impls[name]), mutates_args=mutates, schema=schema
        )
        op.register_fake(full(fakes[name]))
        if name != "saxpy":  # a mutating op has no autograd formula
            setup, backward = _autograd(torch, name)
            op.register_autograd(backward, setup_context=_full_inputs(full, setup))
            _functions[name] = _function(torch, name, impls[name], setup, backward)
            fast.append((name, op, full(impls[name]), full(_args), _leading_tensors(schema), True))
    global _PLAIN, _checks
    _PLAIN = (torch.Tensor, torch.nn.Parameter)
    _checks = (
        torch.compiler.is_compiling,
        torch._C._len_torch_dispatch_stack,
        torch._C._is_torch_function_mode_enabled,
        torch.is_grad_enabled,
        # What autograd.Function.apply asks before taking the functorch path.
        getattr(torch._C, "_are_functorch_transforms_active", lambda: False),
    )
    _install_fast(torch, fast)


def _args(*args: Any) -> tuple[Any, ...]:
    return args


def _leading_tensors(schema: str) -> int:
    """How many of a schema's first arguments are tensors (``Tensor`` or ``Tensor?``)."""
    n = 0
    for arg in schema[1 : schema.index(")")].split(","):
        if not arg.strip().startswith("Tensor"):
            break
        n += 1
    return n


def _install_fast(
    torch: Any, ops: list[tuple[str, Any, Callable[..., Any], Callable[..., Any], int, bool]]
) -> None:
    """A cheaper kernel of each op for CUDA tensors at the dispatcher's
    AutogradCUDA key (more specific than the ``Autograd`` key where
    ``custom_op`` put its own), so that calling ``torch.ops.zyntax.<op>``
    directly costs what :func:`_route` decides, not the custom op's generic
    wrappers (H200, session 11: ``ops.softmax(x)`` 18.2 us against 8.3 for
    ``zt.softmax``; the custom op's autograd wrapper walks the arguments
    with pytree and redispatches, and its backend wrapper checks outputs
    for aliasing). The kernel runs the op's implementation directly when
    :func:`_route` says ``_DIRECT`` (no functorch transform either), its
    eager ``autograd.Function`` for ``_FUNCTION`` (forward ops), and
    otherwise the custom op's own autograd kernel (fake tensors under
    ``torch.compile``, tensor subclasses, modes, transforms: exactly what
    ran before). `ops`: (name, CustomOpDef, implementation, the function
    completing a call's arguments with the schema's defaults, the number of
    leading tensor arguments, whether the op has an eager Function). Where
    torch's internals differ (``make_autograd_impl``), nothing is installed
    and the ops stay as ``custom_op`` made them."""
    try:
        from torch._library.autograd import (  # type: ignore[import-not-found, unused-ignore]
            make_autograd_impl,
        )

        generic = {o[0]: make_autograd_impl(o[1]._opoverload, o[1]) for o in ops}
        lib = torch.library.Library(NAMESPACE, "FRAGMENT")
    except Exception:  # another torch: the custom ops as they are
        return
    _fast_libs.append(lib)
    transforms = _checks[4]
    for name, _op, impl, complete, n, has_function in ops:
        function = _functions[name] if has_function else None
        kernel = _fast_kernel(impl, complete, n, function, generic[name], transforms)
        lib.impl(name, kernel, "AutogradCUDA", with_keyset=True)


#: The ``torch.library.Library`` of the fast kernels (kept alive: dropping
#: it would unregister them).
_fast_libs: list[Any] = []


def _fast_kernel(
    impl: Callable[..., Any],
    complete: Callable[..., tuple[Any, ...]],
    n: int,
    function: Any,
    generic: Callable[..., Any],
    transforms: Callable[[], Any],
) -> Callable[..., Any]:
    """The AutogradCUDA kernel of one op (see :func:`_install_fast`)."""

    def kernel(keyset: Any, *args: Any, **kwargs: Any) -> Any:
        if not kwargs:
            route = _route(*args[:n])
            if route == _DIRECT and not transforms():
                return impl(*args)
            if route == _FUNCTION and function is not None:
                return function.apply(*complete(*args))
        return generic(keyset, *args, **kwargs)

    return kernel


def _function(
    torch: Any,
    name: str,
    impl: Callable[..., Any],
    setup: Callable[..., None],
    backward: Callable[..., Any],
) -> Any:
    """The ``torch.autograd.Function`` of op `name` for eager calls that
    need a gradient (:func:`_route`): its forward is the op's implementation
    (``zyntax.kernels``, no dispatcher) followed by the op's setup_context,
    its backward the op's (the same formula, the same backward ops). It is
    applied to every argument of the schema in order, as the op's setup
    sees them."""

    def forward(ctx: Any, *inputs: Any) -> Any:
        # The setup runs here, not as a separate setup_context: with one,
        # Function.apply binds the arguments through inspect.signature on
        # every call (38 us a softmax on the H200 in session 11 B2, against
        # 14.6 for this form in B1).
        output = impl(*inputs)
        if name == "attention":
            # An unused output (the LSE, mostly) gets no zero gradient to add.
            ctx.set_materialize_grads(False)
        setup(ctx, inputs, output)
        return output

    camel = "".join(w.capitalize() for w in name.split("_"))
    return type(
        f"Zyntax{camel}Function",
        (torch.autograd.Function,),
        {
            "forward": staticmethod(forward),
            "backward": staticmethod(backward),
            "__module__": __name__,
        },
    )


def _full_args(torch: Any, name: str, schema: str) -> Callable[[Callable[..., Any]], Any]:
    """A decorator that calls a function with every argument of the schema in
    order: the dispatcher leaves out trailing arguments equal to their
    defaults and may pass others by keyword."""
    parsed = torch._C.parse_schema(f"{NAMESPACE}::{name}{schema}")
    names = [a.name for a in parsed.arguments]
    defaults = [a.default_value if a.has_default_value() else None for a in parsed.arguments]

    def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
        def call(*args: Any, **kwargs: Any) -> Any:
            if len(args) == len(names):  # the common case: all given, in order
                return fn(*args)
            rest = [kwargs.get(n, d) for n, d in zip(names, defaults, strict=True)][len(args) :]
            return fn(*args, *rest)

        return call

    return wrap


def _full_inputs(full: Callable[..., Any], setup: Callable[..., Any]) -> Callable[..., None]:
    """`setup` (a setup_context) seeing every input of the schema."""

    def call(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        full(lambda *a: setup(ctx, a, output))(*inputs)

    return call


def _backward_impl(name: str, kernel: Callable[..., Any]) -> Callable[..., Any]:
    if name == "layer_norm":

        def layer_norm(dy: Any, x: Any, w: Any, bias: Any, eps: float) -> Any:
            dx, dw, db = kernel(dy, x, w, bias, eps)
            return dx, dw, dw.new_empty(0) if db is None else db

        return layer_norm
    if name == "rms_norm":
        return lambda dy, x, w, eps: tuple(kernel(dy, x, w, eps))
    if name == "cross_entropy":
        return lambda dloss, lg, tg, red: kernel(dloss, lg, tg, reduction=red)
    if name == "attention":
        return lambda q, k, v, o, lse, do, dlse, causal, scale, det: tuple(
            kernel(q, k, v, o, lse, do, causal=causal, scale=scale, dlse=dlse, deterministic=det)
        )
    return kernel


def _saxpy_impl(a: float, x: Any, y: Any) -> None:
    zk.saxpy(a, x, y)


# ------------------------------------------------------------------ activation backward

_ACT_THREADS = 256


def _build_activation_backward(out_dtype: str, activation: str) -> Any:
    """``out[i] = dout[i] * act'(pre[i])``: `pre` f32, `dout` and `out` of
    `out_dtype`; one element per thread of a grid-stride loop. The GELU is
    the tanh form of matmul's epilogue (gemm_mma_sync.activation)."""
    from zyntax import hir

    from . import _tensors as T
    from ._rows import archs_for
    from .gemm_mma_sync import GELU_C, GELU_K

    elem = T.HIR_TYPE[out_dtype]
    m = hir.Module(f"activation_backward_{activation}_{out_dtype}", targets=archs_for(out_dtype))
    params = [hir.ptr("constant", hir.f32), hir.ptr("constant", elem), hir.ptr("global", elem)]
    with m.kernel("activation_backward", [*params, hir.u32], max_threads=_ACT_THREADS) as b:
        pre, dout, out, n = b.params
        start = b.block_idx() * _ACT_THREADS + b.thread_idx()
        with b.for_range(start, n, b.grid_dim() * _ACT_THREADS, type=hir.u32) as i:
            v = b.load(b.ptr_add(pre, i))
            g = b.load(b.ptr_add(dout, i))
            g = g if elem == hir.f32 else b.cast(g, hir.f32)
            if activation == "relu":
                d = b.select(v > 0.0, g, b.const(0.0, hir.f32))
            else:  # d/dv of v * (1 + tanh(c * (v + k v^3))) / 2
                t = b.tanh(v * (v * v * GELU_K + 1.0) * GELU_C)
                dinner = (v * v * (3.0 * GELU_K) + 1.0) * GELU_C
                d = g * ((t + 1.0) * 0.5 + v * (1.0 - t * t) * dinner * 0.5)
            b.store(b.ptr_add(out, i), d if elem == hir.f32 else b.cast(d, elem))
    return m


def activation_backward(pre: Any, dout: Any, activation: str) -> Any:
    """``dout * act'(pre)`` elementwise (matmul's ``"relu"`` or ``"gelu"``):
    `pre` the f32 pre-activation, `dout` the gradient of the activation's
    output (contiguous, f32/bf16/f16, `pre`'s shape). Returns a new tensor of
    dout's dtype."""
    from . import _tensors as T

    T.choice(activation, "activation", ("relu", "gelu"), "activation")
    tp, td = T.tensor(pre, "pre"), T.tensor(dout, "dout")
    T.same_place(tp, td)
    T.want_dtype(tp, ("f32",))
    T.want_dtype(td, ("f32", "bf16", "f16"))
    T.want_shape(td, tp.shape, "pre's shape")
    for t in (tp, td):
        if not T.contiguous(t):
            raise ArgumentError(f"argument '{t.name}': must be contiguous")
    obj, o = T.output(None, td, td.shape, td.dtype)
    n = tp.size
    if n >= 1 << 31:
        raise ArgumentError(f"argument 'pre': {n} elements; at most 2**31 - 1 are supported")
    if n:
        grid = min(-(-n // _ACT_THREADS), 65535)
        key = (td.dtype, activation)
        T.launch(
            _build_activation_backward,
            key,
            "activation_backward",
            grid,
            _ACT_THREADS,
            [tp, td, o, n],
            td,
        )
    return obj


# ------------------------------------------------------------------ bias gradient

_COL_THREADS = 256
#: Row slabs of the bias gradient: about this many blocks per SM in all (the
#: column sums of a few hundred columns need the rows split to fill the GPU).
_COL_BLOCKS_PER_SM = 4
#: At least this many rows per slab (each thread's partial sum).
_COL_MIN_ROWS = 8


def _build_bias_backward(
    g_dtype: str, pre_dtype: str | None, activation: str | None, out_dtype: str
) -> Any:
    """Kernel ``partials``: thread j of block (x, y) walks the rows of slab y
    of column ``x * 256 + j`` of `g` (M x N, C order: the threads of a warp
    read consecutive columns, coalesced), with an activation first
    ``g *= act'(pre)`` (stored as dpre, g's dtype), and writes the f32 sum
    to ``partial[y, col]``. The last block of column block x to finish
    (``counters[x]``, zero before and after the launch) then writes
    ``out[col]`` = the sum of the column's partials in slab order (the same
    bits whichever block came last), in the output's dtype: one launch
    where a second kernel summed the partials until session 13 (4 bias
    gradients a training step: 4 launches and ~20 us of latency-bound
    device time saved)."""
    from zyntax import hir

    from . import _tensors as T
    from ._rows import archs_for
    from .gemm_mma_sync import GELU_C, GELU_K

    elem = T.HIR_TYPE[g_dtype]
    name = f"bias_backward_{g_dtype}_{pre_dtype}_{activation}"
    m = hir.Module(name, targets=archs_for(g_dtype))
    f32 = hir.f32
    params = [hir.ptr("constant", elem)]
    if activation is not None:
        assert pre_dtype is not None  # given with every activation (_bias_backward)
        params += [hir.ptr("constant", T.HIR_TYPE[pre_dtype]), hir.ptr("global", elem)]
    params += [hir.ptr("global", f32), hir.ptr("global", T.HIR_TYPE[out_dtype])]
    params += [hir.ptr("global", hir.u32), hir.u32, hir.u32, hir.u32, hir.u32]
    with m.kernel("partials", params, max_threads=_COL_THREADS) as b:
        if activation is not None:
            g, pre, dpre, partial, out, counters, rows, n, per, slabs = b.params
        else:
            g, partial, out, counters, rows, n, per, slabs = b.params
        last_flag = b.shared_alloc(hir.u32, 1)
        tid = b.thread_idx()
        col = b.block_idx(0) * _COL_THREADS + tid
        slab = b.block_idx(1)
        with b.if_(b.lt(col, n)):
            r0 = slab * per
            acc = b.declare_var(f32, "acc")
            b.def_var(acc, b.const(0.0, f32))
            with b.for_range(r0, b.min(r0 + per, rows), type=hir.u32) as r:
                i = r * n + col
                v = b.load(b.ptr_add(g, i))
                v = v if elem == f32 else b.cast(v, f32)
                if activation is not None:
                    x = b.load(b.ptr_add(pre, i))
                    x = x if pre_dtype == "f32" else b.cast(x, f32)
                    if activation == "relu":
                        v = b.select(x > 0.0, v, b.const(0.0, f32))
                    else:  # d/dx of x * (1 + tanh(c * (x + k x^3))) / 2
                        t = b.tanh(x * (x * x * GELU_K + 1.0) * GELU_C)
                        dinner = (x * x * (3.0 * GELU_K) + 1.0) * GELU_C
                        v = v * ((t + 1.0) * 0.5 + x * (1.0 - t * t) * dinner * 0.5)
                    b.store(b.ptr_add(dpre, i), v if elem == f32 else b.cast(v, elem))
                b.def_var(acc, b.use_var(acc) + v)
            b.store(b.ptr_add(partial, slab * n + col), b.use_var(acc))
        # Release this block's partials, then count it in; the last block of
        # the column block resets the counter for the next launch (as the
        # split-K GEMM's, gemm_mma_sync).
        u32 = hir.u32
        b.fence_acq_rel("device")
        b.barrier()
        with b.if_(tid < 1):
            counter = b.ptr_add(counters, b.block_idx(0))
            last = b.eq(b.atomic_add(counter, b.const(1, u32)), slabs - 1)
            b.store(last_flag, b.select(last, b.const(1, u32), b.const(0, u32)))
            with b.if_(last):
                b.store(counter, b.const(0, u32))
        b.barrier()
        with b.if_(b.and_(b.ne(b.load(last_flag), b.const(0, u32)), b.lt(col, n))):
            # Acquire the other blocks' partials (L2 loads: never a stale L1 line).
            b.fence_acq_rel("device")
            total = b.declare_var(f32, "total")
            b.def_var(total, b.const(0.0, f32))
            with b.for_range(0, slabs, type=u32) as y:
                part = b.load_cached(b.ptr_add(partial, y * n + col), "cg")
                b.def_var(total, b.use_var(total) + part)
            v = b.use_var(total)
            elem_out = T.HIR_TYPE[out_dtype]
            b.store(b.ptr_add(out, col), v if elem_out == f32 else b.cast(v, elem_out))
    return m


def _slabs(rows: int, n: int, on_gpu: bool, device: int) -> tuple[int, int]:
    """(rows per slab, slabs) of a bias gradient over `rows` x `n`."""
    from . import _tensors as T

    sms = T.sm_count(device) if on_gpu else 4
    col_blocks = -(-n // _COL_THREADS)
    want = max(1, -(-sms * _COL_BLOCKS_PER_SM // col_blocks))
    per = max(_COL_MIN_ROWS, -(-rows // want))
    return per, max(1, -(-rows // per))  # no rows: one slab of zeros


def _bias_backward(
    g: Any, pre: Any = None, activation: str | None = None, out_dtype: str | None = None
) -> Any:
    """The column sums of `g` (M x N, contiguous; f32, bf16 or f16) in
    `out_dtype` (default g's), f32 accumulation: a linear layer's bias
    gradient, one pass over `g` whose threads read along its rows (a
    reduction of ``g.t()``'s rows strides each thread down a column).
    With an `activation` ("relu" or "gelu", matmul's epilogue), `g` is the
    gradient of the activation's output and `pre` (M x N, f32/bf16/f16) its
    input: the same pass also computes ``dpre = g * act'(pre)`` (g's dtype)
    and sums that. Returns dbias, or (dpre, dbias) with an activation."""
    from . import _tensors as T

    T.choice(activation, "activation", (None, "relu", "gelu"), "activation")
    tg = T.tensor(g, "g")
    T.want_dtype(tg, ("f32", "bf16", "f16"))
    if len(tg.shape) != 2 or not T.contiguous(tg):
        raise ArgumentError(f"argument 'g': shape {tg.shape}; expected a contiguous matrix")
    rows, n = tg.shape
    if rows * n >= 1 << 31:
        raise ArgumentError(f"argument 'g': {rows * n} elements; at most 2**31 - 1 are supported")
    odt = T.choice(out_dtype, "out_dtype", (None, "f32", "bf16", "f16"), "dtype") or tg.dtype
    args: list[Any] = [tg]
    dpre_obj = None
    if activation is not None:
        tp = T.tensor(pre, "pre")
        T.same_place(tg, tp)
        T.want_dtype(tp, ("f32", "bf16", "f16"))
        T.want_shape(tp, tg.shape, "g's shape")
        if not T.contiguous(tp):
            raise ArgumentError("argument 'pre': must be contiguous")
        dpre_obj, dpre = T.output(None, tg, tg.shape, tg.dtype)
        args += [tp, dpre]
    elif pre is not None:
        raise ArgumentError("argument 'pre': given without an activation")
    obj, o = T.output(None, tg, (n,), odt)
    if n:
        per, slabs = _slabs(rows, n, tg.on_gpu, tg.device or 0)
        key = (tg.dtype, None if activation is None else args[1].dtype, activation, odt)
        grid = (-(-n // _COL_THREADS), slabs)
        partial, counters = _bias_workspace(tg, slabs * n, grid[0])
        part_args = [*args, partial, o, counters, rows, n, per, slabs]
        T.launch(_build_bias_backward, key, "partials", grid, _COL_THREADS, part_args, tg)
    return obj if activation is None else (dpre_obj, obj)


def _bias_workspace(tg: Any, partials: int, blocks: int) -> tuple[Any, Any]:
    """(`partials` f32, `blocks` zeroed u32 counters) for
    :func:`_build_bias_backward`: on a GPU the split-K GEMM's workspaces of
    the launch's (device, stream) (launches on a stream run in order, and
    each leaves the counters zero for the next: no allocation per call;
    addresses constant to the call plans), on the interpreter fresh arrays."""
    import numpy as np

    if not tg.on_gpu:
        return np.empty(partials, np.float32), np.zeros(blocks, np.uint32)
    from . import _tensors as T
    from .gemm import _workspace

    # The stream the launch goes to (T.launch_loaded's): torch's current one
    # for torch tensors, else the legacy default.
    stream = T._torch_stream(tg) if isinstance(tg.arr, int) else None
    ws = _workspace(tg.device, stream, partials, "partials")
    return ws.ptr, _workspace(tg.device, stream, blocks, "counters").ptr


def bias_backward(
    g: Any, pre: Any = None, activation: str | None = None, out_dtype: str | None = None
) -> Any:
    """See :func:`_bias_backward` (this is its planned form: a repeated call
    replays its launches in one native call)."""
    return _bias_backward_planned(g, pre, activation, out_dtype)


_bias_backward_planned = planned(_bias_backward)


def _bias_backward_op(g: Any, pre: Any, activation: str | None, out_dtype: str | None) -> Any:
    """``zyntax::bias_backward``: (dpre, dbias), dpre empty without an activation."""
    if activation is None:
        return g.new_empty(0), bias_backward(g, None, None, out_dtype)
    dpre, dbias = bias_backward(g, pre, activation, out_dtype)
    return dpre, dbias


def _bias_backward_fake(torch: Any) -> Callable[..., Any]:
    def fake(g: Any, pre: Any, activation: str | None, out_dtype: str | None) -> Any:
        _want_rank(g, "g", (2,), "a matrix (M x N)")
        dpre = g.new_empty(0) if activation is None else torch.empty_like(g)
        return dpre, g.new_empty(g.shape[1], dtype=_torch_dtype(torch, out_dtype, g))

    return fake


# ------------------------------------------------------------------ fake implementations


_OUT_DTYPES = ("f32", "bf16", "f16")


def _torch_dtype(torch: Any, name: str | None, like: Any) -> Any:
    """The torch dtype of a zyntax dtype name (None: `like`'s; fp8 gives bf16)."""
    if name is None:
        return torch.bfloat16 if like.dtype == torch.float8_e4m3fn else like.dtype
    if name not in _OUT_DTYPES:
        raise ArgumentError(f"argument 'out_dtype': unknown dtype {name!r} (f32, bf16 or f16)")
    return {"f32": torch.float32, "bf16": torch.bfloat16, "f16": torch.float16}[name]


def _want_rank(t: Any, name: str, ranks: tuple[int, ...], what: str) -> None:
    if t.dim() not in ranks:
        raise ArgumentError(f"argument '{name}': shape {tuple(t.shape)}; expected {what}")


def _fakes(torch: Any) -> dict[str, Callable[..., Any]]:
    """Shape and dtype of each op's result, from its inputs' (the checks that
    decide shapes are repeated here so tracing fails where the call would)."""

    def matmul(a: Any, b: Any, bias: Any, act: Any, odt: Any, sa: Any, sb: Any, tf: Any) -> Any:
        _want_rank(a, "a", (2,), "a matrix (M x K)")
        _want_rank(b, "b", (2,), "a matrix (K x N)")
        if a.shape[1] != b.shape[0]:
            raise ArgumentError(
                f"argument 'b': shape {tuple(b.shape)}; expected {a.shape[1]} rows (a's columns)"
            )
        return a.new_empty((a.shape[0], b.shape[1]), dtype=_torch_dtype(torch, odt, a))

    def rows(x: Any, *_: Any) -> Any:
        _want_rank(x, "x", tuple(range(1, 9)), "at least one dimension")
        return torch.empty_like(x, memory_format=torch.contiguous_format)

    def attention(q: Any, k: Any, v: Any, causal: Any, scale: Any, variant: Any) -> Any:
        for n, t in (("q", q), ("k", k), ("v", v)):
            _want_rank(t, n, (4,), "(batch, heads, sequence, head dim)")
        bsz, heads, sq, _ = q.shape
        out = torch.empty_like(q)  # in q's memory order, as the kernel's (attention.py)
        return out, q.new_empty((bsz, heads, sq), dtype=torch.float32)

    def cross_entropy(logits: Any, targets: Any, reduction: str) -> Any:
        shape = () if reduction == "mean" else tuple(logits.shape[:-1])
        return logits.new_empty(shape, dtype=torch.float32)

    def reduction(x: Any, axis: Any) -> Any:
        shape = () if axis is None else tuple(x.shape[:-1])
        return x.new_empty(shape, dtype=torch.float32)

    def saxpy(a: Any, x: Any, y: Any) -> None:
        return None

    def contiguous_like(t: Any) -> Any:
        return torch.empty_like(t, memory_format=torch.contiguous_format)

    def layer_norm_backward(dy: Any, x: Any, w: Any, bias: Any, eps: float) -> Any:
        n = x.shape[-1]
        return contiguous_like(x), x.new_empty(n), x.new_empty(n if bias is not None else 0)

    def rms_norm_backward(dy: Any, x: Any, w: Any, eps: float) -> Any:
        return contiguous_like(x), x.new_empty(x.shape[-1])

    def attention_backward(q: Any, k: Any, v: Any, *_: Any) -> Any:
        return contiguous_like(q), contiguous_like(k), contiguous_like(v)

    return {
        "matmul": matmul,
        "softmax": rows,
        "layer_norm": rows,
        "rms_norm": rows,
        "attention": attention,
        "cross_entropy": cross_entropy,
        "reduce_sum": reduction,
        "reduce_max": reduction,
        "saxpy": saxpy,
        "softmax_backward": lambda y, dy: contiguous_like(y),
        "layer_norm_backward": layer_norm_backward,
        "rms_norm_backward": rms_norm_backward,
        "attention_backward": attention_backward,
        "cross_entropy_backward": lambda dloss, logits, targets, red: contiguous_like(logits),
    }


# ------------------------------------------------------------------ autograd

#: For each op, its tensor inputs in schema order (the names errors use).
_TENSOR_INPUTS = {
    "matmul": ("a", "b", "bias"),
    "softmax": ("x",),
    "layer_norm": ("x", "weight", "bias"),
    "rms_norm": ("x", "weight"),
    "attention": ("q", "k", "v"),
    "cross_entropy": ("logits", "targets"),
    "reduce_sum": ("x",),
    "reduce_max": ("x",),
}


def _no_backward(name: str, needs: list[str], why: str) -> ArgumentError:
    which = ", ".join(f"'{n}'" for n in needs) or "of the op"
    return ArgumentError(
        f"argument {which}: requires grad, but zyntax::{name} {why}; "
        "compute this step with PyTorch's op, or detach the input"
    )


def _autograd(torch: Any, name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """(setup_context, backward) of op `name`."""
    names = _TENSOR_INPUTS[name]

    def needs_grad(ctx: Any) -> list[str]:
        return [n for n, need in zip(names, _needs(ctx, len(names)), strict=True) if need]

    if name == "matmul":
        return _matmul_autograd(torch)
    if name == "reduce_sum":
        return _reduce_sum_autograd(torch)
    if name == "attention":
        return _attention_autograd(torch)
    if backward_kernel(name) is not None:
        return _row_autograd(name)

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        pass

    def backward(ctx: Any, *grads: Any) -> Any:
        raise _no_backward(name, needs_grad(ctx), "has no backward kernel yet")

    return setup, backward


def _needs(ctx: Any, n: int) -> list[bool]:
    """Whether each of the first `n` inputs needs a gradient (the autograd
    context lists only the inputs the call passed: trailing defaults are
    left out)."""
    got = list(ctx.needs_input_grad[:n])
    return got + [False] * (n - len(got))


def _grads(ctx: Any, *grads: Any) -> tuple[Any, ...]:
    """One gradient per input the call passed (None for the rest)."""
    n = len(ctx.needs_input_grad)
    return (*grads[:n], *([None] * (n - len(grads))))


_ZYNTAX_DTYPES: dict[Any, str] = {}  # torch dtype -> zyntax name, once asked


def _zyntax_dtype(torch: Any, dtype: Any) -> str:
    if not _ZYNTAX_DTYPES:
        _ZYNTAX_DTYPES.update({torch.float32: "f32", torch.bfloat16: "bf16", torch.float16: "f16"})
    return _ZYNTAX_DTYPES[dtype]


def _matmul_autograd(torch: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """out = act(a @ b + bias): with an activation, the pre-activation is
    recomputed in f32 by a zyntax matmul and ``dpre = dout * act'(pre)`` by
    :func:`bias_backward` (with the bias gradient, the column sums of dpre,
    in the same pass; :func:`activation_backward` without a bias); then
    da = dpre @ bᵀ, db = aᵀ @ dpre (zyntax matmuls of transposed views, f32
    accumulation, in the operand's dtype). In plain eager mode (what
    :func:`_route` calls direct) the backward calls ``zyntax.kernels``
    itself, not the ops through the dispatcher (~5-10 us a call of host
    time saved, four to six calls a layer)."""

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        a, b, bias, act, _odt, sa, sb, tf32 = inputs
        ctx.activation, ctx.fp8, ctx.tf32 = act, sa is not None or sb is not None, tf32
        ctx.bias_dtype = None if bias is None else bias.dtype
        ctx.save_for_backward(a, b, bias if act is not None else None)

    def backward(ctx: Any, grad: Any) -> Any:
        a, b, bias = ctx.saved_tensors
        need_a, need_b, need_bias = _needs(ctx, 3)
        if ctx.fp8:
            flags = (need_a, need_b, need_bias)
            needs = [n for n, f in zip(("a", "b", "bias"), flags, strict=True) if f]
            raise _no_backward("matmul", needs, "has no backward for fp8 inputs")
        ops = register()
        dt = _zyntax_dtype(torch, a.dtype)
        tf32, act = ctx.tf32, ctx.activation
        # The gradient in the operands' dtype, as a dense matrix (a sum's
        # gradient arrives as a broadcast view with zero strides).
        g = grad if grad.dtype == a.dtype else grad.to(a.dtype)
        g = g if g.is_contiguous() else g.contiguous()
        direct = _direct(a, b, bias, g)

        def mm(x: Any, y: Any, bias: Any, out_dtype: str) -> Any:
            if not direct:
                return ops.matmul(x, y, bias, None, out_dtype, None, None, tf32)
            if tf32:
                return zk.matmul(x, y, bias=bias, out_dtype=out_dtype, allow_tf32=True)
            if bias is None:
                return zk.matmul(x, y, out_dtype=out_dtype)
            return zk.matmul(x, y, bias=bias, out_dtype=out_dtype)

        bdt = None if ctx.bias_dtype is None else _zyntax_dtype(torch, ctx.bias_dtype)
        gbias = None
        if act is not None:
            pre = mm(a, b, bias, "f32")
            if need_bias:
                if direct:
                    g, gbias = bias_backward(g, pre, act, bdt)
                else:
                    g, gbias = ops.bias_backward(g, pre, act, bdt)
            elif direct:
                g = activation_backward(pre, g, act)
            else:
                g = ops.activation_backward(pre, g, act)
        elif need_bias:
            gbias = (
                bias_backward(g, None, None, bdt)
                if direct
                else ops.bias_backward(g, None, None, bdt)[1]
            )
        ga = mm(g, b.t(), None, dt) if need_a else None
        gb = mm(a.t(), g, None, dt) if need_b else None
        return _grads(ctx, ga, gb, gbias)

    return setup, backward


#: Per op with a backward kernel: (the ``zyntax::<name>_backward`` op's
#: implementation, its leading tensor arguments), made at registration.
_backward_direct: dict[str, tuple[Callable[..., Any], int]] = {}


def _call_backward(name: str, *args: Any) -> Any:
    """``zyntax::<name>_backward(*args)``; in plain eager mode (:func:`_route`
    says direct) its implementation without the dispatcher (a boxed call
    into Python, ~3-5 us of host time)."""
    impl, n = _backward_direct[name]
    if _direct(*args[:n]):
        return impl(*args)
    return getattr(register(), f"{name}_backward")(*args)


def _row_autograd(name: str) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The row kernels' backward through their backward ops: softmax from its
    output, the norms from x (their statistics recomputed), cross-entropy
    from the logits (softmax minus the one-hot target, times the loss's
    gradient). The incoming gradient is made dense in the op's dtype (a
    sum's gradient arrives as a broadcast view)."""

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        ctx.args = inputs[len(_TENSOR_INPUTS[name]) :]  # the non-tensor arguments
        if name == "softmax":
            ctx.save_for_backward(output)
        else:
            ctx.save_for_backward(*inputs[: len(_TENSOR_INPUTS[name])])

    def backward(ctx: Any, grad: Any) -> Any:
        saved = ctx.saved_tensors
        if name == "softmax":
            (y,) = saved
            return _grads(ctx, _call_backward(name, y, grad.to(y.dtype).contiguous()))
        if name == "cross_entropy":
            logits, targets = saved
            (reduction,) = ctx.args
            dloss = grad.float().contiguous()
            return _grads(ctx, _call_backward(name, dloss, logits, targets, reduction))
        x = saved[0]
        dy = grad.to(x.dtype).contiguous()
        if name == "layer_norm":
            _, w, bias = saved
            (eps,) = ctx.args
            dx, dw, db = _call_backward(name, dy, x, w, bias, eps)
            return _grads(ctx, dx, dw, db if bias is not None else None)
        _, w = saved
        (eps,) = ctx.args
        dx, dw = _call_backward(name, dy, x, w, eps)
        return _grads(ctx, dx, dw)

    return setup, backward


def _reduce_sum_autograd(torch: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """The gradient of a sum is the output's gradient broadcast over the
    summed axis (a view, no kernel), in x's dtype."""

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        x, axis = inputs
        ctx.shape, ctx.dtype, ctx.axis = tuple(x.shape), x.dtype, axis

    def backward(ctx: Any, grad: Any) -> Any:
        g = grad.to(ctx.dtype)
        if ctx.axis is not None:
            g = g.unsqueeze(-1)
        return _grads(ctx, g.expand(ctx.shape))

    return setup, backward


def _attention_autograd(torch: Any) -> tuple[Callable[..., Any], Callable[..., Any]]:
    """dq, dk, dv through ``zyntax::attention_backward`` from the saved inputs,
    output and LSE (FlashAttention-2's backward; dk and dv summed over the
    query heads of a KV head). The output's gradient is passed as it is
    where the kernels take its strides, else made dense (:func:`_attention_grad`);
    the LSE's gradient, where autograd passes one, is included. dQ is added
    atomically unless ``torch.use_deterministic_algorithms(True)`` is in
    force (then the deterministic dQ pass runs). A forced
    hand-written variant aligns a causal mask top-left, which the backward
    (bottom-right) cannot follow where Sq != Sk: refused by name."""

    def setup(ctx: Any, inputs: tuple[Any, ...], output: Any) -> None:
        q, k, v, causal, scale, variant = inputs
        out, lse = output
        ctx.causal, ctx.scale, ctx.variant = causal, scale, variant
        ctx.save_for_backward(q, k, v, out, lse)

    def backward(ctx: Any, grad: Any, grad_lse: Any) -> Any:
        q, k, v, out, lse = ctx.saved_tensors
        if ctx.causal and ctx.variant not in (None, "tile") and q.shape[2] != k.shape[2]:
            raise ArgumentError(
                f"argument 'variant': {ctx.variant!r} aligns the causal mask top-left, and the "
                "backward (bottom-right, as the default forward) cannot follow it where Sq != Sk; "
                "use variant=None or 'tile'"
            )
        # With materialized gradients off, an unused output's gradient is None.
        do = out.new_zeros(out.shape) if grad is None else _attention_grad(grad.to(q.dtype))
        dlse = None if grad_lse is None else grad_lse.float().contiguous()
        # dQ by atomics unless torch is asked for deterministic algorithms.
        det = torch.are_deterministic_algorithms_enabled()
        args = (q, k, v, out, lse, do, dlse, ctx.causal, ctx.scale, det)
        dq, dk, dv = _call_backward("attention", *args)
        need = _needs(ctx, 3)
        return _grads(ctx, *(g if n else None for g, n in zip((dq, dk, dv), need, strict=True)))

    return setup, backward


def _attention_grad(g: Any) -> Any:
    """The output's gradient as ``attention_backward`` reads it: as it is
    where its layout is one the kernels take (head dim contiguous, the
    other strides positive multiples of 8 elements, 16-byte aligned: the
    gradient of the block's ``att.transpose(1, 2).reshape(...)`` is such a
    view of (b, s, h, d) memory), else a dense copy. While torch.compile
    traces the backward the gradient is a fake tensor without an address:
    the traced graph takes the dense copy (its alignment is unknown)."""
    st = g.stride()
    if len(st) == 4 and st[3] == 1 and all(x > 0 and x % 8 == 0 for x in st[:3]):
        try:
            aligned = g.data_ptr() % 16 == 0
        except RuntimeError:  # FakeTensor / FunctionalTensor: no data pointer
            aligned = False
        if aligned:
            return g
    return g.contiguous()


def _register_at_import() -> None:
    """:func:`register` now when torch is installed (see the module documentation)."""
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return
    try:
        register()
    except ArgumentError:  # torch is installed but does not import: the calls say so
        pass


_register_at_import()
