"""Where fp8jit.gemm's host time goes (GPU machine): the median per-call time of each torch query
and each check helper the call makes, on the operands of python/tests/host_overhead.py.
Usage: PYTHONPATH=build-py/python python3 lab/probes/py_host_cost.py"""
import timeit

import torch

import fp8jit
import fp8jit.deepseek
from fp8jit import _fp8jit, _ops

m, n, k = 128, 256, 512
a, sa = fp8jit.quantize(torch.randn(m, k, dtype=torch.bfloat16, device="cuda"), scale_layout="col_major_tma")
b, sb = fp8jit.quantize(torch.randn(n, k, dtype=torch.bfloat16, device="cuda"), granularity="128x128")
d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
T = _ops._torch()
x = torch.randn(64, 7168, dtype=torch.bfloat16, device="cuda")
raw = (a.data_ptr(), "e4m3", k, b.data_ptr(), "e4m3", k, d.data_ptr(), "bf16", n, m, n, k, "block", sa.data_ptr(),
       sa.untyped_storage().nbytes() // 4, "col_major_tma", sb.data_ptr(), sb.numel(), "row_major", 0, False, 0,
       torch.cuda.current_stream().cuda_stream)


def wrapped(a, b, scale_a, scale_b, *, scale="block", out_dtype=None, bias=None, fast_accum=False, out=None,
            stream=None, max_sms=0):
    """fp8jit.gemm as it was before the binding became the function: a Python frame around the
    common case."""
    d = _fp8jit.gemm_common(a, b, scale_a, scale_b, out, out_dtype, scale, bias, fast_accum, max_sms, stream)
    return d if d is not None else _ops._gemm_checked(a, b, scale_a, scale_b, scale, out_dtype, bias, fast_accum,
                                                     out, stream, max_sms)


cases = {
    "a.shape": lambda: a.shape, "a.stride()": lambda: a.stride(), "a.stride(0)": lambda: a.stride(0),
    "a.data_ptr()": lambda: a.data_ptr(), "a.dtype": lambda: a.dtype, "a.is_cuda": lambda: a.is_cuda,
    "a.get_device()": lambda: a.get_device(), "a.is_contiguous()": lambda: a.is_contiguous(),
    "sa.untyped_storage().nbytes()": lambda: sa.untyped_storage().nbytes(), "a.dim()": lambda: a.dim(),
    "isinstance(a, Tensor)": lambda: isinstance(a, T.Tensor), "current_device()": lambda: T.current_device(),
    "raw_stream(0)": lambda: T.raw_stream(0), "scale_count": lambda: _fp8jit.scale_count("1x128", "row_major", m, k),
    "_check_cuda": lambda: _ops._check_cuda(T, a, "a"), "_rows": lambda: _ops._rows(a, "a"),
    "_gemm_scales": lambda: _ops._gemm_scales(T, "block", sa, sb, m, n, k, 1, 0),
    "_output": lambda: _ops._output(T, d, torch.bfloat16, (m, n), 0),
    "_gemm_operands": lambda: _ops._gemm_operands(T, a, b, sa, sb, "block", None, None, False, d),
    "_stream": lambda: _ops._stream(T, 0, None),
    "fp8jit.gemm": lambda: fp8jit.gemm(a, b, sa, sb, out=d),
    "_fp8jit.gemm_common (positional)": lambda: _fp8jit.gemm_common(a, b, sa, sb, d, None, "block", None, False, 0,
                                                                    None),
    "Python def around gemm_common": lambda: wrapped(a, b, sa, sb, out=d),
    "_fp8jit.gemm (raw)": lambda: _fp8jit.gemm(*raw),
    "_gemm_checked": lambda: _ops._gemm_checked(a, b, sa, sb, "block", None, None, False, d, None, 0),
    "fp8jit.quantize(x 64x7168)": lambda: fp8jit.quantize(x),
    "fp8jit.deepseek.act_quant(x)": lambda: fp8jit.deepseek.act_quant(x),
}
for name, fn in cases.items():
    n_calls = 200
    times = timeit.repeat(fn, number=n_calls, repeat=15)
    torch.cuda.synchronize()
    print(f"{name:34s} {sorted(times)[7] / n_calls * 1e6:7.2f} us")
