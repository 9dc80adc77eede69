#!/usr/bin/env python3
"""Per-tile timeline of DeepGEMM v1's block-scaled GEMM kernel, for comparison with fp8jit's under
lab/patches/exp_tile_timeline.patch (same phases, same counters, same report line).

Copies DeepGEMM v1 (8dfa329, pure-Python JIT) to a scratch folder and instruments its kernel
(deep_gemm/include/deep_gemm/fp8_gemm.cuh): each math warpgroup sums, over its tiles, the cycles
(%clock) of the first full-barrier wait of a tile (fill), the other full-barrier waits (wait), the
B-scale load before the K loop (pre, DeepGEMM only), the K loop (loop, from the tile's start,
fill and waits included), and the time between one tile's K loop and the next tile's start
(epi: epilogue and scheduler); the producer sums its empty-barrier waits; thread 0 records
%globaltimer at start and end. The sums go to a __device__ array read back through the loaded
library after each call (cuLibraryGetGlobal).

Usage (repo root, Hopper): python3 lab/probes/timeline_deepgemm.py .carry/deepgemm M,N,K [M,N,K...]
"""
import gc
import os
import re
import shutil
import sys

import numpy as np


def instrument(src):
    def rep(old, new, count=1, nth=None):
        nonlocal src
        n = src.count(old)
        if nth is None:
            assert n == count, (old, n)
            src = src.replace(old, new)
        else:
            assert n > nth, (old, n)
            i = -1
            for _ in range(nth + 1):
                i = src.index(old, i + 1)
            src = src[:i] + new + src[i + len(old):]

    head = ('extern "C" { __device__ unsigned fp8jit_tl[1024 * 64]; }\n'
            "static __device__ __forceinline__ unsigned tl_clock() { unsigned c; "
            'asm volatile("mov.u32 %0, %%clock;" : "=r"(c)::"memory"); return c; }\n'
            "static __device__ __forceinline__ unsigned long long tl_gtime() { unsigned long long c; "
            'asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(c)); return c; }\n')
    i = src.index("template <")
    src = src[:i] + head + src[i:]
    rep("    (kNumTMAMulticast > 1) ? cute::cluster_sync() : __syncthreads();\n",
        "    (kNumTMAMulticast > 1) ? cute::cluster_sync() : __syncthreads();\n"
        "    const unsigned long long tl_g0 = tl_gtime();\n")
    # Producer.
    rep("            // Persistently schedule over blocks\n            while (scheduler.get_next_block(m_block_idx, n_block_idx)) {\n",
        "            unsigned tl_stages = 0, tl_empty = 0, tl_first_empty = 0; const unsigned tl_ps = tl_clock();\n"
        "            // Persistently schedule over blocks\n            while (scheduler.get_next_block(m_block_idx, n_block_idx)) {\n")
    rep("                        empty_barriers[s]->wait((scheduler.current_iter * kNumIterations + k_iter + 1) & 1);\n\n"
        "                        // Issue TMA A\n",
        "                        { const unsigned w0 = tl_clock();\n"
        "                        empty_barriers[s]->wait((scheduler.current_iter * kNumIterations + k_iter + 1) & 1);\n"
        "                        const unsigned d = tl_clock() - w0; tl_empty += d; ++tl_stages;\n"
        "                        if (k_iter == 0 and s == 0) tl_first_empty += d; }\n\n"
        "                        // Issue TMA A\n")
    rep("            // To safely deconstruct distributed shared barriers, we need another round of empty waits\n",
        "            if (blockIdx.x < 1024) { unsigned* t = fp8jit_tl + blockIdx.x * 64 + 40;\n"
        "              t[0] = tl_stages; t[1] = tl_empty; t[2] = tl_first_empty; t[3] = tl_clock() - tl_ps; }\n"
        "            // To safely deconstruct distributed shared barriers, we need another round of empty waits\n")
    # Math warpgroups.
    rep("        // Persistently schedule over blocks\n        while (scheduler.get_next_block(m_block_idx, n_block_idx)) {\n",
        "        unsigned tl_issue = 0, tl_mmawait = 0, tl_promote = 0, tl_passes = 0;\n"
        "        unsigned tl_seg_scales = 0, tl_seg_inter = 0, tl_seg_post = 0, tl_seg_end = 0, tl_p = 0;\n"
        "        unsigned tl_tiles = 0, tl_first = 0, tl_fill = 0, tl_wait = 0, tl_pre = 0, tl_loop = 0, tl_epi = 0;\n"
        "        const unsigned tl_begin = tl_clock(); unsigned tl_t = tl_begin;\n"
        "        // Persistently schedule over blocks\n        while (scheduler.get_next_block(m_block_idx, n_block_idx)) {\n"
        "            const unsigned tl_a = tl_clock();\n"
        "            if (tl_tiles == 0) tl_first = tl_a - tl_begin; else tl_epi += tl_a - tl_t;\n")
    rep("            cutlass::arch::NamedBarrier(kNumMathThreads).sync();\n\n            // Accumulation",
        "            cutlass::arch::NamedBarrier(kNumMathThreads).sync();\n            tl_pre += tl_clock() - tl_a;\n\n"
        "            // Accumulation")
    rep("                    // Wait TMA arrivals\n                    full_barriers[s]->wait((scheduler.current_iter * kNumIterations + k_iter) & 1);\n",
        "                    // Wait TMA arrivals\n                    { const unsigned w0 = tl_clock();\n"
        "                    if (not (k_iter == 0 and s == 0)) tl_seg_end += w0 - tl_p;\n"
        "                    full_barriers[s]->wait((scheduler.current_iter * kNumIterations + k_iter) & 1);\n"
        "                    tl_p = tl_clock(); const unsigned d = tl_p - w0; if (k_iter == 0 and s == 0) tl_fill += d; else tl_wait += d; }\n")
    rep("            }, not scheduler.is_computation_valid(m_block_idx, math_wg_idx * WGMMA::M), num_former_iters);\n",
        "            }, not scheduler.is_computation_valid(m_block_idx, math_wg_idx * WGMMA::M), num_former_iters);\n"
        "            tl_t = tl_clock(); tl_loop += tl_t - tl_a; ++tl_tiles;\n")
    rep("            __syncwarp();\n        }\n    }\n#else",
        "            __syncwarp();\n        }\n"
        "        if (threadIdx.x % 128 == 0 and blockIdx.x < 1024) {\n"
        "            unsigned* t = fp8jit_tl + blockIdx.x * 64 + math_wg_idx * 20;\n"
        "            t[0] = tl_tiles; t[1] = tl_first; t[2] = tl_fill; t[3] = tl_wait; t[4] = tl_pre;\n"
        "            t[5] = tl_loop; t[6] = 0; t[7] = tl_epi; t[8] = tl_clock() - tl_t;\n"
        "            t[9] = tl_issue; t[10] = tl_mmawait; t[11] = tl_promote; t[12] = tl_passes;\n"
        "            t[13] = tl_seg_scales; t[14] = tl_seg_inter; t[15] = tl_seg_post; t[16] = tl_seg_end;\n"
        "        }\n"
        "        if (threadIdx.x == 0 and blockIdx.x < 1024) {\n"
        "            const unsigned long long g1 = tl_gtime(); unsigned smid;\n"
        '            asm volatile("mov.u32 %0, %%smid;" : "=r"(smid));\n'
        "            unsigned* t = fp8jit_tl + blockIdx.x * 64 + 48;\n"
        "            t[0] = unsigned(tl_g0); t[1] = unsigned(tl_g0 >> 32); t[2] = unsigned(g1); t[3] = unsigned(g1 >> 32);\n"
        "            t[4] = smid; t[5] = 1;\n"
        "        }\n"
        "    }\n#else")
    rep("                    \twarpgroup_arrive();\n",
        "                    \tconst unsigned tl_i0 = tl_clock(); (local_idx == 0 ? tl_seg_scales : tl_seg_inter) += tl_i0 - tl_p;\n"
        "                    \twarpgroup_arrive();\n")
    rep("                    \twarpgroup_commit_batch();\n",
        "                    \twarpgroup_commit_batch();\n                    \tconst unsigned tl_i1 = tl_clock(); tl_issue += tl_i1 - tl_i0; ++tl_passes;\n")
    rep("                    \twarpgroup_wait<0>();\n",
        "                    \tconst unsigned tl_w0 = tl_clock(); tl_seg_post += tl_w0 - tl_i1;\n                    \twarpgroup_wait<0>();\n"
        "                    \tconst unsigned tl_w1 = tl_clock(); tl_mmawait += tl_w1 - tl_w0;\n")
    rep("accum[i * 4 + 3];\n                    \t}\n",
        "accum[i * 4 + 3];\n                    \t}\n                    \ttl_p = tl_clock(); tl_promote += tl_p - tl_w1;\n")
    rep("                        full_barrier.arrive_and_expect_tx(SMEM_A_SIZE_PER_STAGE + SMEM_B_SIZE_PER_STAGE + SMEM_SCALES_A_SIZE_PER_STAGE);\n",
        "                        if (blockIdx.x < 1024) *reinterpret_cast<volatile unsigned*>(fp8jit_tl + blockIdx.x * 64 + 56 + s) = tl_clock();\n"
        "                        full_barrier.arrive_and_expect_tx(SMEM_A_SIZE_PER_STAGE + SMEM_B_SIZE_PER_STAGE + SMEM_SCALES_A_SIZE_PER_STAGE);\n")
    # An idle lane of the TMA warpgroup polls every stage's full barrier: issue to completion.
    rep("""            // To safely deconstruct distributed shared barriers, we need another round of empty waits
            if constexpr (kNumTMAMulticast > 1) {
                #pragma unroll
                for (uint32_t s = 0; s < kNumStages; ++ s)
                    empty_barriers[s]->wait((scheduler.current_iter * kNumIterations + 1) & 1);
            }
        }
""", """            // To safely deconstruct distributed shared barriers, we need another round of empty waits
            if constexpr (kNumTMAMulticast > 1) {
                #pragma unroll
                for (uint32_t s = 0; s < kNumStages; ++ s)
                    empty_barriers[s]->wait((scheduler.current_iter * kNumIterations + 1) & 1);
            }
        } else if (threadIdx.x == kNumMathThreads + 32 and blockIdx.x < 1024) {
            unsigned tl_n = 0, tl_sum = 0, tl_max = 0;
            while (scheduler.get_next_block(m_block_idx, n_block_idx)) {
                launch_k_iterations([&](uint32_t k_iter, auto divisible_type, auto _, auto __) {
                    constexpr bool kHasDivisibleStages = std::is_same_v<decltype(divisible_type), DivisibleK>;
                    constexpr uint32_t kNumInnerStages = kHasDivisibleStages ? kNumStages : (SHAPE_K % kFullKOfAllStages) / BLOCK_K;
                    #pragma unroll
                    for (uint32_t s = 0; s < kNumInnerStages; ++ s) {
                        full_barriers[s]->wait((scheduler.current_iter * kNumIterations + k_iter) & 1);
                        const unsigned lat = tl_clock() - *reinterpret_cast<volatile unsigned*>(fp8jit_tl + blockIdx.x * 64 + 56 + s);
                        ++tl_n; tl_sum += lat; tl_max = lat > tl_max ? lat : tl_max;
                    }
                    #pragma unroll
                    for (uint32_t s = kNumInnerStages; s < kNumStages; ++ s)
                        full_barriers[s]->wait((scheduler.current_iter * kNumIterations + k_iter) & 1);
                }, false, 0);
            }
            unsigned* t = fp8jit_tl + blockIdx.x * 64 + 44;
            t[0] = tl_n; t[1] = tl_sum; t[2] = tl_max;
        }
""")
    return src


