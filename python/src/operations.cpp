// The launching operations for Python: device pointers and streams as integers (the package's
// tensor layer checks the tensors they come from). The runtime checks every argument before it
// launches; a bad one is a ValueError and nothing runs.
#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <string>

#include "fp8jit/fp8jit.hpp"
#include "python/src/enums.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace fp8jit::python {
namespace {

template <class T>
T* ptr(std::uintptr_t p) {
  return reinterpret_cast<T*>(p);
}
CUstream stream_of(std::uintptr_t s) {
  return reinterpret_cast<CUstream>(s);
}

void quantize(std::uintptr_t x, const std::string& input, std::int64_t m, std::int64_t k,
              std::int64_t ldx, std::uintptr_t q, const std::string& format, std::int64_t ldq,
              std::uintptr_t scales, const std::string& granularity,
              const std::string& scale_layout, bool pow2_scale, std::uintptr_t static_scale,
              std::uintptr_t qt, std::int64_t ldqt, std::uintptr_t scales_t, std::uintptr_t amax,
              std::uintptr_t stream, const std::string& arithmetic, std::uintptr_t column_sums) {
  if (arithmetic != "ieee" && arithmetic != "deepseek")
    throw_invalid("arithmetic", "'" + arithmetic + "'", "ieee or deepseek");
  QuantizeArgs a;
  a.x = ptr<const void>(x);
  a.input = parse_enum<DType>("input", input);
  a.m = m;
  a.k = k;
  a.ldx = ldx;
  a.q = ptr<void>(q);
  a.format = parse_enum<Fp8Format>("format", format);
  a.ldq = ldq;
  a.scales = ptr<float>(scales);
  a.granularity = parse_enum<Granularity>("granularity", granularity);
  a.scale_layout = parse_enum<ScaleLayout>("scale_layout", scale_layout);
  a.pow2_scale = pow2_scale;
  a.static_scale = ptr<const float>(static_scale);
  a.qt = ptr<void>(qt);
  a.ldqt = ldqt;
  a.scales_t = ptr<float>(scales_t);
  a.amax = ptr<float>(amax);
  a.deepseek_arithmetic = arithmetic == "deepseek";
  a.column_sums = ptr<float>(column_sums);
  nb::gil_scoped_release unlocked;
  default_runtime().quantize(a, stream_of(stream));
}

void dequantize(std::uintptr_t q, const std::string& format, std::int64_t m, std::int64_t k,
                std::int64_t ldq, std::uintptr_t scales, const std::string& granularity,
                const std::string& scale_layout, std::uintptr_t y, const std::string& output,
                std::int64_t ldy, std::uintptr_t stream) {
  DequantizeArgs a;
  a.q = ptr<const void>(q);
  a.format = parse_enum<Fp8Format>("format", format);
  a.m = m;
  a.k = k;
  a.ldq = ldq;
  a.scales = ptr<const float>(scales);
  a.granularity = parse_enum<Granularity>("granularity", granularity);
  a.scale_layout = parse_enum<ScaleLayout>("scale_layout", scale_layout);
  a.y = ptr<void>(y);
  a.output = parse_enum<DType>("output", output);
  a.ldy = ldy;
  nb::gil_scoped_release unlocked;
  default_runtime().dequantize(a, stream_of(stream));
}

// The operands both GEMM entry points share, in GemmArgs and GroupedGemmArgs alike.
template <class Args>
void fill_operands(Args& g, std::uintptr_t a, const std::string& a_format, std::int64_t lda,
                   std::uintptr_t b, const std::string& b_format, std::int64_t ldb,
                   std::uintptr_t d, const std::string& d_dtype, std::int64_t ldd,
                   const std::string& scale_mode, std::uintptr_t scale_a, std::int64_t scale_a_size,
                   const std::string& scale_a_layout, std::uintptr_t scale_b,
                   std::int64_t scale_b_size, const std::string& scale_b_layout, bool fast_accum) {
  g.a = ptr<const void>(a);
  g.a_format = parse_enum<Fp8Format>("a_format", a_format);
  g.lda = lda;
  g.b = ptr<const void>(b);
  g.b_format = parse_enum<Fp8Format>("b_format", b_format);
  g.ldb = ldb;
  g.d = ptr<void>(d);
  g.d_dtype = parse_enum<DType>("d_dtype", d_dtype);
  g.ldd = ldd;
  g.scale_mode = parse_enum<ScaleMode>("scale_mode", scale_mode);
  g.scale_a = ptr<const float>(scale_a);
  g.scale_a_size = scale_a_size;
  g.scale_a_layout = parse_enum<ScaleLayout>("scale_a_layout", scale_a_layout);
  g.scale_b = ptr<const float>(scale_b);
  g.scale_b_size = scale_b_size;
  g.scale_b_layout = parse_enum<ScaleLayout>("scale_b_layout", scale_b_layout);
  g.fast_accum = fast_accum;
}

GemmArgs gemm_args(std::uintptr_t a, const std::string& a_format, std::int64_t lda,
                   std::uintptr_t b, const std::string& b_format, std::int64_t ldb,
                   std::uintptr_t d, const std::string& d_dtype, std::int64_t ldd, std::int64_t m,
                   std::int64_t n, std::int64_t k, const std::string& scale_mode,
                   std::uintptr_t scale_a, std::int64_t scale_a_size,
                   const std::string& scale_a_layout, std::uintptr_t scale_b,
                   std::int64_t scale_b_size, const std::string& scale_b_layout,
                   std::uintptr_t bias, bool fast_accum, int max_sms) {
  GemmArgs g;
  fill_operands(g, a, a_format, lda, b, b_format, ldb, d, d_dtype, ldd, scale_mode, scale_a,
                scale_a_size, scale_a_layout, scale_b, scale_b_size, scale_b_layout, fast_accum);
  g.m = m;
  g.n = n;
  g.k = k;
  g.bias = ptr<const void>(bias);
  g.max_sms = max_sms;
  return g;
}

GroupedGemmArgs grouped_args(
    const std::string& layout, std::int64_t groups, std::uintptr_t group_rows, std::uintptr_t a,
    const std::string& a_format, std::int64_t lda, std::uintptr_t b, const std::string& b_format,
    std::int64_t ldb, std::uintptr_t d, const std::string& d_dtype, std::int64_t ldd,
    std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t expected_m,
    const std::string& scale_mode, std::uintptr_t scale_a, std::int64_t scale_a_size,
    const std::string& scale_a_layout, std::uintptr_t scale_b, std::int64_t scale_b_size,
    const std::string& scale_b_layout, std::uintptr_t status, bool fast_accum, int max_sms) {
  GroupedGemmArgs g;
  g.max_sms = max_sms;
  fill_operands(g, a, a_format, lda, b, b_format, ldb, d, d_dtype, ldd, scale_mode, scale_a,
                scale_a_size, scale_a_layout, scale_b, scale_b_size, scale_b_layout, fast_accum);
  g.layout = parse_enum<GemmLayout>("layout", layout);
  g.groups = groups;
  g.group_rows = ptr<const int>(group_rows);
  g.m = m;
  g.n = n;
  g.k = k;
  g.expected_m = expected_m;
  g.status = ptr<int>(status);
  return g;
}

// TuneOptions from the Python keywords, checked here: the tuner takes them as they are.
TuneOptions tune_options(std::int64_t top_k, int warmup, int iters, int jobs) {
  if (top_k < 0) throw_invalid("top_k", std::to_string(top_k), "0 (the whole space) or more");
  if (warmup < 0) throw_invalid("warmup", std::to_string(warmup), "0 or more");
  if (iters < 1) throw_invalid("iters", std::to_string(iters), "1 or more");
  if (jobs < 0) throw_invalid("jobs", std::to_string(jobs), "0 (the runtime's) or more");
  TuneOptions o;
  o.top_k = static_cast<std::size_t>(top_k);
  o.warmup = warmup;
  o.iters = iters;
  o.jobs = jobs;
  return o;
}

// A TuneResult as Python values: (candidates, index of the winner or None), each candidate
// (spec JSON, status, median us, p20 us, p80 us, error).
using Candidate = std::tuple<std::string, std::string, double, double, double, std::string>;
std::pair<std::vector<Candidate>, std::optional<std::size_t>> tune_result(const TuneResult& r) {
  std::vector<Candidate> out;
  for (const CandidateResult& c : r.candidates)
    out.emplace_back(spec_to_json(c.spec), std::string(to_string(c.status)), c.timing.median_us,
                     c.timing.p20_us, c.timing.p80_us, c.error);
  return {out, r.best};
}

void run(const GemmArgs& a, CUstream s) {
  default_runtime().gemm(a, s);
}
void run(const GroupedGemmArgs& a, CUstream s) {
  default_runtime().grouped_gemm(a, s);
}

// The launching and the tuning entry point of one operation, both taking `Make`'s parameters
// (the operands) and then the stream, or the tuning options.
template <auto Make>
struct Entry;
template <class Args, class... P, Args (*Make)(P...)>
struct Entry<Make> {
  static void launch(P... p, std::uintptr_t stream) {
    const Args a = Make(p...);
    nb::gil_scoped_release unlocked;
    run(a, stream_of(stream));
  }
  // more_group_rows: device pointers of more group tables (TuneOptions::more_group_rows).
  static std::pair<std::vector<Candidate>, std::optional<std::size_t>> tune(
      P... p, std::int64_t top_k, int warmup, int iters, int jobs,
      const std::vector<std::uintptr_t>& more_group_rows) {
    const Args a = Make(p...);
    TuneOptions o = tune_options(top_k, warmup, iters, jobs);
    for (std::uintptr_t t : more_group_rows) o.more_group_rows.push_back(ptr<int>(t));
    nb::gil_scoped_release unlocked;
    return tune_result(default_runtime().tune(a, o));
  }
};

}  // namespace

