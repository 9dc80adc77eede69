"""FP8 training of ``torch.nn.Linear`` layers with fp8jit's casts and GEMMs: ``Float8Linear`` and
``convert_to_float8_training`` (both re-exported by ``fp8jit.torch``).

Each of a layer's three GEMMs runs in FP8: Y = X W^T, dX = dY W and dW = dY^T X. FP8 WGMMA reads
both operands K-major, so the two backward GEMMs need X, W and dY transposed: every cast writes
the FP8 copy and its transposed FP8 copy from one read of the tensor (fp8jit's quantize with a
transposed output), and the forward pass keeps only the transposed copies of X and W for the
backward pass. Master weights, outputs and gradients stay in the layer's dtype (bf16).

Recipes (``recipe=``):

* ``"tensorwise"``: torchao's ``Float8LinearRecipeName.TENSORWISE`` (dynamic, "current" scaling):
  one scale per tensor from its amax at each cast, E4M3 for X, W and dY.
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


class Recipe(NamedTuple):
    name: str
    activation: str  # the cast granularity of X and dY
    weight: str  # the cast granularity of W
    forward: str  # fp8jit.gemm scale modes of Y = X W^T, dX = dY W and dW = dY^T X
    grad_input: str
    grad_weight: str


RECIPES: Dict[str, Recipe] = {
    "tensorwise": Recipe("tensorwise", "tensor", "tensor", "tensor", "tensor", "tensor"),
    "blockwise": Recipe("blockwise", "1x128", "128x128", "block", "block", "group"),
}


def _recipe(name) -> Recipe:
    if isinstance(name, Recipe):
        return name
    if name not in RECIPES:
        raise ValueError(f"recipe {name!r}: expected one of {', '.join(repr(r) for r in RECIPES)}")
    return RECIPES[name]


# No `from __future__ import annotations` here: custom_op reads these annotations as types.
@torch.library.custom_op("fp8jit::cast_transposed", mutates_args=())
def cast_transposed_op(x: torch.Tensor, granularity: str) -> List[torch.Tensor]:
    """x [M, K] -> [q [M, K], s, qt [K, M], st], E4M3, from one read of x. 'tensor': s and st one
    scale each (the same value); '1x128': per 128 along the rows of x and of x^T, column-major with
    rows padded to 4 (as the GEMM reads them by TMA); '128x128': s [ceil(M/128), ceil(K/128)] and
    st its transpose (the blocks of x^T)."""
    if granularity == "1x128":
        q, s, qt, st = _ops.quantize(x, "e4m3", "1x128", scale_layout="col_major_tma", transpose=True)
        return [q, s, qt, st]
    if granularity not in ("tensor", "128x128"):
        raise ValueError(f"granularity {granularity!r}: expected 'tensor', '1x128' or '128x128'")
    q, s, qt, _ = _ops.quantize(x, "e4m3", granularity, transpose=True)
    # Outputs of a custom op may not alias each other: the transposed copy gets its own scales.
    return [q, s, qt, s.clone() if granularity == "tensor" else s.t().contiguous()]


def _col_major_scales(rows: int, k: int, device) -> torch.Tensor:
    pad = (rows + 3) // 4 * 4
    return torch.empty_strided((rows, (k + 127) // 128), (1, pad), dtype=torch.float32, device=device)


@cast_transposed_op.register_fake
def _(x: torch.Tensor, granularity: str) -> List[torch.Tensor]:
    m, k = x.shape
    q = x.new_empty((m, k), dtype=torch.float8_e4m3fn)
    qt = x.new_empty((k, m), dtype=torch.float8_e4m3fn)
    if granularity == "1x128":
        return [q, _col_major_scales(m, k, x.device), qt, _col_major_scales(k, m, x.device)]
    if granularity == "128x128":
        bm, bk = (m + 127) // 128, (k + 127) // 128
        return [q, x.new_empty((bm, bk), dtype=torch.float32), qt, x.new_empty((bk, bm), dtype=torch.float32)]
    return [q, x.new_empty((1,), dtype=torch.float32), qt, x.new_empty((1,), dtype=torch.float32)]


def _gemm(a, b, sa, sb, scale: str, dtype, bias=None):
    return torch.ops.fp8jit.gemm(a, b, sa, sb, scale, dtype, bias)


class _Float8LinearFunction(torch.autograd.Function):
    """Y = X W^T (+ b) with the three GEMMs in FP8. X is 2-D [T, K] with T a multiple of 16."""

    @staticmethod
    def forward(ctx, x, weight, bias, recipe: Recipe):
        qx, sx, qxt, sxt = torch.ops.fp8jit.cast_transposed(x, recipe.activation)
        qw, sw, qwt, swt = torch.ops.fp8jit.cast_transposed(weight, recipe.weight)
        y = _gemm(qx, qw, sx, sw, recipe.forward, x.dtype, None if bias is None else bias.to(x.dtype))
        ctx.save_for_backward(qxt, sxt, qwt, swt)
        ctx.recipe, ctx.x_dtype, ctx.w_dtype, ctx.has_bias = recipe, x.dtype, weight.dtype, bias is not None
        ctx.bias_dtype = None if bias is None else bias.dtype
        return y

    @staticmethod
    def backward(ctx, dy):
        qxt, sxt, qwt, swt = ctx.saved_tensors
        r = ctx.recipe
        dy = dy.contiguous()
        qdy, sdy, qdyt, sdyt = torch.ops.fp8jit.cast_transposed(dy, r.activation)
        dx = dw = db = None
        if ctx.needs_input_grad[0]:
            dx = _gemm(qdy, qwt, sdy, swt, r.grad_input, ctx.x_dtype)  # [T, N] x [K, N]^T
        if ctx.needs_input_grad[1]:
            dw = _gemm(qdyt, qxt, sdyt, sxt, r.grad_weight, ctx.w_dtype)  # [N, T] x [K, T]^T
        if ctx.has_bias and ctx.needs_input_grad[2]:
            db = dy.sum(0, dtype=torch.float32).to(ctx.bias_dtype)
        return dx, dw, db, None


class Float8Linear(torch.nn.Linear):
    """A ``torch.nn.Linear`` whose forward and backward GEMMs run in FP8 through fp8jit (see the
    module's recipes). The weight (and bias) stay the layer's own parameters, in their dtype, so an
    optimizer and a state dict see the same tensors as before the swap. Inputs [..., in_features]
    on a CUDA device; a call with a token count that is not a multiple of 16 (what FP8 TMA rows
    need) runs in the input's dtype instead, logged once per layer."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, device=None, dtype=None, *,
                 recipe="tensorwise"):
        super().__init__(in_features, out_features, bias, device=device, dtype=dtype)
        self.recipe = _recipe(recipe)
        _check_dims(in_features, out_features)
        self._warned_tokens = False

    @classmethod
    def from_float(cls, linear: torch.nn.Linear, recipe="tensorwise") -> "Float8Linear":
        """A Float8Linear sharing ``linear``'s weight and bias parameters (no copy)."""
        if not isinstance(linear, torch.nn.Linear):
            raise ValueError(f"linear: a {type(linear).__name__}, expected a torch.nn.Linear")
        _check_dims(linear.in_features, linear.out_features)
        with torch.device("meta"):
            layer = cls(linear.in_features, linear.out_features, linear.bias is not None, recipe=recipe)
        layer.weight, layer.bias = linear.weight, linear.bias
        return layer

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
        y = _Float8LinearFunction.apply(x2.contiguous(), self.weight, self.bias, self.recipe)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return super().extra_repr() + f", recipe={self.recipe.name}"