def summary(t):
    """The report line of runtime/jit/module.cpp's report_timeline (the patch's host side)."""
    t = t.reshape(-1, 64)
    t = t[t[:, 53] == 1]
    n = len(t)
    if n == 0:
        return "TL no CTAs"
    g0 = t[:, 48].astype(np.uint64) | (t[:, 49].astype(np.uint64) << np.uint64(32))
    g1 = t[:, 50].astype(np.uint64) | (t[:, 51].astype(np.uint64) << np.uint64(32))
    line = (f"TL ctas {n} span_us {(int(g1.max()) - int(g0.min())) / 1e3:.2f} start_spread_us "
            f"{(int(g0.max()) - int(g0.min())) / 1e3:.2f} end_spread_us {(int(g1.max()) - int(g1.min())) / 1e3:.2f} "
            f"cta_us {float((g1 - g0).astype(np.float64).mean()) / 1e3:.2f}")
    names = ["tiles", "first", "fill", "wait", "pre", "loop", "half", "epi", "tail"]
    for w in range(2):
        c = t[:, w * 20:w * 20 + 17].astype(np.float64).sum(axis=0)
        tiles = c[0] or 1
        line += f" | wg{w} tiles/cta {c[0] / n:.2f} first {c[1] / n:.0f}"
        for i in range(2, 8):
            line += f" {names[i]} {c[i] / tiles:.0f}"
        line += f" tail {c[8] / n:.0f}"
        passes = c[12] or 1
        line += (f" per-pass issue {c[9] / passes:.0f} mmawait {c[10] / passes:.0f} promote {c[11] / passes:.0f}"
                 f" passes/tile {c[12] / tiles:.1f}"
                 f" scales {c[13] / passes:.0f} inter {c[14] / passes:.0f} post {c[15] / passes:.0f}"
                 f" kbend {c[16] / passes:.0f} (per pass)")
    p = t[:, 40:44].astype(np.float64).sum(axis=0)
    line += (f" | prod stages/cta {p[0] / n:.1f} empty/stage {p[1] / (p[0] or 1):.0f} "
             f"first_empty/cta {p[2] / n:.0f} total {p[3] / n:.0f}")
    lat = t[:, 44:47].astype(np.float64).sum(axis=0)
    line += f" | loads' latency per stage {lat[1] / (lat[0] or 1):.0f} (max per CTA {lat[2] / n:.0f})"
    return line


