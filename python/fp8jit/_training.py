"""FP8 training of ``torch.nn.Linear`` layers with fp8jit's casts and GEMMs: ``Float8Linear`` and
``convert_to_float8_training`` (both re-exported by ``fp8jit.torch``).

Each of a layer's three GEMMs runs in FP8: Y = X W^T, dX = dY W and dW = dY^T X. FP8 WGMMA reads
both operands K-major, so the two backward GEMMs need X, W and dY transposed: where the recipe's
scales allow it, one cast writes the FP8 copy and its transposed FP8 copy from one read of the
tensor (fp8jit's quantize with a transposed output), and the forward pass keeps only the
transposed copies of X and W for the backward pass. Master weights, outputs and gradients stay in
the layer's dtype (bf16).

Recipes (``recipe=``):

* ``"tensorwise"``: torchao's ``Float8LinearRecipeName.TENSORWISE`` (dynamic, "current" scaling):
  one scale per tensor from its amax at each cast, E4M3 for X, W and dY.
* ``"rowwise"``: torchao's ``Float8LinearRecipeName.ROWWISE``: a scale per row of each GEMM
  operand, E4M3, rounded to a power of two as that recipe does (``round_scales_to_power_of_2``,
  on by default there), so the FP8 codes and scales are torchao's own. The backward GEMMs
  contract over the other axis, so the cast of X, W and dY also writes a transposed copy with its
  own per-row scales (per-row scales of X^T are per-column scales of X), from the same read.
* ``"delayed"``: TransformerEngine's ``DelayedScaling(fp8_format=Format.HYBRID)``: E4M3 for X and
  W, E5M2 for dY, each with one scale taken from the history of its amaxes (the largest of the
  last ``amax_history_len``, times ``2**margin``); each cast writes the current amax itself, and
  the next forward pass folds it into the history. The first step scales dynamically.
* ``"blockwise"``: DeepSeek-V3's FP8 training: X and dY scaled per 1x128 group along the row, W
  per 128x128 block, E4M3 everywhere; dW contracts two 1x128-scaled operands (fp8jit's ``group``
  GEMM), both scaled along the tokens.
"""

import logging
from typing import Callable, Dict, List, NamedTuple, Optional

import torch

from . import _ops

__all__ = ["Float8Linear", "convert_to_float8_training", "RECIPES", "default_module_filter"]

_log = logging.getLogger("fp8jit")
_FP8_MAX = {"e4m3": 448.0, "e5m2": 57344.0}
# TransformerEngine's longest default history is 1024; far longer ones only cost memory and the
# roll each step.
_MAX_HISTORY = 1 << 16


class Recipe(NamedTuple):
    name: str
    activation: str  # the cast granularity of X and dY: 'tensor', 'row' or '1x128'
    weight: str  # of W: 'tensor', 'row' or '128x128'
    forward: str  # fp8jit.gemm scale modes of Y = X W^T, dX = dY W and dW = dY^T X
    grad_input: str
    grad_weight: str
    grad_format: str = "e4m3"  # dY's FP8 format (X and W: e4m3)
    delayed: bool = False  # scales from amax histories (per tensor only)
    pow2: bool = False  # dynamic scales rounded up to powers of two (quantisation factors down)


RECIPES: Dict[str, Recipe] = {
    "tensorwise": Recipe("tensorwise", "tensor", "tensor", "tensor", "tensor", "tensor"),
    "rowwise": Recipe("rowwise", "row", "row", "rowwise", "rowwise", "rowwise", pow2=True),
    "delayed": Recipe("delayed", "tensor", "tensor", "tensor", "tensor", "tensor", "e5m2", True),
    "blockwise": Recipe("blockwise", "1x128", "128x128", "block", "block", "group"),
}


def _recipe(name) -> Recipe:
    if isinstance(name, Recipe):
        return name
    if name not in RECIPES:
        raise ValueError(f"recipe {name!r}: expected one of {', '.join(repr(r) for r in RECIPES)}")
    return RECIPES[name]


