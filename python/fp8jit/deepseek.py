"""A drop-in for DeepSeek-V3's ``inference/kernel.py``: ``act_quant``, ``weight_dequant`` and
``fp8_gemm`` with its signatures, layouts and dtypes, on fp8jit's kernels::

    import fp8jit.deepseek as kernel        # instead of `import kernel` in inference/model.py

Results: ``weight_dequant`` multiplies in fp32 and rounds once, as kernel.py does;
``fp8_gemm`` promotes every 128 of K as kernel.py does, in another summation order (expect
~1e-5 relative differences). ``act_quant`` runs fp8jit's quantize kernel with kernel.py's own
arithmetic (``arithmetic="deepseek"``: amax floored at 1e-4, scale = amax / 448 and codes x /
scale with the approximate division Triton emits, ue8m0 scales as exp2(ceil(log2(scale)))),
so that its bytes are kernel.py's.
"""

from __future__ import annotations

from typing import Optional, Tuple

from ._ops import _torch, dequantize, gemm, quantize

__all__ = ["act_quant", "weight_dequant", "fp8_gemm"]

_BLOCK = 128


def _check_block_size(block_size: int) -> None:
    if block_size != _BLOCK:
        raise ValueError(f"block_size {block_size}: fp8jit's kernels scale per 128 elements (block_size=128)")


def act_quant(x, block_size: int = 128, scale_fmt: Optional[str] = None) -> Tuple["object", "object"]:
    """x [..., K] (contiguous, K a multiple of block_size) -> (y float8_e4m3fn [..., K], s float32
    [..., K / block_size]): one scale per block_size elements of a row."""
    _check_block_size(block_size)
    if scale_fmt not in (None, "ue8m0"):
        raise ValueError(f"scale_fmt {scale_fmt!r}: expected None or 'ue8m0'")
    T = _torch()
    if not isinstance(x, T.Tensor) or not x.is_contiguous():
        raise ValueError("x: expected a contiguous torch.Tensor")
    if x.dim() < 1 or x.size(-1) % block_size:
        raise ValueError(f"x: shape {tuple(x.shape)}, the last dimension must be a multiple of {block_size}")
    return quantize(x, "e4m3", "1x128", pow2_scale=scale_fmt == "ue8m0", arithmetic="deepseek")


def weight_dequant(x, s, block_size: int = 128):
    """x [M, N] FP8 (contiguous) and s [ceil(M/128), ceil(N/128)] float32 -> [M, N] in
    torch.get_default_dtype()."""
    _check_block_size(block_size)
    T = _torch()
    for name, t in (("x", x), ("s", s)):
        if not isinstance(t, T.Tensor) or not t.is_contiguous() or t.dim() != 2:
            raise ValueError(f"{name}: expected a contiguous 2-D torch.Tensor")
    return dequantize(x, s, "128x128", dtype=T.torch.get_default_dtype())


def fp8_gemm(a, a_s, b, b_s):
    """a [..., K] FP8 with a_s [..., K/128] (act_quant's), b [N, K] FP8 with b_s [ceil(N/128),
    K/128] -> a @ b^T, [..., N] in torch.get_default_dtype()."""
    T = _torch()
    for name, t in (("a", a), ("a_s", a_s), ("b", b), ("b_s", b_s)):
        if not isinstance(t, T.Tensor) or not t.is_contiguous():
            raise ValueError(f"{name}: expected a contiguous torch.Tensor")
    k = a.size(-1)
    a2 = a.reshape(-1, k)
    s2 = a_s.reshape(a2.shape[0], -1)
    c = gemm(a2, b, s2, b_s, scale="block", out_dtype=T.torch.get_default_dtype())
    return c.view(*a.shape[:-1], b.size(0))