def main():
    src_dir, shapes = sys.argv[1], [tuple(map(int, s.split(","))) for s in sys.argv[2:]]
    work = "/tmp/deepgemm-timeline"
    shutil.rmtree(work, ignore_errors=True)
    shutil.copytree(src_dir, work, symlinks=True)
    header = os.path.join(work, "deep_gemm/include/deep_gemm/fp8_gemm.cuh")
    with open(header) as f:
        text = instrument(f.read())
    with open(header, "w") as f:
        f.write(text)
    os.environ["DG_JIT_CACHE_DIR"] = "/tmp/deepgemm-timeline-cache"
    os.environ.setdefault("CUDA_HOME", "/usr/local/cuda")
    os.environ.setdefault("DG_JIT_NVCC_COMPILER", os.path.join(os.environ["CUDA_HOME"], "bin", "nvcc"))
    sys.path.insert(0, work)
    import torch
    import cuda.bindings.driver as cbd
    import deep_gemm
    from deep_gemm.jit import runtime as jit_runtime
    from deep_gemm.jit_kernels import gemm as dg_gemm

    torch.manual_seed(1234)
    for m, n, k in shapes:
        a = (torch.randn(m, k, device="cuda") * 2).to(torch.float8_e4m3fn)
        b = (torch.randn(n, k, device="cuda") * 2).to(torch.float8_e4m3fn)
        sa = torch.rand(m, k // 128, device="cuda") * 1.75 + 0.25
        sb = torch.rand(n // 128, k // 128, device="cuda") * 1.75 + 0.25
        sa = deep_gemm.get_col_major_tma_aligned_tensor(sa)
        d = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
        num_sms, bm, bn, stages, mc, smem = dg_gemm.get_best_configs(m, n, k, 1, deep_gemm.get_num_sms())
        cfg = f"{bm}x{bn} s{stages} mc{mc[0]}{'A' if mc[1] else 'B'} sms{num_sms}"
        flush = torch.empty(256 << 20, dtype=torch.int8, device="cuda")
        for it in range(6):
            flush.zero_()
            deep_gemm.gemm_fp8_fp8_bf16_nt((a, sa), (b, sb), d)
            torch.cuda.synchronize()
            libs = [o for o in gc.get_objects() if isinstance(o, jit_runtime.Runtime) and o.lib is not None]
            for rt in libs:
                res, ptr, size = cbd.cuLibraryGetGlobal(rt.lib, b"fp8jit_tl")
                if res != cbd.CUresult.CUDA_SUCCESS:
                    continue
                host = np.zeros(int(size) // 4, dtype=np.uint32)
                cbd.cuMemcpyDtoH(host.ctypes.data, ptr, int(size))
                cbd.cuMemsetD8(ptr, 0, int(size))
                if host.reshape(-1, 64)[:, 53].any():
                    print(f"deepgemm {m}x{n}x{k} {cfg} call {it}: {summary(host)}", flush=True)


if __name__ == "__main__":
    main()
