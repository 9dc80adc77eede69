// Times one grouped (contiguous) block-scaled GEMM with a given kernel spec, and the dense GEMM of
// one group's rows with another, in one process: a probe for "why is the grouped kernel slower
// than the dense one with the same tile" (run it under Nsight Compute for the counters). The
// operands are constant (FP8 1.0, scales 1.0): speed only, nothing is checked.
// Built and run by lab/probes/grouped_probe.sh (GPU machine, after building
// build-peers/libfp8jit.so). Run: /tmp/grouped_probe G ROWS_PER_GROUP N K 'GROUPED_SPEC_JSON'
// ['DENSE_SPEC_JSON']
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "cuda_probe.hpp"
#include "fp8jit/runtime.hpp"

using probe::alloc;
using probe::alloc_ones;
using probe::median_us;

int main(int argc, char** argv) {
  if (argc < 6) {
    std::fprintf(stderr, "usage: %s G ROWS_PER_GROUP N K GROUPED_SPEC_JSON [DENSE_SPEC_JSON]\n", argv[0]);
    return 2;
  }
  const std::int64_t groups = std::atoll(argv[1]), per = std::atoll(argv[2]), n = std::atoll(argv[3]),
                     k = std::atoll(argv[4]);
  const std::int64_t rows = groups * per, kb = (k + 127) / 128, nb = (n + 127) / 128;
  probe::init_device0();
  const CUdeviceptr a = alloc(rows * k, 0x38), b = alloc(groups * n * k, 0x38), d = alloc(rows * n * 2, 0);
  const CUdeviceptr sa = alloc_ones(kb * ((rows + 3) / 4 * 4)), sb = alloc_ones(groups * nb * kb);
  const CUdeviceptr flush = alloc(256u << 20, 0);
  std::vector<int> offsets(groups + 1);
  for (std::int64_t g = 0; g <= groups; ++g) offsets[g] = static_cast<int>(g * per);
  CUdeviceptr table = 0;
  CHECK(cuMemAlloc(&table, offsets.size() * 4));
  CHECK(cuMemcpyHtoD(table, offsets.data(), offsets.size() * 4));

  fp8jit::Runtime rt;
  fp8jit::GroupedGemmArgs g;
  g.layout = fp8jit::GemmLayout::contiguous;
  g.groups = groups;
  g.group_rows = reinterpret_cast<const int*>(table);
  g.a = reinterpret_cast<const void*>(a);
  g.b = reinterpret_cast<const void*>(b);
  g.d = reinterpret_cast<void*>(d);
  g.m = rows, g.n = n, g.k = k, g.expected_m = per;
  g.scale_a = reinterpret_cast<const float*>(sa);
  g.scale_a_size = kb * ((rows + 3) / 4 * 4);
  g.scale_b = reinterpret_cast<const float*>(sb);
  g.scale_b_size = groups * nb * kb;
  const fp8jit::KernelSpec gs = fp8jit::spec_from_json(argv[5]);
  rt.grouped_gemm(g, gs, nullptr);
  std::printf("grouped %s: %.1f us\n", fp8jit::spec_name(gs).c_str(),
              median_us([&] { rt.grouped_gemm(g, gs, nullptr); }, flush));

  // One group's rows as a dense GEMM, run `groups` times (a dense loop over equal groups).
  fp8jit::GemmArgs dg;
  dg.a = g.a, dg.b = g.b, dg.d = g.d;
  dg.m = per, dg.n = n, dg.k = k;
  dg.scale_a = g.scale_a;
  dg.scale_a_size = kb * ((per + 3) / 4 * 4);
  dg.scale_b = g.scale_b;
  dg.scale_b_size = nb * kb;
  const fp8jit::KernelSpec ds = argc > 6 ? fp8jit::spec_from_json(argv[6]) : rt.select(dg);
  rt.gemm(dg, ds, nullptr);
  std::printf("dense x%lld %s: %.1f us\n", static_cast<long long>(groups), fp8jit::spec_name(ds).c_str(),
              median_us(
                  [&] {
                    for (std::int64_t i = 0; i < groups; ++i) rt.gemm(dg, ds, nullptr);
                  },
                  flush));
  CHECK(cuCtxSynchronize());
  return 0;
}
