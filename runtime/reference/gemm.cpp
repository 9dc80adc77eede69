// The float64 GEMM reference: compiled once per process with NVRTC, run on the GPU.
#include <fmt/format.h>

#include <cmath>
#include <mutex>

#include "fp8jit/fp8.hpp"
#include "fp8jit/gemm/params.cuh"
#include "fp8jit/reference.hpp"
#include "fp8jit/reference/gemm_ref_params.cuh"
#include "runtime/jit/driver.hpp"
#include "runtime/ops/gemm.hpp"
#include "runtime/jit/module.hpp"
#include "runtime/jit/nvrtc.hpp"

namespace fp8jit::reference {
namespace {

constexpr const char* kSource =
    "#include \"fp8jit/reference/gemm_ref.cuh\"\n"
    "using namespace fp8jit::dev;\n"
    "extern \"C\" __global__ void fp8jit_gemm_reference(const __grid_constant__ GemmRefParams p) { gemm_reference(p); }\n";

CUfunction reference_kernel() {
  // One module per context would be needed for several contexts; tests and the CLI use one.
  static std::mutex mutex;
  static std::unique_ptr<Module> module;
  static CUfunction fn = nullptr;
  std::lock_guard<std::mutex> lock(mutex);
  if (!fn) {
    driver::ensure_context();
    module = std::make_unique<Module>(Module::load(nvrtc_compile("gemm_reference", kSource, CompileTarget::cubin).binary));
    fn = module->function("fp8jit_gemm_reference");
  }
  return fn;
}

void strides(ScaleLayout layout, std::int64_t rows, std::int64_t k_blocks, long long& rs, long long& cs) {
  if (layout == ScaleLayout::row_major) { rs = k_blocks; cs = 1; }
  else { rs = 1; cs = (rows + 3) / 4 * 4; }
}

}  // namespace

void gemm_on_device(const GemmArgs& args, double* d_ref, CUstream stream) {
  const GemmArgs a = ops::normalize(args);
  dev::GemmRefParams p{};
  p.a = static_cast<const unsigned char*>(a.a);
  p.lda = a.lda;
  p.b = static_cast<const unsigned char*>(a.b);
  p.ldb = a.ldb;
  p.scale_a = a.scale_a;
  p.scale_b = a.scale_b;
  const std::int64_t kb = (a.k + 127) / 128;
  if (a.scale_mode == ScaleMode::block || a.scale_mode == ScaleMode::group) strides(a.scale_a_layout, a.m, kb, p.sa_rs, p.sa_cs);
  if (a.scale_mode == ScaleMode::block) strides(a.scale_b_layout, (a.n + 127) / 128, kb, p.sb_rs, p.sb_cs);
  if (a.scale_mode == ScaleMode::group) strides(a.scale_b_layout, a.n, kb, p.sb_rs, p.sb_cs);
  p.bias = a.bias;
  p.out = d_ref;
  p.M = static_cast<int>(a.m);
  p.N = static_cast<int>(a.n);
  p.K = static_cast<int>(a.k);
  p.a_format = static_cast<int>(a.a_format);
  p.b_format = static_cast<int>(a.b_format);
  p.mode = static_cast<int>(a.scale_mode);
  p.bias_elem = static_cast<int>(a.d_dtype);
  LaunchConfig lc;
  lc.grid[0] = static_cast<unsigned>((a.n + 127) / 128);
  lc.grid[1] = static_cast<unsigned>(a.m);
  lc.block[0] = 128;
  lc.stream = stream;
  void* kargs[] = {&p};
  launch(reference_kernel(), lc, kargs);
  driver::check(driver::api().cuStreamSynchronize(stream), "reference GEMM");
}

double relative_error(const void* d, std::int64_t ldd, DType dtype, const double* ref, std::int64_t m, std::int64_t n) {
  double err = 0, norm = 0;
  for (std::int64_t i = 0; i < m; ++i)
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = fp8::load_as_float(d, static_cast<std::size_t>(i * ldd + j), dtype);
      if (!std::isfinite(x)) return INFINITY;
      const double r = ref[i * n + j];
      err += (x - r) * (x - r);
      norm += r * r;
    }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

}  // namespace fp8jit::reference
