// The C ABI (include/fp8jit/fp8jit.h) over fp8jit::Runtime. Every entry point converts the C
// structs to the C++ ones (checking enum values a C caller may have made up), calls the C++ API
// and turns any exception into a status plus a thread-local message: nothing throws across it.
#include <cuda.h>
#include <fmt/format.h>

#include <cstddef>
#include <cstring>
#include <exception>
#include <new>
#include <string>
#include <type_traits>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/fp8jit.h"
#include "fp8jit/log.hpp"
#include "fp8jit/runtime.hpp"
#include "fp8jit/types.hpp"
#include "fp8jit/version.hpp"
#include "runtime/c_api_support.hpp"

namespace fp8jit::c_abi {

LastError& last() noexcept {
  thread_local LastError e;
  return e;
}

}  // namespace fp8jit::c_abi

namespace {

using namespace fp8jit::c_abi;

fp8jit::QuantizeArgs to_cpp(const fp8jit_quantize_args& c) {
  fp8jit::QuantizeArgs a;
  a.x = c.x;
  a.input = dtype(c.input, "input");
  a.m = c.m;
  a.k = c.k;
  a.ldx = c.ldx;
  a.q = c.q;
  a.format = format(c.format, "format");
  a.ldq = c.ldq;
  a.scales = c.scales;
  a.granularity = granularity(c.granularity, "granularity");
  a.scale_layout = layout(c.scale_layout, "scale_layout");
  a.pow2_scale = c.pow2_scale != 0;
  a.static_scale = c.static_scale;
  a.qt = c.qt;
  a.ldqt = c.ldqt;
  a.scales_t = c.scales_t;
  a.amax = c.amax;
  a.column_sums = c.column_sums;
  return a;
}

fp8jit::DequantizeArgs to_cpp(const fp8jit_dequantize_args& c) {
  fp8jit::DequantizeArgs a;
  a.q = c.q;
  a.format = format(c.format, "format");
  a.m = c.m;
  a.k = c.k;
  a.ldq = c.ldq;
  a.scales = c.scales;
  a.granularity = granularity(c.granularity, "granularity");
  a.scale_layout = layout(c.scale_layout, "scale_layout");
  a.y = c.y;
  a.output = dtype(c.output, "output");
  a.ldy = c.ldy;
  return a;
}

fp8jit::GemmArgs to_cpp(const fp8jit_gemm_args& c) {
  fp8jit::GemmArgs a;
  gemm_fields_to_cpp(c, a);
  a.bias = c.bias;
  return a;
}

// ---- C++ -> C: the init functions copy the C++ defaults, so the two can never disagree ----------

fp8jit_quantize_args to_c(const fp8jit::QuantizeArgs& a) {
  fp8jit_quantize_args c;
  c.x = a.x;
  c.input = fp8jit_dtype(a.input);
  c.m = a.m;
  c.k = a.k;
  c.ldx = a.ldx;
  c.q = a.q;
  c.format = fp8jit_fp8_format(a.format);
  c.ldq = a.ldq;
  c.scales = a.scales;
  c.granularity = fp8jit_granularity(a.granularity);
  c.scale_layout = fp8jit_scale_layout(a.scale_layout);
  c.pow2_scale = a.pow2_scale ? 1 : 0;
  c.static_scale = a.static_scale;
  c.qt = a.qt;
  c.ldqt = a.ldqt;
  c.scales_t = a.scales_t;
  c.amax = a.amax;
  c.column_sums = a.column_sums;
  return c;
}

fp8jit_dequantize_args to_c(const fp8jit::DequantizeArgs& a) {
  fp8jit_dequantize_args c;
  c.q = a.q;
  c.format = fp8jit_fp8_format(a.format);
  c.m = a.m;
  c.k = a.k;
  c.ldq = a.ldq;
  c.scales = a.scales;
  c.granularity = fp8jit_granularity(a.granularity);
  c.scale_layout = fp8jit_scale_layout(a.scale_layout);
  c.y = a.y;
  c.output = fp8jit_dtype(a.output);
  c.ldy = a.ldy;
  return c;
}

fp8jit_gemm_args to_c(const fp8jit::GemmArgs& a) {
  fp8jit_gemm_args c;
  gemm_fields_to_c(a, c);
  c.bias = a.bias;
  return c;
}

constexpr const char* kRuntimeWhat = "a runtime from fp8jit_runtime_create";

fp8jit_status create(const char* function, fp8jit_runtime** out, bool from_settings,
                     const char* cache_dir) noexcept {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    require(out, "out", function, "a place for the new runtime (fp8jit_runtime**)");
    // Without settings: the options' defaults (no database: heuristics), whatever the environment.
    fp8jit::RuntimeOptions options;
    if (from_settings) options = fp8jit::RuntimeOptions::from_settings();
    else options.cache_dir = cache_dir ? cache_dir : "";
    *out = new fp8jit_runtime(options);
  });
}

}  // namespace