def _cast_impl(x, granularity: str, fmt: str, scale, pow2: bool, column_sums: bool, distinct: bool) -> list:
    """_cast_transposed's outputs. ``distinct``: every output a tensor of its own, as a custom op's
    outputs must be (no aliases, an empty tensor for each absent one); eager calls pass False and
    get the scale itself for the transposed use where it is the same (per tensor), and None for
    the absent amax and sums, sparing a copy and allocations on the host's path."""
    if granularity not in ("tensor", "row", "1x128", "128x128"):
        raise ValueError(f"granularity {granularity!r}: expected 'tensor', 'row', '1x128' or '128x128'")
    layout = "col_major_tma" if granularity == "1x128" else "row_major"
    static = scale if granularity == "tensor" else None
    # A given scale is used as it is (pow2 rounds the scales a cast derives).
    q, s, qt, st, amax, sums = _ops._quantize_transposed(x, fmt, granularity, layout, pow2 and static is None,
                                                         static, static is not None, column_sums)
    if st is None:  # per tensor: the same scale; 128x128: the blocks of x^T are s's transpose
        st = s.t().contiguous() if granularity == "128x128" else s.clone() if distinct else s
    if distinct:
        amax = x.new_empty((0,), dtype=torch.float32) if amax is None else amax
        sums = x.new_empty((0,), dtype=torch.float32) if sums is None else sums
    return [q, s, qt, st, amax, sums]


# No `from __future__ import annotations` here: custom_op reads these annotations as types.
def _cast_transposed(x: torch.Tensor, granularity: str, fmt: str, scale: Optional[torch.Tensor],
                     pow2: bool = False, column_sums: bool = False) -> List[torch.Tensor]:
    """x [M, K] -> [q [M, K], s, qt [K, M], st, amax, sums] in FP8 ``fmt``. 'tensor': one scale each (the
    same value), from x's amax or, given ``scale`` ([1] fp32), that one, with x's amax written by
    the cast ([1]; [0] without ``scale``); '1x128': per 128 along the rows of x and of x^T,
    column-major with rows padded to 4 (as the GEMM reads them by TMA); '128x128': s [ceil(M/128),
    ceil(K/128)] and st its transpose (the blocks of x^T); 'row': per row of x ([M, 1]) and per
    row of x^T ([K, 1]) in one fused cast (an amax pass over rows and columns, then both outputs).
    ``pow2``: dynamic scales rounded up to powers of two (torchao's round_scales_to_power_of_2).
    ``column_sums``: sums = the fp32 sum over the rows of each column of x ([K]: the bias gradient
    when x is dY) from the same cast; [0] without."""
    return _cast_impl(x, granularity, fmt, scale, pow2, column_sums, True)


cast_transposed_op = torch.library.custom_op("fp8jit::cast_transposed", _cast_transposed, mutates_args=())


