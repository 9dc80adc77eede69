// fp8jit: inspect, compile and run the generated FP8 kernels.
#include <fmt/format.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>

#include "fp8jit/error.hpp"
#include "tools/cli.hpp"

namespace fp8jit::cli {

Args::Args(int argc, char** argv, int first, const std::vector<std::string>& valued,
           const std::vector<std::string>& flags) {
  auto is = [](const std::vector<std::string>& v, const std::string& s) {
    return std::find(v.begin(), v.end(), s) != v.end();
  };
  for (int i = first; i < argc; ++i) {
    std::string a = argv[i];
    if (a.rfind("--", 0) != 0) throw_invalid("argument", a, "expected an option starting with --");
    a = a.substr(2);
    if (auto eq = a.find('='); eq != std::string::npos && is(valued, a.substr(0, eq))) {
      values_[a.substr(0, eq)] = a.substr(eq + 1);
    } else if (is(valued, a)) {
      if (i + 1 >= argc) throw_invalid("--" + a, "<missing>", "needs a value");
      values_[a] = argv[++i];
    } else if (is(flags, a)) {
      flags_[a] = true;
    } else {
      throw_invalid("option", "--" + a, "unknown for this command");
    }
  }
}

std::optional<std::string> Args::get(const std::string& n) const {
  auto it = values_.find(n);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}
std::string Args::get_or(const std::string& n, const std::string& f) const { return get(n).value_or(f); }
long long Args::get_int(const std::string& n, long long f) const {
  auto v = get(n);
  if (!v) return f;
  char* end = nullptr;
  long long x = std::strtoll(v->c_str(), &end, 10);
  if (end == v->c_str() || *end) throw_invalid("--" + n, *v, "expected an integer");
  return x;
}
bool Args::flag(const std::string& n) const { return flags_.count(n) > 0; }

KernelSpec read_spec(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && s[first] == '{') return spec_from_json(s);
  std::ifstream f(s);
  if (!f) throw Error(ErrorKind::io, fmt::format("--spec {}: neither JSON nor a readable file", s));
  std::stringstream ss;
  ss << f.rdbuf();
  return spec_from_json(ss.str());
}

}  // namespace fp8jit::cli

namespace {

constexpr const char* kUsage = R"(usage: fp8jit <command> [options]
  info                                   GPU, driver, NVRTC, cache and settings
  list [--family F] [--json]             kernel families and config spaces; --json: one spec per line
  emit --spec JSON|FILE                  print the generated CUDA source
  compile --spec JSON|FILE [--ptx PATH] [--cubin PATH]   NVRTC for sm_90a (no GPU needed)
  compile-all [--family F,G] [--jobs N] [--sample N]
                                         compile every variant (gemm: a spread sample of N, 0 = all)
  quantize [--m M --k K --input bf16|fp16|fp32 --format e4m3|e5m2 --granularity tensor|row|1x128|128x128
            --layout row_major|col_major_tma --pow2 --transpose --iters N]    GPU run, checked, GB/s
  dequantize [--m M --k K --format F --output bf16|fp16|fp32 --granularity G --iters N]
  gemm [--m M --n N --k K --scale block|rowwise|tensor|group --out bf16|fp16|fp32
        --a-format e4m3|e5m2 --b-format e4m3|e5m2 --fast-accum --iters N
        --config '{"block_n":160,"stages":5}']     one GEMM, checked, TFLOP/s (config: override
                                         fields of the variant the runtime would choose)
  tune (--shapes F.csv | --suite deepseek-v3) [--op gemm] [--scale block] [--out bf16] [--db PATH]
       [--jobs N] [--top-k N]            sweep each shape on the GPU, store winners in the database
  precompile (--shapes F.csv | --suite S) [--scale ...] [--db PATH] [--jobs N]
                                         compile ahead of serving what the runtime will pick
  select-gemm [--m --n --k --scale --out --fast-accum]   the heuristic's gemm spec as JSON
  demo                                   with a GPU: quantize -> dequantize round trip with GB/s;
                                         without: compile every kernel variant
  db list|show|export|import|prune|rebuild [--db PATH]   the tuning database (default FP8JIT_DB)
        [--gpu KEY] [--op OP --m M --n N --k K] (show)  [--file F] (export, import)
        [--op OP --space-hash H] (prune: also drop OP's rows of another space)
  bench (--suite deepseek-v3|square | --shapes FILE.csv) [--scale block|rowwise|tensor|group[,...]]
        [--providers fp8jit,cublaslt] [--out DIR] [--dry-run]
                                         GEMM benchmarks next to cuBLASLt (runs fp8jit_bench);
                                         charts afterwards: bash bench/plot.sh DIR
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace fp8jit::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "help")) {
    fmt::print("{}", kUsage);
    return argc < 2 ? 2 : 0;
  }
  const std::string cmd = argv[1];
  const std::vector<std::string> run_opts = {"m", "k", "input", "format", "output", "granularity",
                                             "layout", "iters", "spec"};
  try {
    if (cmd == "info") return cmd_info(Args(argc, argv, 2, {}, {}));
    if (cmd == "list") return cmd_list(Args(argc, argv, 2, {"family"}, {"json"}));
    if (cmd == "emit") return cmd_emit(Args(argc, argv, 2, {"spec"}, {}));
    if (cmd == "compile") return cmd_compile(Args(argc, argv, 2, {"spec", "ptx", "cubin"}, {}));
    if (cmd == "compile-all") return cmd_compile_all(Args(argc, argv, 2, {"family", "jobs", "sample"}, {}));
    if (cmd == "quantize") return cmd_quantize(Args(argc, argv, 2, run_opts, {"pow2", "transpose"}));
    if (cmd == "dequantize") return cmd_dequantize(Args(argc, argv, 2, run_opts, {}));
    if (cmd == "gemm")
      return cmd_gemm(Args(argc, argv, 2, {"m", "n", "k", "scale", "out", "a-format", "b-format", "iters", "config"},
                                    {"fast-accum"}));
    if (cmd == "tune")
      return cmd_tune(Args(argc, argv, 2, {"shapes", "suite", "op", "scale", "out", "db", "jobs", "top-k"}, {"fast-accum"}));
    if (cmd == "precompile")
      return cmd_precompile(Args(argc, argv, 2, {"shapes", "suite", "op", "scale", "out", "db", "jobs"}, {"fast-accum"}));
    if (cmd == "select-gemm")
      return cmd_select_gemm(Args(argc, argv, 2, {"m", "n", "k", "scale", "out"}, {"fast-accum"}));
    if (cmd == "bench") return cmd_bench(Args(argc, argv, 2, {"suite", "shapes", "scale", "providers", "out"}, {"dry-run"}));
    if (cmd == "demo") return cmd_demo(Args(argc, argv, 2, {"m", "k", "jobs", "sample"}, {}));
    if (cmd == "db") return cmd_db(argc, argv);
    fmt::print(stderr, "fp8jit: unknown command '{}'\n{}", cmd, kUsage);
    return 2;
  } catch (const fp8jit::Error& e) {
    fmt::print(stderr, "fp8jit {}: {}\n", cmd, e.what());
    return 1;
  } catch (const std::exception& e) {
    fmt::print(stderr, "fp8jit {}: unexpected error: {}\n", cmd, e.what());
    return 1;
  }
}