extern "C" {

void fp8jit_quantize_args_init(fp8jit_quantize_args* args) {
  if (args) *args = to_c(fp8jit::QuantizeArgs{});
}

void fp8jit_dequantize_args_init(fp8jit_dequantize_args* args) {
  if (args) *args = to_c(fp8jit::DequantizeArgs{});
}

void fp8jit_gemm_args_init(fp8jit_gemm_args* args) {
  if (args) *args = to_c(fp8jit::GemmArgs{});
}

fp8jit_status fp8jit_runtime_create(fp8jit_runtime** out) {
  return create("fp8jit_runtime_create", out, true, nullptr);
}

fp8jit_status fp8jit_runtime_create_with_cache_dir(const char* cache_dir, fp8jit_runtime** out) {
  return create("fp8jit_runtime_create_with_cache_dir", out, false, cache_dir);
}

void fp8jit_runtime_options_init(fp8jit_runtime_options* options) {
  if (!options) return;
  const fp8jit::RuntimeOptions defaults;
  *options = fp8jit_runtime_options{
      sizeof(fp8jit_runtime_options), nullptr, nullptr, defaults.jit ? 1 : 0, defaults.max_sms,
      defaults.pdl ? 1 : 0,           nullptr, nullptr};
}

fp8jit_status fp8jit_runtime_create_with_options(const fp8jit_runtime_options* options, fp8jit_runtime** out) {
  if (out != nullptr) *out = nullptr;
  return guarded([&] {
    const char* fn = "fp8jit_runtime_create_with_options";
    require(out, "out", fn, "a place for the new runtime (fp8jit_runtime**)");
    require(options, "options", fn, "an fp8jit_runtime_options pointer (fp8jit_runtime_options_init)");
    // This header's layout, or an earlier one (the fields before elementwise_arch, or before
    // shipped_tuning_dir): any other smaller size is an uninitialised struct, a larger one a
    // caller built against a newer fp8jit whose fields this library would ignore.
    constexpr std::size_t kBeforeArch = offsetof(fp8jit_runtime_options, elementwise_arch);
    constexpr std::size_t kBeforeShipped = offsetof(fp8jit_runtime_options, shipped_tuning_dir);
    const std::size_t size = options->struct_size;
    if (size != sizeof(fp8jit_runtime_options) && size != kBeforeArch && size != kBeforeShipped)
      fp8jit::throw_invalid(
          "options->struct_size", std::to_string(size),
          fmt::format("{} (fill the struct with fp8jit_runtime_options_init, and build against "
                      "this library's fp8jit.h; {} and {}: earlier layouts)",
                      sizeof(fp8jit_runtime_options), kBeforeArch, kBeforeShipped));
    if (options->jit != 0 && options->jit != 1)
      fp8jit::throw_invalid("options->jit", std::to_string(options->jit), "0 or 1");
    if (options->max_sms < 0)
      fp8jit::throw_invalid("options->max_sms", std::to_string(options->max_sms), "0 (all SMs) or more");
    if (options->pdl != 0 && options->pdl != 1)
      fp8jit::throw_invalid("options->pdl", std::to_string(options->pdl), "0 or 1");
    fp8jit::RuntimeOptions o;
    o.cache_dir = options->cache_dir ? options->cache_dir : "";
    o.db_path = options->db_path ? options->db_path : "";
    o.jit = options->jit == 1;
    o.max_sms = options->max_sms;
    o.pdl = options->pdl == 1;
    if (size > kBeforeArch && options->elementwise_arch)
      o.elementwise_arch = options->elementwise_arch;  // checked by the Runtime (invalid_argument)
    // A folder that is missing or holds bad documents is the lookup's warning, not an error here:
    // the heuristic still serves every shape.
    if (size > kBeforeShipped && options->shipped_tuning_dir)
      o.shipped_tuning_dir = options->shipped_tuning_dir;
    *out = new fp8jit_runtime(o);
  });
}

void fp8jit_runtime_destroy(fp8jit_runtime* runtime) {
  // ~Runtime frees device memory through try_api() and does not throw; guard anyway.
  (void)guarded([&] { delete runtime; });
}

const char* fp8jit_runtime_cache_dir(const fp8jit_runtime* runtime) {
  return runtime ? runtime->runtime.cache_dir().c_str() : nullptr;
}

fp8jit_status fp8jit_runtime_set_pdl(fp8jit_runtime* runtime, int enabled) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_runtime_set_pdl", kRuntimeWhat);
    if (enabled != 0 && enabled != 1) fp8jit::throw_invalid("enabled", std::to_string(enabled), "0 or 1");
    runtime->runtime.set_pdl(enabled == 1);
  });
}

