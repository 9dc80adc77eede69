// fp8jit tune / precompile: offline sweeps into the tuning database, and compiling ahead of
// serving the kernels the runtime will look up.
#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <memory>

#include "autotune/timer.hpp"
#include "common/file_io.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/driver.hpp"
#include "common/settings.hpp"
#include "autotune/tuning_db.hpp"
#include "tools/cli.hpp"
#include "tools/options.hpp"
#include "tools/progress.hpp"
#include "tools/operands.hpp"
#include "tools/shapes.hpp"

namespace fp8jit::cli {
namespace {

struct SweepOptions {
  std::string suite, shapes, op = "gemm", scale = "block", out = "bf16", db;
  bool fast_accum = false;
  int jobs = 1;
  std::int64_t top_k = 32;
};

std::vector<GemmShape> shapes_of(const SweepOptions& o) {
  if (o.suite.empty() && o.shapes.empty())
    throw_invalid("--suite/--shapes", "<missing>", "give a suite name (deepseek-v3, square) or a CSV of m,n,k rows");
  return read_gemm_shapes(o.shapes.empty() ? find_suite(o.suite).string() : o.shapes);
}

GemmProblem problem_of(const SweepOptions& o) {
  GemmProblem p;
  p.scale = *parse_scale_mode(o.scale);  // admitted by the option's IsMember check
  p.out = *parse_dtype(o.out);
  p.fast_accum = o.fast_accum;
  if (p.fast_accum && (p.scale == ScaleMode::block || p.scale == ScaleMode::group))
    throw_invalid("--fast-accum", "with --scale " + o.scale, "only tensor and rowwise scaling accumulate without promotion");
  return p;
}

RuntimeOptions runtime_options(const SweepOptions& o) {
  RuntimeOptions r = RuntimeOptions::from_settings();
  if (!o.db.empty()) r.db_path = o.db;
  if (const std::string kind = special_file_kind(r.db_path); !kind.empty())
    throw_invalid("--db", r.db_path, "is " + kind + "; the tuning database must be a file");
  return r;
}

struct TunedRow {
  GemmShape shape;
  std::string best, heuristic;
  double best_us = 0, heuristic_us = 0;
  std::size_t passed = 0, total = 0;
};

TunedRow tune_shape(Runtime& rt, const GemmShape& s, const GemmProblem& problem, TuneOptions topt, Progress& progress) {
  GemmArgs g;
  g.m = s.m, g.n = s.n, g.k = s.k;
  g.scale_mode = problem.scale;
  g.d_dtype = problem.out;
  g.fast_accum = problem.fast_accum;
  GemmOperands keep = make_gemm_operands(rt, g);
  topt.progress = [&](const TuneProgress& p) {
    progress.advance(0, fmt::format("{}x{}x{}: compiled {}/{}, timed {}/{}, best {}", g.m, g.n, g.k, p.compiled,
                                    p.total, p.timed, p.total,
                                    p.best ? fmt::format("{:.1f} us", p.best->timing.median_us) : std::string("-")));
  };
  const TuneResult r = rt.tune(g, topt);
  progress.advance(1, fmt::format("{}x{}x{} done", g.m, g.n, g.k));
  TunedRow row{s, "", "", 0, 0, 0, r.candidates.size()};
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
  return row;
}

int tune(const SweepOptions& o) {
  const std::vector<GemmShape> shapes = shapes_of(o);
  const GemmProblem problem = problem_of(o);
  const RuntimeOptions ropt = runtime_options(o);
  if (ropt.db_path.empty()) throw_invalid("--db", "<empty>", "tuning needs a database path (FP8JIT_DB or --db)");
  // An existing database is checked (someone else's file is refused) before any sweep; a new
  // one is created only by the first result.
  if (TuningDb::exists(ropt.db_path)) TuningDb check(ropt.db_path);
  require_gpu();
  TuneOptions topt;
  topt.jobs = resolve_jobs(o.jobs);
  topt.top_k = static_cast<std::size_t>(o.top_k);
  Runtime rt(ropt);
  std::vector<TunedRow> rows;
  {
    Progress progress(fmt::format("tuning {} shapes", shapes.size()), shapes.size());
    for (const GemmShape& s : shapes) rows.push_back(tune_shape(rt, s, problem, topt, progress));
  }
  fmt::print("| M | N | K | passed | best kernel | best µs | heuristic µs | gain |\n"
             "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  double log_gain = 0;
  int counted = 0;
  for (const TunedRow& r : rows) {
    const double gain = r.best_us > 0 && r.heuristic_us > 0 ? r.heuristic_us / r.best_us : 0;
    if (gain > 0) log_gain += std::log(gain), ++counted;
    fmt::print("| {} | {} | {} | {}/{} | {} | {:.1f} | {:.1f} | {:.3f}x |\n", r.shape.m, r.shape.n, r.shape.k, r.passed,
               r.total, r.best.empty() ? "none passed" : r.best, r.best_us, r.heuristic_us, gain);
  }
  if (counted)
    fmt::print("\ngeometric-mean gain over the heuristic: {:.3f}x ({} shapes); database {}\n",
               std::exp(log_gain / counted), counted, printable(ropt.db_path));
  return rows.size() == static_cast<std::size_t>(counted) ? 0 : 1;
}

int precompile(const SweepOptions& o) {
  const std::vector<GemmShape> shapes = shapes_of(o);
  const GemmProblem problem = problem_of(o);
  Runtime rt(runtime_options(o));
  const auto t0 = std::chrono::steady_clock::now();
  std::unique_ptr<Progress> progress;
  const std::size_t n = rt.precompile(problem, shapes, resolve_jobs(o.jobs), [&](std::size_t, std::size_t total, const KernelSpec& s) {
    if (!progress) progress = std::make_unique<Progress>(fmt::format("compiling {} kernels", total), total);
    progress->advance(1, spec_name(s));
  });
  progress.reset();
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const CacheStats st = rt.cache_stats();
  fmt::print("{} shapes -> {} kernels ready in {:.1f} s ({} compiled, {} from the disk cache at {})\n", shapes.size(), n,
             s, st.compiles, st.disk_hits, rt.cache_dir().empty() ? "<disabled>" : printable(rt.cache_dir()));
  return 0;
}

// The options `tune` and `precompile` share.
void add_sweep_options(CLI::App* sub, SweepOptions& o) {
  auto* suite = sub->add_option("--suite", o.suite, "a shape suite of bench/shapes (deepseek-v3, square, ...)");
  auto* shapes = sub->add_option("--shapes", o.shapes, "a CSV of m,n,k rows");
  suite->excludes(shapes);
  add_choice(sub, "--op", o.op, {"gemm"}, "the operation (quantize/dequantize are tuned through the library API)");
  add_choice(sub, "--scale", o.scale, {"block", "rowwise", "tensor", "group"}, "scale mode");
  add_choice(sub, "--out", o.out, {"bf16", "fp16", "fp32"}, "output dtype");
  sub->add_flag("--fast-accum", o.fast_accum, "accumulate in the tensor cores only (tensor and rowwise scaling)");
  sub->add_option("--db", o.db, "the tuning database (default: FP8JIT_DB)");
  add_jobs(sub, o.jobs);
}

}  // namespace

void add_tune_commands(CLI::App& app) {
  auto* t = app.add_subcommand("tune", "GPU: sweep each shape's configs, store the winners in the tuning database");
  auto to = std::make_shared<SweepOptions>();
  add_sweep_options(t, *to);
  t->add_option("--top-k", to->top_k, "candidates kept after the analytic ranking (0: the whole space)")
      ->check(integer_in(0, 100000))
      ->capture_default_str();
  on_run(t, [=] { return tune(*to); });

  auto* p = app.add_subcommand("precompile", "compile ahead of serving the kernels the runtime will pick (no GPU needed)");
  auto po = std::make_shared<SweepOptions>();
  add_sweep_options(p, *po);
  on_run(p, [=] { return precompile(*po); });
}

}  // namespace fp8jit::cli
