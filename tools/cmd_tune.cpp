// fp8jit tune / precompile: offline sweeps into the tuning database, and compiling ahead of
// serving the kernels the runtime will look up.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <random>

#include "autotune/timer.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/driver.hpp"
#include "runtime/settings.hpp"
#include "tools/cli.hpp"
#include "tools/operands.hpp"
#include "tools/shapes.hpp"

namespace fp8jit::cli {
namespace {

std::string shapes_path(const Args& args) {
  const auto suite = args.get("suite"), shapes = args.get("shapes");
  if (suite && shapes) throw_invalid("--suite/--shapes", *suite + "/" + *shapes, "give one of them");
  if (shapes) return *shapes;
  if (suite) return find_suite(*suite).string();
  throw_invalid("--suite/--shapes", "<missing>", "a suite name (deepseek-v3, square) or a CSV of m,n,k");
}

GemmProblem problem_from(const Args& args) {
  GemmProblem p;
  auto op = args.get_or("op", "gemm");
  if (op != "gemm") throw_invalid("--op", op, "only gemm is tuned by this command (quantize/dequantize: library API)");
  auto mode = parse_scale_mode(args.get_or("scale", "block"));
  if (!mode) throw_invalid("--scale", args.get_or("scale", "block"), "tensor, rowwise, block or group");
  auto out = parse_dtype(args.get_or("out", "bf16"));
  if (!out) throw_invalid("--out", args.get_or("out", "bf16"), "bf16, fp16 or fp32");
  p.scale = *mode;
  p.out = *out;
  p.fast_accum = args.flag("fast-accum");
  return p;
}

RuntimeOptions options_from(const Args& args) {
  RuntimeOptions o = RuntimeOptions::from_settings();
  if (auto db = args.get("db")) o.db_path = *db;
  return o;
}

}  // namespace

int cmd_tune(const Args& args) {
  const std::vector<GemmShape> shapes = read_gemm_shapes(shapes_path(args));
  const GemmProblem problem = problem_from(args);
  TuneOptions topt;
  topt.jobs = static_cast<int>(args.get_int("jobs", Settings::get().jobs));
  topt.top_k = static_cast<std::size_t>(std::max<long long>(0, args.get_int("top-k", 32)));
  if (topt.jobs < 1) throw_invalid("--jobs", std::to_string(topt.jobs), "must be at least 1");
  if (!driver::available()) throw Error(ErrorKind::driver, "fp8jit tune needs a GPU: " + driver::unavailable_reason());
  RuntimeOptions ropt = options_from(args);
  if (ropt.db_path.empty()) throw_invalid("--db", "<empty>", "tuning needs a database path");
  Runtime rt(ropt);
  struct Row {
    GemmShape shape;
    std::string best, heuristic;
    double best_us = 0, heuristic_us = 0;
    std::size_t passed = 0, total = 0;
  };
  std::vector<Row> rows;
  for (std::size_t i = 0; i < shapes.size(); ++i) {
    GemmArgs g;
    g.m = shapes[i].m;
    g.n = shapes[i].n;
    g.k = shapes[i].k;
    g.scale_mode = problem.scale;
    g.d_dtype = problem.out;
    g.fast_accum = problem.fast_accum;
    GemmOperands keep = make_gemm_operands(rt, g);
    topt.progress = [&](const TuneProgress& p) {
      fmt::print(stderr, "\rshape {}/{} {}x{}x{}: compiled {}/{}, timed {}/{}, best {}", i + 1, shapes.size(), g.m, g.n,
                 g.k, p.compiled, p.total, p.timed, p.total,
                 p.best ? fmt::format("{:.1f} us", p.best->timing.median_us) : std::string("-"));
    };
    const TuneResult r = rt.tune(g, topt);
    fmt::print(stderr, "\n");
    Row row{shapes[i], "", "", 0, 0, 0, r.candidates.size()};
    for (const CandidateResult& c : r.candidates) row.passed += c.status == CandidateStatus::passed;
    if (r.best) {
      row.best = spec_name(r.candidates[*r.best].spec);
      row.best_us = r.candidates[*r.best].timing.median_us;
    }
    // Candidate 0 is always the heuristic default: the gain is measured in the same sweep.
    if (!r.candidates.empty() && r.candidates[0].status == CandidateStatus::passed) {
      row.heuristic = spec_name(r.candidates[0].spec);
      row.heuristic_us = r.candidates[0].timing.median_us;
    }
    rows.push_back(row);
  }
  fmt::print("| M | N | K | passed | best kernel | best µs | heuristic µs | gain |\n| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  double log_gain = 0;
  int counted = 0;
  for (const Row& r : rows) {
    const double gain = r.best_us > 0 && r.heuristic_us > 0 ? r.heuristic_us / r.best_us : 0;
    if (gain > 0) log_gain += std::log(gain), ++counted;
    fmt::print("| {} | {} | {} | {}/{} | {} | {:.1f} | {:.1f} | {:.3f}x |\n", r.shape.m, r.shape.n, r.shape.k, r.passed,
               r.total, r.best.empty() ? "none passed" : r.best, r.best_us, r.heuristic_us, gain);
  }
  if (counted) fmt::print("\ngeometric-mean gain over the heuristic: {:.3f}x ({} shapes); database {}\n",
                          std::exp(log_gain / counted), counted, ropt.db_path);
  return rows.size() == static_cast<std::size_t>(counted) ? 0 : 1;
}

int cmd_precompile(const Args& args) {
  const std::vector<GemmShape> shapes = read_gemm_shapes(shapes_path(args));
  const GemmProblem problem = problem_from(args);
  const int jobs = static_cast<int>(args.get_int("jobs", Settings::get().jobs));
  if (jobs < 1) throw_invalid("--jobs", std::to_string(jobs), "must be at least 1");
  Runtime rt(options_from(args));
  const auto t0 = std::chrono::steady_clock::now();
  const std::size_t n = rt.precompile(problem, shapes, jobs);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const CacheStats st = rt.cache_stats();
  fmt::print("{} shapes -> {} kernels ready in {:.1f} s ({} compiled, {} from the disk cache at {})\n", shapes.size(), n,
             s, st.compiles, st.disk_hits, rt.cache_dir().empty() ? "<disabled>" : rt.cache_dir());
  return 0;
}

}  // namespace fp8jit::cli
