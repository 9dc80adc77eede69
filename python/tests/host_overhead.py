"""Host time per call of fp8jit.gemm through the package (GPU): what Python adds over the C++
call. Prints the median over rounds of the mean host time of 200 back-to-back calls (outputs
preallocated, kernel already loaded; 200 launches stay below the launch queue's depth, so the
host does not wait for the GPU), and the same for the raw binding (pointers already extracted).
Usage: PYTHONPATH=build/python python3 python/tests/host_overhead.py"""

import statistics
import time

import torch

import fp8jit
from fp8jit import _fp8jit


def per_call_us(fn, calls=200, rounds=15):
    results = []
    for _ in range(rounds):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        results.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(results)


def main():
    m, n, k = 128, 256, 512
    a, sa = fp8jit.quantize(torch.randn(m, k, dtype=torch.bfloat16, device="cuda"), scale_layout="col_major_tma")
    b, sb = fp8jit.quantize(torch.randn(n, k, dtype=torch.bfloat16, device="cuda"), granularity="128x128")
    d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
    fp8jit.gemm(a, b, sa, sb, out=d)
    stream = torch.cuda.current_stream().cuda_stream
    args = (a.data_ptr(), "e4m3", k, b.data_ptr(), "e4m3", k, d.data_ptr(), "bf16", n, m, n, k, "block",
            sa.data_ptr(), sa.untyped_storage().nbytes() // 4, "col_major_tma", sb.data_ptr(), sb.numel(),
            "row_major", 0, False, 0, stream)
    full = per_call_us(lambda: fp8jit.gemm(a, b, sa, sb, out=d))
    raw = per_call_us(lambda: _fp8jit.gemm(*args))
    print(f"fp8jit.gemm (torch tensors, checks, current stream): {full:.2f} us per call")
    print(f"_fp8jit.gemm (raw binding, pointers given):          {raw:.2f} us per call")


if __name__ == "__main__":
    main()
