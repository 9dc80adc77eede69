"""fp8jit for PyTorch models: ``Linear`` (FP8 weights with 128x128 or per-tensor scales,
activations quantized on the fly by one fp8jit kernel, bias, bf16 out) and the operations it is
built from as custom ops (``torch.ops.fp8jit.quantize``, ``torch.ops.fp8jit.gemm``), opaque to
``torch.compile`` (each has a fake implementation for tracing) and safe under CUDA graph capture
(kernels are compiled and loaded on first use: run a layer once before capturing it)::

    import fp8jit.torch
    layer = fp8jit.torch.Linear.from_float(torch_linear)          # block scaling
    y = torch.compile(layer)(x)                                   # x bf16 [..., in_features]

and for training, ``Float8Linear`` and ``convert_to_float8_training`` (forward and backward GEMMs
in FP8; recipes "tensorwise", "rowwise", "delayed" and "blockwise", see ``fp8jit._training``)::

    fp8jit.torch.convert_to_float8_training(model, recipe="tensorwise")  # in place, nn.Linear only
"""

from typing import List, Optional

import torch

from . import _ops

__all__ = ["Linear", "quantize_op", "gemm_op", "Float8Linear", "convert_to_float8_training", "cast_transposed_op",
           "default_module_filter", "RECIPES"]

_GRANULARITY = {"block": "1x128", "tensor": "tensor"}
_WEIGHT_GRANULARITY = {"block": "128x128", "tensor": "tensor"}


# No `from __future__ import annotations` here: custom_op reads these annotations as types.
@torch.library.custom_op("fp8jit::quantize", mutates_args=())
def quantize_op(x: torch.Tensor, granularity: str) -> List[torch.Tensor]:
    """x [M, K] -> [q e4m3 [M, K], scales fp32]: '1x128' [M, ceil(K/128)] column-major with rows
    padded to 4 (what the GEMM reads by TMA), 'tensor' [1]."""
    layout = "col_major_tma" if granularity == "1x128" else "row_major"
    q, s = _ops.quantize(x, "e4m3", granularity, scale_layout=layout)
    return [q, s]


@quantize_op.register_fake
def _(x: torch.Tensor, granularity: str) -> List[torch.Tensor]:
    m, k = x.shape
    q = x.new_empty((m, k), dtype=torch.float8_e4m3fn)
    if granularity != "1x128":
        return [q, x.new_empty((1,), dtype=torch.float32)]
    s = torch.empty_strided((m, (k + 127) // 128), (1, (m + 3) // 4 * 4), dtype=torch.float32, device=x.device)
    return [q, s]


@torch.library.custom_op("fp8jit::gemm", mutates_args=())
def gemm_op(a: torch.Tensor, b: torch.Tensor, scale_a: torch.Tensor, scale_b: torch.Tensor, scale: str,
            out_dtype: torch.dtype, bias: Optional[torch.Tensor] = None) -> torch.Tensor:
    """(a [M, K] scaled) @ (b [N, K] scaled)^T (+ bias) in out_dtype: fp8jit.gemm."""
    return _ops.gemm(a, b, scale_a, scale_b, scale=scale, out_dtype=out_dtype, bias=bias)


@gemm_op.register_fake
def _(a, b, scale_a, scale_b, scale, out_dtype, bias=None):
    return a.new_empty((a.shape[0], b.shape[0]), dtype=out_dtype)


class Linear(torch.nn.Module):
    """y = x @ W^T (+ bias) with W in FP8 (e4m3) and its scales: per 128x128 block
    (``scale="block"``, DeepSeek-V3's recipe) or one per tensor (``scale="tensor"``). The
    activations are quantized on every call (1x128 or per tensor), in one fp8jit kernel, then
    multiplied in one fp8jit GEMM; the output is ``out_dtype`` (default bf16)."""

    def __init__(self, in_features: int, out_features: int, bias: bool = True, *, scale: str = "block",
                 out_dtype: torch.dtype = torch.bfloat16, device=None):
        super().__init__()
        if scale not in _GRANULARITY:
            raise ValueError(f"scale '{scale}': expected 'block' or 'tensor'")
        if in_features < 1 or out_features < 1:
            raise ValueError(f"features: in {in_features}, out {out_features}; both must be positive")
        self.in_features, self.out_features, self.scale, self.out_dtype = in_features, out_features, scale, out_dtype
        w_scales = ((out_features + 127) // 128, (in_features + 127) // 128) if scale == "block" else (1,)
        self.weight = torch.nn.Parameter(
            torch.zeros(out_features, in_features, dtype=torch.float8_e4m3fn, device=device), requires_grad=False)
        self.weight_scale = torch.nn.Parameter(torch.ones(w_scales, dtype=torch.float32, device=device),
                                               requires_grad=False)
        self.bias = torch.nn.Parameter(torch.zeros(out_features, dtype=out_dtype, device=device),
                                       requires_grad=False) if bias else None

    @classmethod
    def from_float(cls, linear: torch.nn.Linear, *, scale: str = "block",
                   out_dtype: torch.dtype = torch.bfloat16) -> "Linear":
        """An FP8 copy of a CUDA ``torch.nn.Linear``, its weight quantized by fp8jit."""
        w = linear.weight.detach()
        if not w.is_cuda:
            raise ValueError(f"linear: weight on {w.device}; move the layer to a CUDA device first")
        layer = cls(linear.in_features, linear.out_features, linear.bias is not None, scale=scale, out_dtype=out_dtype,
                    device=w.device)
        wq, ws = _ops.quantize(w.contiguous(), "e4m3", _WEIGHT_GRANULARITY[scale])
        layer.weight.data.copy_(wq)
        layer.weight_scale.data.copy_(ws.reshape(layer.weight_scale.shape))
        if linear.bias is not None:
            layer.bias.data.copy_(linear.bias.detach().to(out_dtype))
        return layer

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.shape[-1] != self.in_features:
            raise ValueError(f"x: shape {tuple(x.shape)}, the last dimension must be {self.in_features}")
        x2 = x.reshape(-1, self.in_features)
        q, s = quantize_op(x2, _GRANULARITY[self.scale])
        y = gemm_op(q, self.weight, s, self.weight_scale, self.scale, self.out_dtype, self.bias)
        return y.reshape(*x.shape[:-1], self.out_features)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"bias={self.bias is not None}, scale={self.scale}, out_dtype={self.out_dtype}")


# After the ops above: the training layer calls torch.ops.fp8jit.gemm.
from ._training import (RECIPES, Float8Linear, cast_transposed_op, convert_to_float8_training,  # noqa: E402
                        default_module_filter)