fp8jit_status fp8jit_quantize(fp8jit_runtime* runtime, const fp8jit_quantize_args* args,
                              fp8jit_stream_t stream) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_quantize", kRuntimeWhat);
    require(args, "args", "fp8jit_quantize", "an fp8jit_quantize_args pointer");
    runtime->runtime.quantize(to_cpp(*args), stream);
  });
}

fp8jit_status fp8jit_dequantize(fp8jit_runtime* runtime, const fp8jit_dequantize_args* args,
                                fp8jit_stream_t stream) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_dequantize", kRuntimeWhat);
    require(args, "args", "fp8jit_dequantize", "an fp8jit_dequantize_args pointer");
    runtime->runtime.dequantize(to_cpp(*args), stream);
  });
}

fp8jit_status fp8jit_gemm(fp8jit_runtime* runtime, const fp8jit_gemm_args* args,
                          fp8jit_stream_t stream) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_gemm", kRuntimeWhat);
    require(args, "args", "fp8jit_gemm", "an fp8jit_gemm_args pointer");
    runtime->runtime.gemm(to_cpp(*args), stream);
  });
}

fp8jit_status fp8jit_gemm_select(fp8jit_runtime* runtime, const fp8jit_gemm_args* args, char* buf, size_t capacity) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_gemm_select", kRuntimeWhat);
    require(args, "args", "fp8jit_gemm_select", "an fp8jit_gemm_args pointer");
    require(buf, "buf", "fp8jit_gemm_select", "a buffer for the kernel name");
    const std::string name = fp8jit::spec_name(runtime->runtime.select(to_cpp(*args)));
    if (name.size() + 1 > capacity)
      fp8jit::throw_invalid("capacity", std::to_string(capacity),
                            "too small for the kernel name: needs " + std::to_string(name.size() + 1) + " bytes");
    std::memcpy(buf, name.c_str(), name.size() + 1);
  });
}

fp8jit_status fp8jit_gemm_tune(fp8jit_runtime* runtime, const fp8jit_gemm_args* args, size_t top_k) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_gemm_tune", kRuntimeWhat);
    require(args, "args", "fp8jit_gemm_tune", "an fp8jit_gemm_args pointer");
    fp8jit::TuneOptions options;
    options.top_k = top_k;
    const fp8jit::TuneResult r = runtime->runtime.tune(to_cpp(*args), options);
    if (!r.best) throw fp8jit::Error(fp8jit::ErrorKind::unsupported, "no candidate passed verification for this shape");
  });
}

fp8jit_status fp8jit_gemm_precompile(fp8jit_runtime* runtime, const fp8jit_gemm_args* problem, const int64_t* mnk,
                                     size_t count) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_gemm_precompile", kRuntimeWhat);
    require(problem, "problem", "fp8jit_gemm_precompile", "an fp8jit_gemm_args pointer");
    require(mnk, "mnk", "fp8jit_gemm_precompile", "count (m, n, k) triples");
    const fp8jit::GemmArgs a = to_cpp(*problem);
    const fp8jit::GemmProblem p{a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.bias != nullptr, a.fast_accum};
    std::vector<fp8jit::GemmShape> shapes;
    for (size_t i = 0; i < count; ++i) shapes.push_back({mnk[3 * i], mnk[3 * i + 1], mnk[3 * i + 2]});
    runtime->runtime.precompile(p, shapes);
  });
}

