// fp8jit._fp8jit: the C++ runtime for Python (nanobind). This layer takes plain values: device
// pointers as integers, enum values as their fp8jit names, CUDA streams as integers; the Python
// package (fp8jit/__init__.py) turns tensors into those after checking their device, dtype,
// shape and strides. The runtime is the process-wide one (fp8jit::default_runtime(), configured
// by the FP8JIT_* settings), which is thread-safe; calls that compile or launch release the GIL.
#include <nanobind/nanobind.h>
#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>

#include <string>

#include "fp8jit/fp8jit.hpp"
#include "fp8jit/log.hpp"
#include "python/src/enums.hpp"
#include "runtime/jit/driver.hpp"

namespace nb = nanobind;
using namespace nb::literals;

namespace fp8jit::python {
namespace {

Runtime& rt() {
  return default_runtime();
}

// fp8jit::Error -> ValueError (bad arguments: nothing was launched or written) or RuntimeError.
void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const Error& e) {
    PyErr_SetString(e.kind() == ErrorKind::invalid_argument ? PyExc_ValueError : PyExc_RuntimeError,
                    e.what());
  }
}

GemmProblem gemm_problem(const std::string& a_format, const std::string& b_format,
                         const std::string& out, const std::string& scale, bool bias,
                         bool fast_accum, const std::string& layout) {
  GemmProblem p;
  p.a_format = parse_enum<Fp8Format>("a_format", a_format);
  p.b_format = parse_enum<Fp8Format>("b_format", b_format);
  p.out = parse_enum<DType>("out", out);
  p.scale = parse_enum<ScaleMode>("scale", scale);
  p.bias = bias;
  p.fast_accum = fast_accum;
  p.layout = parse_enum<GemmLayout>("layout", layout);
  return p;
}

void bind_specs(nb::module_& m) {
  m.def(
      "spec_name", [](const std::string& json) { return spec_name(spec_from_json(json)); },
      "spec"_a, "The kernel's canonical name for a spec (JSON).");
  m.def(
      "emit", [](const std::string& json) { return render_source(spec_from_json(json)); }, "spec"_a,
      "The generated CUDA source of a spec (JSON).");
  m.def(
      "compile",
      [](const std::string& json) {
        const KernelSpec spec = spec_from_json(json);
        std::string cubin;
        {
          nb::gil_scoped_release unlocked;
          cubin = rt().compile(spec);
        }
        return nb::bytes(cubin.data(), cubin.size());
      },
      "spec"_a, "The sm_90a cubin of a spec (JSON), from the disk cache or NVRTC; needs no GPU.");
  m.def(
      "select_gemm",
      [](std::int64_t mm, std::int64_t n, std::int64_t k, const std::string& a_format,
         const std::string& b_format, const std::string& out, const std::string& scale, bool bias,
         bool fast_accum) {
        const GemmProblem p =
            gemm_problem(a_format, b_format, out, scale, bias, fast_accum, "dense");
        return spec_to_json(rt().select(p, GemmShape{mm, n, k}));
      },
      "m"_a, "n"_a, "k"_a, "a_format"_a = "e4m3", "b_format"_a = "e4m3", "out"_a = "bf16",
      "scale"_a = "block", "bias"_a = false, "fast_accum"_a = false,
      "The spec (JSON) gemm() takes for this problem and shape.");
  m.def(
      "select_grouped_gemm",
      [](const std::string& layout, std::int64_t groups, std::int64_t expected_m, std::int64_t n,
         std::int64_t k, const std::string& a_format, const std::string& b_format,
         const std::string& out, const std::string& scale, bool fast_accum) {
        const GemmProblem p =
            gemm_problem(a_format, b_format, out, scale, false, fast_accum, layout);
        return spec_to_json(rt().select_grouped(p, groups, expected_m, n, k));
      },
      "layout"_a, "groups"_a, "expected_m"_a, "n"_a, "k"_a, "a_format"_a = "e4m3",
      "b_format"_a = "e4m3", "out"_a = "bf16", "scale"_a = "block", "fast_accum"_a = false,
      "The spec (JSON) grouped_gemm() takes for this layout, group count, rows per group, N and "
      "K.");
  m.def(
      "precompile",
      [](const std::vector<std::tuple<std::int64_t, std::int64_t, std::int64_t>>& shapes,
         const std::string& a_format, const std::string& b_format, const std::string& out,
         const std::string& scale, bool bias, bool fast_accum, int jobs) {
        const GemmProblem p =
            gemm_problem(a_format, b_format, out, scale, bias, fast_accum, "dense");
        std::vector<GemmShape> s;
        for (const auto& [mm, n, k] : shapes) s.push_back({mm, n, k});
        nb::gil_scoped_release unlocked;
        return rt().precompile(p, s, jobs);
      },
      "shapes"_a, "a_format"_a = "e4m3", "b_format"_a = "e4m3", "out"_a = "bf16",
      "scale"_a = "block", "bias"_a = false, "fast_accum"_a = false, "jobs"_a = 0,
      "Compiles the kernels gemm() would take for these (m, n, k) shapes; returns how many "
      "compiled.");
  m.def(
      "precompile_model",
      [](const std::string& config_json, const std::vector<std::int64_t>& ms, int tp,
         const std::string& a_format, const std::string& b_format, const std::string& out,
         const std::string& scale, int jobs) {
        const GemmProblem p = gemm_problem(a_format, b_format, out, scale, false, false, "dense");
        std::vector<std::tuple<std::string, std::string, std::int64_t, std::int64_t>> rows;
        std::vector<KernelSpec> specs;
        {
          nb::gil_scoped_release unlocked;
          for (const Runtime::ModelKernel& k : rt().model_kernels(config_json, ms, tp, p)) {
            rows.emplace_back(k.what, spec_to_json(k.spec), k.m_min, k.m_max);
            specs.push_back(k.spec);
          }
          rt().precompile(specs, jobs);
        }
        return rows;
      },
      "config_json"_a, "ms"_a, "tp"_a = 1, "a_format"_a = "e4m3", "b_format"_a = "e4m3",
      "out"_a = "bf16", "scale"_a = "block", "jobs"_a = 0,
      "Compiles every kernel a model (its config.json text) runs for these batch sizes on one of "
      "tp ranks; returns (what, spec JSON, smallest M, largest M) per kernel.");
}

