"""First-call latency of a served model's GEMMs after `fp8jit precompile --model`: in a fresh
process with FP8JIT_JIT=off and the warmed cache (FP8JIT_CACHE_DIR), the host time of each shape's
first fp8jit.gemm (route, database lookup, module load from the disk cache, launch; synchronized)
against its second. DeepSeek-V3's dense GEMMs at tp=8, M in {1, 64, 512, 4096}.
Usage (GPU machine): FP8JIT_JIT=off FP8JIT_CACHE_DIR=... python3 tests/gpu/first_call_latency.py"""
import statistics
import time

import torch

import fp8jit

# (name, N, K) of DeepSeek-V3's attention and dense MLP GEMMs on one of 8 ranks.
SHAPES = [("fused_qkv_a_proj", 2112, 7168), ("q_b_proj", 3072, 1536), ("kv_b_proj", 4096, 512),
          ("o_proj", 7168, 2048)]


def timed(fn):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3


def main():
    torch.cuda.init()
    torch.zeros(1, device="cuda")  # the context, outside every timing
    firsts, extra = [], []
    print(f"{'GEMM':18s} {'M':>5s} {'first ms':>9s} {'second ms':>10s}")
    for name, n, k in SHAPES:
        for m in (1, 64, 512, 4096):
            a = torch.randn(m, k, device="cuda").to(torch.float8_e4m3fn)
            b = torch.randn(n, k, device="cuda").to(torch.float8_e4m3fn)
            sa = torch.ones(m, (k + 127) // 128, device="cuda")
            sb = torch.ones((n + 127) // 128, (k + 127) // 128, device="cuda")
            d = torch.empty(m, n, dtype=torch.bfloat16, device="cuda")
            try:
                first = timed(lambda: fp8jit.gemm(a, b, sa, sb, out=d))
            except (RuntimeError, ValueError) as e:
                print(f"{name:18s} {m:5d} not warmed: {str(e)[:120]}")
                continue
            second = timed(lambda: fp8jit.gemm(a, b, sa, sb, out=d))
            firsts.append(first)
            extra.append(first - second)
            print(f"{name:18s} {m:5d} {first:9.3f} {second:10.3f}")
    stats = fp8jit.cache_stats()
    print(f"first calls: median {statistics.median(firsts):.3f} ms, worst {max(firsts):.3f} ms; first minus second: "
          f"median {statistics.median(extra):.3f} ms; compiles in this process: {stats.get('compiles')}")


if __name__ == "__main__":
    main()
