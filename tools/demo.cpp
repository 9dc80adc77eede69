#include "tools/demo.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

#include "fp8jit/runtime.hpp"
#include "runtime/jit/driver.hpp"
#include "common/parallel.hpp"
#include "tools/progress.hpp"
#include "tools/shapes.hpp"

namespace fp8jit::cli {
namespace {

// The H100 SXM's SM count and opt-in shared memory per block: the heuristic's inputs when no
// GPU can be asked.
constexpr int kH100Sms = 132, kH100Smem = 232448;

struct Built {
  KernelSpec spec;
  std::string why;  // what the kernel is for
  std::size_t cubin_bytes = 0;
};

std::vector<Built> demo_kernels() {
  std::vector<Built> out;
  QuantizeProblem q;  // bf16 -> E4M3, 1x128 groups: the GPU demo's first half
  q.input = DType::bf16;
  q.format = Fp8Format::e4m3;
  q.granularity = Granularity::group128;
  out.push_back({default_quantize_spec(q), "quantize bf16 -> e4m3, 1x128 scales (demo, step 1)"});
  DequantizeProblem d;
  d.format = Fp8Format::e4m3;
  d.output = DType::bf16;
  d.granularity = Granularity::group128;
  out.push_back({default_dequantize_spec(d), "dequantize e4m3 -> bf16 (demo, step 2)"});
  GemmProblem g;  // block scaling, bf16 out: DeepSeek-V3's recipe
  for (const GemmShape& s : read_gemm_shapes(find_suite("deepseek-v3").string())) {
    const KernelSpec spec = default_gemm_spec(g, s.m, s.n, s.k, kH100Sms, kH100Smem);
    auto same = [&](const Built& b) { return b.spec == spec; };
    if (auto it = std::find_if(out.begin(), out.end(), same); it != out.end()) {
      it->why += fmt::format(", {}x{}x{}", s.m, s.n, s.k);
      continue;
    }
    out.push_back({spec, fmt::format("block-scaled GEMM for {}x{}x{}", s.m, s.n, s.k)});
  }
  return out;
}

}  // namespace

int demo_without_gpu(int jobs) {
  std::vector<Built> kernels = demo_kernels();
  Runtime rt;
  fmt::print("No GPU here ({}).\n", driver::unavailable_reason());
  fmt::print("Without one, fp8jit shows what it generates: the {} kernels the GPU demo and DeepSeek-V3's block-scaled\n"
             "GEMMs would use on an H100, rendered from templates, compiled by NVRTC for sm_90a and kept in the\n"
             "disk cache ({}).\n\n",
             kernels.size(), rt.cache_dir().empty() ? "disabled: FP8JIT_DISK_CACHE=0" : rt.cache_dir());
  std::fflush(stdout);  // the intro before the progress lines on stderr
  const auto t0 = std::chrono::steady_clock::now();
  {
    Progress progress("compiling", kernels.size());
    parallel_for(kernels.size(), jobs, [&](std::size_t i) {
      kernels[i].cubin_bytes = rt.compile(kernels[i].spec).size();
      progress.advance(1, spec_name(kernels[i].spec));
    });
  }
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const CacheStats st = rt.cache_stats();
  const std::string source = render_source(kernels[0].spec);
  fmt::print("\nThe generated CUDA source of the first kernel ({} lines; `fp8jit emit` prints any):\n\n{}\n",
             std::count(source.begin(), source.end(), '\n'), source);
  fmt::print("{:<58} {:>9}  {}\n", "kernel", "cubin", "used for");
  for (const Built& b : kernels)
    fmt::print("{:<58} {:>6} KiB  {}\n", spec_name(b.spec), (b.cubin_bytes + 1023) / 1024, b.why);
  fmt::print("\n{} kernels ready in {:.1f} s: {} compiled by NVRTC, {} from the disk cache. On a Hopper GPU, `fp8jit "
             "demo`\nruns the quantize -> dequantize round trip, checks it bit for bit against the host reference and "
             "reports GB/s.\n",
             kernels.size(), wall, st.compiles, st.disk_hits);
  return 0;
}

}  // namespace fp8jit::cli
