// The float64 GEMM reference: compiled once per process with NVRTC, run on the GPU.
#include <fmt/format.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <mutex>
#include <thread>
#include <vector>

#include "common/parallel.hpp"

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

namespace {

struct ErrorSums {
  double err = 0, norm = 0;
  bool finite = true;
};

// Rows [r0, r1) of D against the reference, each element decoded by `load(row, j)`.
template <class Load>
ErrorSums sum_rows(const unsigned char* d, std::size_t row_bytes, const double* ref, std::int64_t n,
                   std::int64_t r0, std::int64_t r1, Load load) {
  ErrorSums s;
  for (std::int64_t i = r0; i < r1; ++i) {
    const unsigned char* row = d + static_cast<std::size_t>(i) * row_bytes;
    const double* r = ref + i * n;
    for (std::int64_t j = 0; j < n; ++j) {
      const double x = load(row, j);
      if (!std::isfinite(x)) return {0, 0, false};
      s.err += (x - r[j]) * (x - r[j]);
      s.norm += r[j] * r[j];
    }
  }
  return s;
}

ErrorSums sum_rows(const void* d, std::size_t row_bytes, DType dtype, const double* ref, std::int64_t n,
                   std::int64_t r0, std::int64_t r1) {
  const auto* p = static_cast<const unsigned char*>(d);
  switch (dtype) {
    case DType::bf16:  // the upper half of an fp32: exact, inf and NaN included
      return sum_rows(p, row_bytes, ref, n, r0, r1, [](const unsigned char* row, std::int64_t j) {
        std::uint16_t b;
        std::memcpy(&b, row + 2 * j, 2);
        return static_cast<double>(std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16));
      });
    case DType::fp32:
      return sum_rows(p, row_bytes, ref, n, r0, r1, [](const unsigned char* row, std::int64_t j) {
        float v;
        std::memcpy(&v, row + 4 * j, 4);
        return static_cast<double>(v);
      });
    default:
      return sum_rows(p, row_bytes, ref, n, r0, r1, [dtype](const unsigned char* row, std::int64_t j) {
        return static_cast<double>(fp8::load_as_float(row, static_cast<std::size_t>(j), dtype));
      });
  }
}

}  // namespace

double relative_error(const void* d, std::int64_t ldd, DType dtype, const double* ref, std::int64_t m, std::int64_t n) {
  // The tuner checks every candidate's whole D, up to 4096 x 32768 outputs, where one thread
  // took 1.6 s per check (2 cores of a build machine, 2026-11-26). Fixed chunks of rows, summed
  // in chunk order, give the same result on any number of threads; small outputs stay on the
  // calling thread.
  // A bad dtype throws here, not inside a worker thread.
  const std::size_t row_bytes = static_cast<std::size_t>(ldd) * dtype_size(dtype);
  constexpr std::int64_t kRowsPerChunk = 64;
  constexpr std::int64_t kSerialElements = std::int64_t{1} << 20;
  const std::int64_t chunks = (m + kRowsPerChunk - 1) / kRowsPerChunk;
  std::vector<ErrorSums> parts(static_cast<std::size_t>(std::max<std::int64_t>(chunks, 0)));
  const int threads = m * n < kSerialElements ? 1 : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  parallel_for(parts.size(), threads, [&](std::size_t c) {
    const std::int64_t r0 = static_cast<std::int64_t>(c) * kRowsPerChunk;
    parts[c] = sum_rows(d, row_bytes, dtype, ref, n, r0, std::min(m, r0 + kRowsPerChunk));
  });
  double err = 0, norm = 0;
  for (const ErrorSums& p : parts) {
    if (!p.finite) return INFINITY;
    err += p.err, norm += p.norm;
  }
  return norm > 0 ? std::sqrt(err / norm) : std::sqrt(err);
}

}  // namespace fp8jit::reference