def _check_dims(in_features: int, out_features: int) -> None:
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
                               module_filter_fn: Optional[Callable[[torch.nn.Module, str], bool]] = None
                               ) -> torch.nn.Module:
    """Swaps every ``torch.nn.Linear`` of ``model`` (the model itself included) for a
    ``Float8Linear`` with ``recipe``, in place, as torchao's ``convert_to_float8_training`` does;
    ``module_filter_fn(module, fully_qualified_name)`` decides which (default:
    ``default_module_filter``). The swapped layers keep their parameters, so convert before
    creating the optimizer or after: it holds the same tensors. Returns ``model``."""
    r = _recipe(recipe)
    keep = default_module_filter if module_filter_fn is None else module_filter_fn
    if not callable(keep):
        raise ValueError(f"module_filter_fn: {module_filter_fn!r} is not callable")

    def swap(module: torch.nn.Module, fqn: str) -> torch.nn.Module:
        if isinstance(module, torch.nn.Linear) and not isinstance(module, Float8Linear):
            return Float8Linear.from_float(module, r) if keep(module, fqn) else module
        for name, child in list(module.named_children()):
            new = swap(child, f"{fqn}.{name}" if fqn else name)
            if new is not child:
                setattr(module, name, new)
        return module

    return swap(model, "")