// The Python callable fp8jit's messages go to (None: stderr). Leaked on purpose: a static
// nb::object would be destroyed after the interpreter, and messages can come from any thread.
nb::object* g_log_sink = new nb::object();

void to_python_sink(int level, const char* message, void*) {
  nb::gil_scoped_acquire gil;
  try {
    if (g_log_sink->is_valid() && !g_log_sink->is_none()) (*g_log_sink)(level, message);
  } catch (nb::python_error& e) {
    e.discard_as_unraisable("fp8jit log callback");  // a logging failure never fails the work
  }
}

void bind_runtime(nb::module_& m) {
  m.def(
      "set_log_callback",
      [](nb::object callback) {
        if (!callback.is_none() && !PyCallable_Check(callback.ptr()))
          throw_invalid("callback", nb::repr(callback).c_str(), "a callable (level, message) or None");
        {
          nb::gil_scoped_release unlocked;  // fp8jit's sink lock is taken without the GIL
          set_log_callback(nullptr);
        }
        *g_log_sink = callback;
        if (!callback.is_none()) {
          nb::gil_scoped_release unlocked;
          set_log_callback(&to_python_sink);
        }
      },
      "callback"_a.none(),
      "fp8jit's messages go to callback(level, message) (1 warning, 2 info, 3 debug), from any "
      "thread; None: back to stderr.");
  m.def(
      "set_log_level", [](int level) { set_log_level(level); }, "level"_a,
      "0 quiet, 1 warnings (default), 2 info, 3 debug.");
  m.def(
      "scale_count",
      [](const std::string& granularity, const std::string& layout, std::int64_t rows,
         std::int64_t cols) {
        return scale_count(parse_enum<Granularity>("granularity", granularity),
                           parse_enum<ScaleLayout>("scale_layout", layout), rows, cols);
      },
      "granularity"_a, "scale_layout"_a, "rows"_a, "cols"_a,
      "Floats a scale tensor holds for a [rows, cols] tensor (col_major_tma pads rows to 4).");
  m.def(
      "has_gpu", [] { return driver::available(); },
      "Whether a CUDA driver with a device is present.");
  m.def(
      "cache_dir", [] { return rt().cache_dir(); }, "The disk cache directory ('' when disabled).");
  m.def(
      "cache_stats",
      [] {
        const CacheStats s = rt().cache_stats();
        nb::dict d;
        d["memory_hits"] = s.memory_hits;
        d["memory_misses"] = s.memory_misses;
        d["disk_hits"] = s.disk_hits;
        d["disk_misses"] = s.disk_misses;
        d["disk_corrupt"] = s.disk_corrupt;
        d["disk_writes"] = s.disk_writes;
        d["compiles"] = s.compiles;
        d["compile_seconds"] = s.compile_seconds;
        return d;
      },
      "The runtime's kernel-cache counters.");
  m.def("reset_cache_stats", [] { rt().reset_cache_stats(); });
  m.def(
      "set_pdl", [](bool enabled) { rt().set_pdl(enabled); }, "enabled"_a,
      "Programmatic dependent launch for later launches.");
  m.def("pdl", [] { return rt().pdl(); }, "Whether programmatic dependent launch is on.");
}

}  // namespace

void bind_operations(nb::module_& m);    // operations.cpp
void bind_gemm_tensors(nb::module_& m);  // gemm_tensors.cpp

}  // namespace fp8jit::python

NB_MODULE(_fp8jit, m) {
  m.doc() = "fp8jit's C++ runtime (plain values; see the fp8jit package for the tensor API)";
  m.attr("__version__") = FP8JIT_VERSION_STRING;
  nb::register_exception_translator(fp8jit::python::translate);
  fp8jit::python::bind_specs(m);
  fp8jit::python::bind_runtime(m);
  fp8jit::python::bind_operations(m);
  fp8jit::python::bind_gemm_tensors(m);
}