def _col_major_scales(rows: int, k: int, device) -> torch.Tensor:
    pad = (rows + 3) // 4 * 4
    return torch.empty_strided((rows, (k + 127) // 128), (1, pad), dtype=torch.float32, device=device)


@cast_transposed_op.register_fake
def _(x: torch.Tensor, granularity: str, fmt: str, scale: Optional[torch.Tensor],
      pow2: bool = False, column_sums: bool = False) -> List[torch.Tensor]:
    m, k = x.shape
    dtype = torch.float8_e4m3fn if fmt == "e4m3" else torch.float8_e5m2
    q, qt = x.new_empty((m, k), dtype=dtype), x.new_empty((k, m), dtype=dtype)
    f32 = lambda *shape: x.new_empty(shape, dtype=torch.float32)  # noqa: E731
    amax = f32(1) if scale is not None and granularity == "tensor" else f32(0)
    sums = f32(k) if column_sums else f32(0)
    if granularity == "1x128":
        return [q, _col_major_scales(m, k, x.device), qt, _col_major_scales(k, m, x.device), amax, sums]
    if granularity == "128x128":
        bm, bk = (m + 127) // 128, (k + 127) // 128
        return [q, f32(bm, bk), qt, f32(bk, bm), amax, sums]
    if granularity == "row":
        return [q, f32(m, 1), qt, f32(k, 1), amax, sums]
    return [q, f32(1), qt, f32(1), amax, sums]


# Eager calls skip the custom ops and call their implementations: a custom op's dispatch costs
# more host time per call than the fp8jit call itself, and a training step makes a dozen (the
# eager FFN step at d = 2048 was host-bound). torch.compile traces the custom ops, which it needs.
def _gemm(a, b, sa, sb, scale: str, dtype, bias=None):
    if not torch.compiler.is_compiling():
        return _ops.gemm(a, b, sa, sb, scale=scale, out_dtype=dtype, bias=bias)
    return torch.ops.fp8jit.gemm(a, b, sa, sb, scale, dtype, bias)


def _cast_op(t, granularity: str, fmt: str, scale, pow2: bool, column_sums: bool = False):
    if not torch.compiler.is_compiling():
        return _cast_impl(t, granularity, fmt, scale, pow2, column_sums, False)
    return torch.ops.fp8jit.cast_transposed(t, granularity, fmt, scale, pow2, column_sums)


def _cast(t, granularity: str, fmt: str, delayed, slot: int, pow2: bool = False, column_sums: bool = False):
    """cast_transposed of ``t`` (``pow2``: the recipe's; ``column_sums``: also t's column sums,
    last); with delayed scaling (``delayed`` =
    (scales [3], pending amaxes [3], first step)), by scales[slot], its amax written to
    pending[slot]. The first step has no history yet: it scales dynamically and records the amax
    its scale came from."""
    if delayed is None:
        return _cast_op(t, granularity, fmt, None, pow2, column_sums)
    scales, pending, first = delayed
    out = _cast_op(t, granularity, fmt, None if first else scales[slot:slot + 1], pow2, column_sums)
    with torch.no_grad():
        pending[slot:slot + 1].copy_(out[1] * _FP8_MAX[fmt] if first else out[4])
    return out


class _Float8LinearFunction(torch.autograd.Function):
    """Y = X W^T (+ b) with the three GEMMs in FP8. X is 2-D [T, K] with T a multiple of 16.
    ``delayed``: None, or (scales [3] fp32: X, W, dY; pending [3] fp32, where each cast's amax is
    written for the next forward pass to fold into the history; whether this is the first step)."""

    @staticmethod
    def forward(ctx, x, weight, bias, recipe: Recipe, delayed):
        qx, sx, qxt, sxt, _, _ = _cast(x, recipe.activation, "e4m3", delayed, 0, recipe.pow2)
        qw, sw, qwt, swt, _, _ = _cast(weight, recipe.weight, "e4m3", delayed, 1, recipe.pow2)
        y = _gemm(qx, qw, sx, sw, recipe.forward, x.dtype, None if bias is None else bias.to(x.dtype))
        ctx.save_for_backward(qxt, sxt, qwt, swt)
        ctx.recipe, ctx.delayed, ctx.x_dtype, ctx.w_dtype = recipe, delayed, x.dtype, weight.dtype
        ctx.bias_dtype = None if bias is None else bias.dtype
        return y

    @staticmethod
    def backward(ctx, dy):
        qxt, sxt, qwt, swt = ctx.saved_tensors
        r, delayed = ctx.recipe, ctx.delayed
        dy = dy.contiguous()
        # The bias gradient (dY's column sums) comes from the cast, which reads dY anyway: torch's
        # dy.sum(0) read it again (89 µs of a 2 ms step at d = 2048, issue 24).
        wants_db = ctx.bias_dtype is not None and ctx.needs_input_grad[2]
        qdy, sdy, qdyt, sdyt, _, dy_sums = _cast(dy, r.activation, r.grad_format, delayed, 2, r.pow2, wants_db)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _gemm(qdy, qwt, sdy, swt, r.grad_input, ctx.x_dtype)  # [T, N] x [K, N]^T
        if ctx.needs_input_grad[1]:
            dw = _gemm(qdyt, qxt, sdyt, sxt, r.grad_weight, ctx.w_dtype)  # [N, T] x [K, T]^T
        if wants_db:
            db = dy_sums.to(ctx.bias_dtype)
        return dx, dw, db, None, None


class Float8Linear(torch.nn.Linear):
    """A ``torch.nn.Linear`` whose forward and backward GEMMs run in FP8 through fp8jit (see the
    module's recipes). The weight (and bias) stay the layer's own parameters, in their dtype, so an
    optimizer and a state dict see the same tensors as before the swap. Inputs [..., in_features]
    on a CUDA device; a call with a token count that is not a multiple of 16 (what FP8 TMA rows
    need) runs in the input's dtype instead, logged once per layer. ``recipe="delayed"`` keeps its
    state in buffers: ``fp8_amax_history`` [3, amax_history_len] (X, W, dY), ``fp8_scales`` [3]
    and ``fp8_pending_amax`` [3] (the last casts' amaxes, folded in by the next forward)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 recipe="tensorwise", amax_history_len: int = 16, margin: int = 0):
        # Every argument checked before the parameters are allocated.
        r = _recipe(recipe)
        _check_dims(in_features, out_features)
        if type(amax_history_len) is not int or not 1 <= amax_history_len <= _MAX_HISTORY:
            raise ValueError(f"amax_history_len: {amax_history_len!r}, expected an int from 1 to {_MAX_HISTORY}")
        if type(margin) is not int or not 0 <= margin <= 64:
            raise ValueError(f"margin: {margin!r}, expected an int from 0 to 64 (scales grow by 2**margin)")
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.recipe, self.amax_history_len, self.margin = r, amax_history_len, margin
        self._warned_tokens = False
        self._delayed_started = False
        self._init_delayed_state(device)

    def _init_delayed_state(self, device) -> None:
        if not self.recipe.delayed:
            return
        f32 = dict(dtype=torch.float32, device=device)
        self.register_buffer("fp8_amax_history", torch.zeros(3, self.amax_history_len, **f32))
        self.register_buffer("fp8_scales", torch.ones(3, **f32))
        self.register_buffer("fp8_pending_amax", torch.zeros(3, **f32))
        fmt_max = [_FP8_MAX["e4m3"], _FP8_MAX["e4m3"], _FP8_MAX[self.recipe.grad_format]]
        self.register_buffer("_fp8_max", torch.tensor(fmt_max, **f32), persistent=False)

    @classmethod
    def from_float(cls, linear: torch.nn.Linear, recipe="tensorwise", *, amax_history_len: int = 16,
                   margin: int = 0) -> "Float8Linear":
        """A Float8Linear sharing ``linear``'s weight and bias parameters (no copy)."""
        if not isinstance(linear, torch.nn.Linear):
            raise ValueError(f"linear: a {type(linear).__name__}, expected a torch.nn.Linear")
        with torch.device("meta"):  # checks the arguments; the parameters are linear's
            layer = cls(linear.in_features, linear.out_features, linear.bias is not None, recipe=recipe,
                        amax_history_len=amax_history_len, margin=margin)
        layer.weight, layer.bias = linear.weight, linear.bias
        layer._init_delayed_state(linear.weight.device)
        return layer

    def _delayed_scaling(self):
        """The delayed recipe's (scales, pending amaxes, first step) for this forward pass, after
        folding the last step's amaxes into the history."""
        first = not self._delayed_started
        if not first:
            with torch.no_grad():
                h = torch.roll(self.fp8_amax_history, 1, dims=1)
                h[:, 0] = self.fp8_pending_amax
                self.fp8_amax_history.copy_(h)
                top = h.amax(dim=1)
                self.fp8_scales.copy_(torch.where(top > 0, top * 2.0**self.margin / self._fp8_max, self.fp8_scales))
        self._delayed_started = True
        return self.fp8_scales, self.fp8_pending_amax, first

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x: shape {tuple(x.shape)}, the last dimension must be {self.in_features}")
        if not x.is_cuda or not self.weight.is_cuda:
            raise ValueError(f"x on {x.device}, weight on {self.weight.device}: Float8Linear runs on a CUDA device")
        x2 = x.reshape(-1, self.in_features)
        if x2.shape[0] % 16 != 0 or x2.shape[0] == 0:
            if not self._warned_tokens:
                _log.info("fp8jit Float8Linear(%d, %d): %d tokens is not a multiple of 16; this call runs in %s",
                          self.in_features, self.out_features, x2.shape[0], x.dtype)
                self._warned_tokens = True
            return torch.nn.functional.linear(x, self.weight.to(x.dtype),
                                              None if self.bias is None else self.bias.to(x.dtype))
        delayed = self._delayed_scaling() if self.recipe.delayed else None
        y = _Float8LinearFunction.apply(x2.contiguous(), self.weight, self.bias, self.recipe, delayed)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        extra = f", amax_history_len={self.amax_history_len}, margin={self.margin}" if self.recipe.delayed else ""
        return super().extra_repr() + f", recipe={self.recipe.name}" + extra


def _check_dims(in_features: int, out_features: int) -> None:
    if in_features < 1 or out_features < 1:
        raise ValueError(f"features: in {in_features}, out {out_features}; both must be positive")
    if in_features % 16 or out_features % 16:
        raise ValueError(f"features: in {in_features}, out {out_features}; FP8 GEMMs need both to be multiples "
                         "of 16 (keep this layer in bf16: convert_to_float8_training's default filter does)")


def default_module_filter(module: torch.nn.Module, fqn: str) -> bool:
    """Whether to convert this ``torch.nn.Linear``: both dimensions multiples of 16 (what FP8 TMA
    rows need) and at least 128 (one GEMM tile; a narrower layer leaves most of each FP8 tile
    empty and pays the casts). The reason for keeping a layer is logged once, at info level."""
    i, o = module.in_features, module.out_features
    why = None
    if i % 16 or o % 16:
        why = f"in_features {i} and out_features {o} must be multiples of 16"
    elif min(i, o) < 128:
        why = f"a dimension below 128 (in {i}, out {o}) leaves the FP8 tiles mostly empty"
    if why:
        _log.info("fp8jit: keeping %s in its dtype: %s", fqn or "<root>", why)
    return why is None


def convert_to_float8_training(model: torch.nn.Module, *, recipe="tensorwise",
                               module_filter_fn: Optional[Callable[[torch.nn.Module, str], bool]] = None,
                               amax_history_len: int = 16, margin: int = 0) -> torch.nn.Module:
    """Swaps every ``torch.nn.Linear`` of ``model`` (the model itself included) for a
    ``Float8Linear`` with ``recipe``, in place, as torchao's ``convert_to_float8_training`` does;
    ``module_filter_fn(module, fully_qualified_name)`` decides which (default:
    ``default_module_filter``). The swapped layers keep their parameters, so convert before
    creating the optimizer or after: it holds the same tensors. ``amax_history_len`` and
    ``margin``: the delayed recipe's (see Float8Linear). Returns ``model``."""
    r = _recipe(recipe)
    keep = default_module_filter if module_filter_fn is None else module_filter_fn
    if not callable(keep):
        raise ValueError(f"module_filter_fn: {module_filter_fn!r} is not callable")

    def swap(module: torch.nn.Module, fqn: str) -> torch.nn.Module:
        if isinstance(module, torch.nn.Linear) and not isinstance(module, Float8Linear):
            if not keep(module, fqn):
                return module
            return Float8Linear.from_float(module, r, amax_history_len=amax_history_len, margin=margin)
        for name, child in list(module.named_children()):
            new = swap(child, f"{fqn}.{name}" if fqn else name)
            if new is not child:
                setattr(module, name, new)
        return module

    return swap(model, "")
