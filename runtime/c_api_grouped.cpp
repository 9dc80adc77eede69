// The C ABI's grouped GEMMs (fp8jit_grouped_gemm_args) over fp8jit::Runtime::grouped_gemm.
#include <cstring>
#include <string>

#include "fp8jit/fp8jit.h"
#include "runtime/c_api_support.hpp"

namespace {

using namespace fp8jit::c_abi;

static_assert(FP8JIT_LAYOUT_DENSE == int(fp8jit::GemmLayout::dense) &&
              FP8JIT_LAYOUT_CONTIGUOUS == int(fp8jit::GemmLayout::contiguous) &&
              FP8JIT_LAYOUT_MASKED == int(fp8jit::GemmLayout::masked) &&
              FP8JIT_LAYOUT_INDEXED == int(fp8jit::GemmLayout::indexed));
static_assert(FP8JIT_GEMM_GROUP_OFFSETS_CLAMPED == fp8jit::kGemmGroupOffsetsClamped &&
              FP8JIT_GEMM_MASKED_ROWS_CLAMPED == fp8jit::kGemmMaskedRowsClamped &&
              FP8JIT_GEMM_ROW_INDICES_INVALID == fp8jit::kGemmRowIndicesInvalid);

fp8jit::GroupedGemmArgs to_cpp(const fp8jit_grouped_gemm_args& c) {
  fp8jit::GroupedGemmArgs a;
  gemm_fields_to_cpp(c, a);
  a.layout = gemm_layout(c.layout, "layout");
  a.groups = c.groups;
  a.group_rows = c.group_rows;
  a.expected_m = c.expected_m;
  a.status = c.status;
  return a;
}

// The init function copies the C++ defaults, so the two can never disagree.
fp8jit_grouped_gemm_args to_c(const fp8jit::GroupedGemmArgs& a) {
  fp8jit_grouped_gemm_args c;
  gemm_fields_to_c(a, c);
  c.layout = fp8jit_gemm_layout(a.layout);
  c.groups = a.groups;
  c.group_rows = a.group_rows;
  c.expected_m = a.expected_m;
  c.status = a.status;
  return c;
}

constexpr const char* kRuntimeWhat = "a runtime from fp8jit_runtime_create";

}  // namespace

extern "C" {

void fp8jit_grouped_gemm_args_init(fp8jit_grouped_gemm_args* args) {
  if (args) *args = to_c(fp8jit::GroupedGemmArgs{});
}

fp8jit_status fp8jit_grouped_gemm(fp8jit_runtime* runtime, const fp8jit_grouped_gemm_args* args,
                                  fp8jit_stream_t stream) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_grouped_gemm", kRuntimeWhat);
    require(args, "args", "fp8jit_grouped_gemm", "an fp8jit_grouped_gemm_args pointer");
    runtime->runtime.grouped_gemm(to_cpp(*args), stream);
  });
}

fp8jit_status fp8jit_grouped_gemm_select(fp8jit_runtime* runtime,
                                         const fp8jit_grouped_gemm_args* args, char* buf,
                                         size_t capacity) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_grouped_gemm_select", kRuntimeWhat);
    require(args, "args", "fp8jit_grouped_gemm_select", "an fp8jit_grouped_gemm_args pointer");
    require(buf, "buf", "fp8jit_grouped_gemm_select", "a buffer for the kernel name");
    const std::string name = fp8jit::spec_name(runtime->runtime.select(to_cpp(*args)));
    if (name.size() + 1 > capacity)
      fp8jit::throw_invalid(
          "capacity", std::to_string(capacity),
          "too small for the kernel name: needs " + std::to_string(name.size() + 1) + " bytes");
    std::memcpy(buf, name.c_str(), name.size() + 1);
  });
}

fp8jit_status fp8jit_grouped_gemm_tune(fp8jit_runtime* runtime,
                                       const fp8jit_grouped_gemm_args* args, size_t top_k) {
  return fp8jit_grouped_gemm_tune_on_tables(runtime, args, top_k, nullptr, 0);
}

fp8jit_status fp8jit_grouped_gemm_tune_on_tables(fp8jit_runtime* runtime,
                                                 const fp8jit_grouped_gemm_args* args, size_t top_k,
                                                 const int* const* tables, size_t table_count) {
  return guarded([&] {
    require(runtime, "runtime", "fp8jit_grouped_gemm_tune", kRuntimeWhat);
    require(args, "args", "fp8jit_grouped_gemm_tune", "an fp8jit_grouped_gemm_args pointer");
    // Bounded before the array is read: a huge count must not walk off its end.
    if (table_count > fp8jit::kMaxMoreGroupTables)
      fp8jit::throw_invalid(
          "table_count", std::to_string(table_count),
          fmt::format("at most {} more group tables", fp8jit::kMaxMoreGroupTables));
    if (table_count > 0 && !tables)
      fp8jit::throw_invalid("tables", "NULL",
                            fmt::format("an array of {} device group tables", table_count));
    fp8jit::TuneOptions options;
    options.top_k = top_k;
    options.more_group_rows.assign(tables, tables + table_count);
    if (!runtime->runtime.tune(to_cpp(*args), options).best)
      throw fp8jit::Error(fp8jit::ErrorKind::unsupported,
                          "no candidate passed verification for this grouped shape");
  });
}

}  // extern "C"