void bind_operations(nb::module_& m) {
  m.def("quantize", &quantize, "x"_a, "input"_a, "m"_a, "k"_a, "ldx"_a, "q"_a, "format"_a, "ldq"_a,
        "scales"_a, "granularity"_a, "scale_layout"_a, "pow2_scale"_a, "static_scale"_a, "qt"_a,
        "ldqt"_a, "scales_t"_a, "amax"_a, "stream"_a, "arithmetic"_a = "ieee", "column_sums"_a = 0,
        "fp8jit::Runtime::quantize on device pointers (QuantizeArgs).");
  m.def("dequantize", &dequantize, "q"_a, "format"_a, "m"_a, "k"_a, "ldq"_a, "scales"_a,
        "granularity"_a, "scale_layout"_a, "y"_a, "output"_a, "ldy"_a, "stream"_a,
        "fp8jit::Runtime::dequantize on device pointers (DequantizeArgs).");
#define FP8JIT_GEMM_ARGS                                                                          \
  "a"_a, "a_format"_a, "lda"_a, "b"_a, "b_format"_a, "ldb"_a, "d"_a, "d_dtype"_a, "ldd"_a, "m"_a, \
      "n"_a, "k"_a, "scale_mode"_a, "scale_a"_a, "scale_a_size"_a, "scale_a_layout"_a,            \
      "scale_b"_a, "scale_b_size"_a, "scale_b_layout"_a, "bias"_a, "fast_accum"_a, "max_sms"_a
#define FP8JIT_GROUPED_ARGS                                                                      \
  "layout"_a, "groups"_a, "group_rows"_a, "a"_a, "a_format"_a, "lda"_a, "b"_a, "b_format"_a,     \
      "ldb"_a, "d"_a, "d_dtype"_a, "ldd"_a, "m"_a, "n"_a, "k"_a, "expected_m"_a, "scale_mode"_a, \
      "scale_a"_a, "scale_a_size"_a, "scale_a_layout"_a, "scale_b"_a, "scale_b_size"_a,          \
      "scale_b_layout"_a, "status"_a, "fast_accum"_a, "max_sms"_a
  m.def("gemm", &Entry<&gemm_args>::launch, FP8JIT_GEMM_ARGS, "stream"_a,
        "fp8jit::Runtime::gemm on device pointers (GemmArgs).");
  m.def(
      "tune_gemm", &Entry<&gemm_args>::tune, FP8JIT_GEMM_ARGS, "top_k"_a, "warmup"_a, "iters"_a,
      "jobs"_a, "more_group_rows"_a = std::vector<std::uintptr_t>{},
      "fp8jit::Runtime::tune on device pointers (GemmArgs; D is overwritten): (candidates, best).");
  m.def("grouped_gemm", &Entry<&grouped_args>::launch, FP8JIT_GROUPED_ARGS, "stream"_a,
        "fp8jit::Runtime::grouped_gemm on device pointers (GroupedGemmArgs).");
  m.def("tune_grouped_gemm", &Entry<&grouped_args>::tune, FP8JIT_GROUPED_ARGS, "top_k"_a,
        "warmup"_a, "iters"_a, "jobs"_a, "more_group_rows"_a = std::vector<std::uintptr_t>{},
        "fp8jit::Runtime::tune on device pointers (GroupedGemmArgs; D is overwritten): "
        "(candidates, best).");
#undef FP8JIT_GEMM_ARGS
#undef FP8JIT_GROUPED_ARGS
}

}  // namespace fp8jit::python