fp8jit_status fp8jit_precompile_model(fp8jit_runtime* runtime, const char* config_json,
                                      const fp8jit_gemm_args* problem, const int64_t* ms, size_t count, int tp,
                                      size_t* kernels) {
  return guarded([&] {
    const char* fn = "fp8jit_precompile_model";
    require(runtime, "runtime", fn, kRuntimeWhat);
    require(config_json, "config_json", fn, "the text of a config.json");
    require(problem, "problem", fn, "an fp8jit_gemm_args pointer");
    require(ms, "ms", fn, "count batch sizes");
    const fp8jit::GemmArgs a = to_cpp(*problem);
    const fp8jit::GemmProblem p{a.a_format, a.b_format, a.d_dtype, a.scale_mode, a.bias != nullptr, a.fast_accum};
    std::vector<fp8jit::KernelSpec> specs;
    for (const auto& k : runtime->runtime.model_kernels(config_json, std::vector<int64_t>(ms, ms + count), tp, p))
      specs.push_back(k.spec);
    const std::size_t n = runtime->runtime.precompile(specs);
    if (kernels) *kernels = n;
  });
}

void fp8jit_set_log_callback(fp8jit_log_callback callback, void* user) { fp8jit::set_log_callback(callback, user); }

fp8jit_status fp8jit_set_log_level(int level) {
  return guarded([&] { fp8jit::set_log_level(level); });
}

fp8jit_status fp8jit_runtime_cache_stats(const fp8jit_runtime* runtime, fp8jit_cache_stats* out) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_runtime_cache_stats", kRuntimeWhat);
    require(out, "out", "fp8jit_runtime_cache_stats", "an fp8jit_cache_stats pointer");
    const fp8jit::CacheStats s = runtime->runtime.cache_stats();
    out->memory_hits = s.memory_hits;
    out->memory_misses = s.memory_misses;
    out->disk_hits = s.disk_hits;
    out->disk_misses = s.disk_misses;
    out->disk_corrupt = s.disk_corrupt;
    out->disk_writes = s.disk_writes;
    out->compiles = s.compiles;
    out->compile_seconds = s.compile_seconds;
  });
}

fp8jit_status fp8jit_runtime_reset_cache_stats(fp8jit_runtime* runtime) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_runtime_reset_cache_stats", kRuntimeWhat);
    runtime->runtime.reset_cache_stats();
  });
}

fp8jit_status fp8jit_scale_count(fp8jit_granularity g, fp8jit_scale_layout l, int64_t m, int64_t k,
                                 int64_t* out) {
  return guarded([&] {
    require(out, "out", "fp8jit_scale_count", "an int64_t pointer for the count");
    *out = fp8jit::scale_count(granularity(g, "granularity"), layout(l, "layout"), m, k);
  });
}

const char* fp8jit_last_error(void) {
  const LastError& e = last();
  return e.fallback ? e.fallback : e.message.c_str();
}

fp8jit_status fp8jit_get_last_status(void) { return last().status; }

void fp8jit_clear_last_error(void) {
  LastError& e = last();
  e.status = FP8JIT_SUCCESS;
  e.message.clear();
  e.fallback = nullptr;
}

const char* fp8jit_status_string(fp8jit_status status) {
  switch (status) {
    case FP8JIT_SUCCESS: return "success";
    case FP8JIT_ERROR_INVALID_ARGUMENT: return "invalid argument";
    case FP8JIT_ERROR_UNSUPPORTED: return "unsupported";
    case FP8JIT_ERROR_COMPILE: return "kernel compilation failed";
    case FP8JIT_ERROR_DRIVER: return "CUDA driver error";
    case FP8JIT_ERROR_IO: return "I/O error";
    case FP8JIT_ERROR_INTERNAL: return "internal error";
  }
  return "unknown fp8jit status";
}

const char* fp8jit_version(void) { return FP8JIT_VERSION_STRING; }

}  // extern "C"
