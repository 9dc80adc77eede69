// fp8jit tune / precompile: offline sweeps into the tuning database, and compiling ahead of
// serving the kernels the runtime will look up.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <functional>
#include <memory>

#include "autotune/timer.hpp"
#include "autotune/tuning_db.hpp"
#include "common/file_io.hpp"
#include "common/settings.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"
#include "runtime/jit/driver.hpp"
#include "tools/cli.hpp"
#include "tools/grouped_operands.hpp"
#include "tools/model_precompile.hpp"
#include "tools/operands.hpp"
#include "tools/options.hpp"
#include "tools/progress.hpp"
#include "tools/shapes.hpp"
#include "tools/tune_all_gpus.hpp"

namespace fp8jit::cli {
namespace {

struct SweepOptions {
  std::string suite, shapes, op = "gemm", scale = "block", out = "bf16", db;
  std::string model, ms = "1-4096";  // precompile --model
  std::string gpu;                    // precompile: the target without a GPU
  std::string shard;                  // tune: "i/n" (else the launcher's rank, else all)
  bool dry_run = false;               // tune: list this shard's shapes, tune nothing
  int device = -1;                    // tune: the GPU (-1: the current one)
  bool all_gpus = false;              // tune: one process per GPU
  int tp = 1;
  bool fast_accum = false;
  bool bias = false;  // the GEMMs add a bias over their columns (a Linear's forward GEMM)
  int jobs = 1;
  std::int64_t top_k = 32;
};

std::string shapes_path(const SweepOptions& o) {
  if (o.suite.empty() && o.shapes.empty())
    throw_invalid(
        "--suite/--shapes", "<missing>",
        "give a suite name (deepseek-v3, square, deepseek-v3-moe) or a CSV of m,n,k rows");
  return o.shapes.empty() ? find_suite(o.suite).string() : o.shapes;
}

GemmProblem problem_of(const SweepOptions& o) {
  GemmProblem p;
  p.scale = *parse_scale_mode(o.scale);  // admitted by the option's IsMember check
  p.out = *parse_dtype(o.out);
  p.fast_accum = o.fast_accum;
  p.bias = o.bias;
  if (p.fast_accum && (p.scale == ScaleMode::block || p.scale == ScaleMode::group))
    throw_invalid("--fast-accum", "with --scale " + o.scale, "only tensor and rowwise scaling accumulate without promotion");
  return p;
}

RuntimeOptions runtime_options(const SweepOptions& o) {
  RuntimeOptions r = RuntimeOptions::from_settings();
  if (!o.db.empty()) r.db_path = o.db;
  if (!o.gpu.empty()) r.target = gpu_target(o.gpu);
  if (const std::string kind = special_file_kind(r.db_path); !kind.empty())
    throw_invalid("--db", r.db_path, "is " + kind + "; the tuning database must be a file");
  return r;
}

// The part of a shape list this process tunes: every count-th shape from index. Rows of the
// shards go to one WAL database or to one each, merged with `fp8jit db import`.
struct Shard {
  int index = 0, count = 1;
  std::string from;  // where the split came from, for the log line
  template <class T>
  std::vector<T> take(const std::vector<T>& all) const {
    std::vector<T> out;
    for (std::size_t i = static_cast<std::size_t>(index); i < all.size(); i += static_cast<std::size_t>(count))
      out.push_back(all[i]);
    return out;
  }
};

Shard shard_of(const SweepOptions& o) {
  Shard s;
  if (!o.shard.empty()) {
    const std::size_t slash = o.shard.find('/');
    const auto number = [&](const std::string& t) {
      if (t.empty() || t.size() > 6 || t.find_first_not_of("0123456789") != std::string::npos) return -1;
      return std::stoi(t);
    };
    s.index = slash == std::string::npos ? -1 : number(o.shard.substr(0, slash));
    s.count = slash == std::string::npos ? -1 : number(o.shard.substr(slash + 1));
    if (s.index < 0 || s.count < 1 || s.index >= s.count)
      throw_invalid("--shard", printable(o.shard, 40), "i/n with 0 <= i < n, e.g. 0/4");
    return s;
  }
  if (const auto r = Settings::launcher_rank()) s = {r->rank, r->size, " (" + r->from + ")"};
  return s;
}

struct TunedRow {
  std::string shape;  // the table's shape cells
  std::string best, heuristic;
  double best_us = 0, heuristic_us = 0;
  std::size_t passed = 0, total = 0;
};

TunedRow summary_of(std::string shape, const TuneResult& r) {
  TunedRow row{std::move(shape), "", "", 0, 0, 0, r.candidates.size()};
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

// Tunes through `sweep`, reporting its progress under `label`.
TunedRow tune_with_progress(const std::string& label, std::string cells, TuneOptions topt,
                            Progress& progress,
                            const std::function<TuneResult(const TuneOptions&)>& sweep) {
  topt.progress = [&](const TuneProgress& p) {
    progress.advance(0, fmt::format("{}: compiled {}/{}, timed {}/{}, best {}", label, p.compiled,
                                    p.total, p.timed, p.total,
                                    p.best ? fmt::format("{:.1f} us", p.best->timing.median_us)
                                           : std::string("-")));
  };
  const TuneResult r = sweep(topt);
  progress.advance(1, label + " done");
  return summary_of(std::move(cells), r);
}

TunedRow tune_shape(Runtime& rt, const GemmShape& s, const GemmProblem& problem,
                    const TuneOptions& topt, Progress& progress) {
  GemmArgs g;
  g.m = s.m, g.n = s.n, g.k = s.k;
  g.scale_mode = problem.scale;
  g.d_dtype = problem.out;
  g.fast_accum = problem.fast_accum;
  // With a bias the kernel (its epilogue, its registers) and the tuning row's key differ.
  GemmOperands keep = make_gemm_operands(rt, g, problem.bias);
  return tune_with_progress(fmt::format("{}x{}x{}", g.m, g.n, g.k),
                            fmt::format("{} | {} | {}", g.m, g.n, g.k), topt, progress,
                            [&](const TuneOptions& t) { return rt.tune(g, t); });
}

// A grouped row is tuned on a seeded random routing of its shape (tools/grouped_operands.hpp), a
// masked one on a second, wider draw as well (uniform_masked_routing); the database keys it by
// layout, groups, expected rows per group, N and K.
TunedRow tune_grouped_shape(Runtime& rt, const GroupedShape& s, GemmProblem problem,
                            const TuneOptions& topt, Progress& progress, unsigned seed) {
  problem.layout = s.layout;
  GroupedGemmArgs g = grouped_gemm_args(problem, s);
  GroupedOperands keep = make_grouped_operands(rt, g, seed);
  TuneOptions t = topt;
  std::unique_ptr<DeviceBuffer> second_table;
  if (s.layout == GemmLayout::masked) {
    const std::vector<int> rows = uniform_masked_routing(s, seed + 1);
    second_table = std::make_unique<DeviceBuffer>(4 * rows.size());
    second_table->upload(rows.data(), 4 * rows.size());
    t.more_group_rows = {static_cast<const int*>(second_table->get())};
  }
  const std::string label = fmt::format("{} {} groups x{} rows (expected {}) x{}x{}",
                                        to_string(s.layout), s.groups, s.m, g.expected_m, s.n, s.k);
  const std::string cells = fmt::format("{} | {} | {} | {} | {} | {}", to_string(s.layout),
                                        s.groups, s.m, g.expected_m, s.n, s.k);
  return tune_with_progress(label, cells, t, progress,
                            [&](const TuneOptions& o) { return rt.tune(g, o); });
}

// The results as a Markdown table; 1 when a shape had no passing candidate.
int print_results(const std::string& shape_header, const std::vector<TunedRow>& rows,
                  const std::string& db) {
  const auto columns =
      static_cast<std::size_t>(std::count(shape_header.begin(), shape_header.end(), '|')) + 6;
  std::string rule = "|";
  for (std::size_t i = 0; i < columns; ++i) rule += " --- |";
  fmt::print("| {} | passed | best kernel | best µs | heuristic µs | gain |\n{}\n", shape_header,
             rule);
  double log_gain = 0;
  int counted = 0;
  for (const TunedRow& r : rows) {
    const double gain = r.best_us > 0 && r.heuristic_us > 0 ? r.heuristic_us / r.best_us : 0;
    if (gain > 0) log_gain += std::log(gain), ++counted;
    fmt::print("| {} | {}/{} | {} | {:.1f} | {:.1f} | {:.3f}x |\n", r.shape, r.passed, r.total,
               r.best.empty() ? "none passed" : r.best, r.best_us, r.heuristic_us, gain);
  }
  if (counted)
    fmt::print("\ngeometric-mean gain over the heuristic: {:.3f}x ({} shapes); database {}\n",
               std::exp(log_gain / counted), counted, printable(db));
  return rows.size() == static_cast<std::size_t>(counted) ? 0 : 1;
}

// The `tune` command of one process of --all-gpus: these options, on one database. The processes
// compile at once, so without --jobs each takes its share of the cores, not all of them.
std::vector<std::string> child_args(const SweepOptions& o, const std::string& db, int devices) {
  const int jobs = o.jobs > 0 ? o.jobs : std::max(1, resolve_jobs(0) / std::max(1, devices));
  std::vector<std::string> a = {"tune"};
  if (!o.suite.empty()) a.insert(a.end(), {"--suite", o.suite});
  if (!o.shapes.empty()) a.insert(a.end(), {"--shapes", o.shapes});
  a.insert(a.end(), {"--op", o.op, "--scale", o.scale, "--out", o.out, "--db", db, "--jobs", std::to_string(jobs),
                     "--top-k", std::to_string(o.top_k)});
  if (o.fast_accum) a.push_back("--fast-accum");
  if (o.bias) a.push_back("--bias");
  return a;
}

int tune(const SweepOptions& o) {
  const std::string path = shapes_path(o);
  const bool grouped = is_grouped_shapes(path);
  const std::vector<GemmShape> shapes = grouped ? std::vector<GemmShape>{} : read_gemm_shapes(path);
  const std::vector<GroupedShape> grouped_shapes =
      grouped ? read_grouped_shapes(path) : std::vector<GroupedShape>{};
  const Shard shard = shard_of(o);
  const std::vector<GemmShape> mine = shard.take(shapes);
  const std::vector<GroupedShape> grouped_mine = shard.take(grouped_shapes);
  const GemmProblem problem = problem_of(o);
  if (grouped && problem.scale == ScaleMode::group)
    throw_invalid("--scale", "group",
                  "grouped (mixture-of-experts) shapes take tensor, rowwise or block scaling");
  if (grouped && problem.bias)
    throw_invalid("--bias", "with grouped shapes",
                  "grouped (mixture-of-experts) GEMMs have no bias");
  const RuntimeOptions ropt = runtime_options(o);
  if (ropt.db_path.empty()) throw_invalid("--db", "<empty>", "tuning needs a database path (FP8JIT_DB or --db)");
  // An existing database is checked (someone else's file is refused) before any sweep; a new
  // one is created only by the first result.
  if (TuningDb::exists(ropt.db_path)) TuningDb check(ropt.db_path);
  if (shard.count > 1)
    fmt::print(stderr, "fp8jit tune: shard {}/{}{}: {} of {} shapes\n", shard.index, shard.count, shard.from,
               mine.size() + grouped_mine.size(), shapes.size() + grouped_shapes.size());
  if (o.dry_run) {
    for (const GemmShape& s : mine) fmt::print("{},{},{}\n", s.m, s.n, s.k);
    for (const GroupedShape& s : grouped_mine)
      fmt::print("{},{},{},{},{},{}\n", to_string(s.layout), s.groups, s.m, s.n, s.k, s.expected_m);
    return 0;
  }
  require_gpu();
  if (o.all_gpus) {
    const int devices = driver::device_count();
    return tune_on_all_gpus(child_args(o, ropt.db_path, devices), devices);
  }
  if (o.device >= 0) driver::use_device(o.device);
  TuneOptions topt;
  topt.jobs = resolve_jobs(o.jobs);
  topt.top_k = static_cast<std::size_t>(o.top_k);
  Runtime rt(ropt);
  std::vector<TunedRow> rows;
  const std::size_t count = grouped ? grouped_mine.size() : mine.size();
  {
    Progress progress(fmt::format("tuning {} shapes", count), count);
    for (const GemmShape& s : mine) rows.push_back(tune_shape(rt, s, problem, topt, progress));
    for (std::size_t i = 0; i < grouped_mine.size(); ++i)
      rows.push_back(tune_grouped_shape(rt, grouped_mine[i], problem, topt, progress,
                                        static_cast<unsigned>(i + 1)));
  }
  return print_results(grouped ? "layout | groups | M | expected M | N | K" : "M | N | K", rows,
                       ropt.db_path);
}

int precompile(const SweepOptions& o) {
  if (!o.model.empty()) {
    if (!o.suite.empty() || !o.shapes.empty())
      throw_invalid("--model", printable(o.model), "takes the shapes from the model: give no --suite or --shapes");
    if (o.bias)
      throw_invalid(
          "--bias", "with --model",
          "the model's GEMMs are derived without a bias; precompile biased GEMMs from --shapes");
    const std::vector<std::int64_t> ms = parse_m_list(o.ms);
    Runtime rt(runtime_options(o));
    return precompile_model(rt, o.model, ms, o.tp, problem_of(o), resolve_jobs(o.jobs));
  }
  const std::string path = shapes_path(o);
  if (is_grouped_shapes(path))
    throw_invalid(o.shapes.empty() ? "--suite" : "--shapes", o.shapes.empty() ? o.suite : o.shapes,
                  "holds grouped (mixture-of-experts) shapes, which precompile does not take "
                  "(m,n,k rows); `fp8jit "
                  "tune` compiles their candidates, and the runtime compiles a grouped kernel on "
                  "its first call");
  const std::vector<GemmShape> shapes = read_gemm_shapes(path);
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
  auto* suite =
      sub->add_option("--suite", o.suite,
                      "a shape suite of bench/shapes (deepseek-v3, square, deepseek-v3-moe, ...)");
  auto* shapes = sub->add_option(
      "--shapes", o.shapes,
      "a CSV of m,n,k rows, or of grouped rows (header layout,groups,m,n,k,expected_m)");
  suite->excludes(shapes);
  add_choice(sub, "--op", o.op, {"gemm"}, "the operation (quantize/dequantize are tuned through the library API)");
  add_choice(sub, "--scale", o.scale, {"block", "rowwise", "tensor", "group"}, "scale mode");
  add_choice(sub, "--out", o.out, {"bf16", "fp16", "fp32"}, "output dtype");
  sub->add_flag("--fast-accum", o.fast_accum, "accumulate in the tensor cores only (tensor and rowwise scaling)");
  sub->add_flag("--bias", o.bias,
                "GEMMs with a bias over the columns, as a Linear's forward GEMM (dense shapes)")
      ->disable_flag_override();  // --bias=2x is refused, not read as a count
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
  t->add_option("--shard", to->shard,
                "i/n: tune every n-th shape from the i-th (default: the rank of srun or mpirun, else all); merge "
                "the databases with `fp8jit db import`");
  t->add_flag("--dry-run", to->dry_run, "print the shapes this shard would tune and stop (no GPU needed)");
  auto* device = t->add_option("--device", to->device, "the GPU to tune on (default: device 0)")->check(CLI::Range(0, 1023));
  auto* all = t->add_flag("--all-gpus", to->all_gpus,
                          "one process per visible GPU, each on its shard, all into the one database");
  all->excludes(device);
  all->excludes(t->get_option("--shard"));
  on_run(t, [=] { return tune(*to); });

  auto* p = app.add_subcommand("precompile", "compile ahead of serving the kernels the runtime will pick (no GPU needed)");
  auto po = std::make_shared<SweepOptions>();
  add_sweep_options(p, *po);
  p->add_option("--model", po->model,
                "a Hugging Face config.json (DeepSeek-V3, Qwen3, Qwen3-MoE, Llama, ...): every GEMM of the model "
                "for each --m, experts in both grouped layouts, and the activation quantize");
  p->add_option("--m", po->ms, "--model: batch sizes, e.g. 1-4096 (every M) or 1,2,4,8")->capture_default_str();
  p->add_option("--gpu", po->gpu,
                "without a GPU: the one to select for (h100-sxm default, h100-pcie, h100-nvl, h200, h20, h800, "
                "h800-pcie, or an SM count); a present GPU is always used");
  p->add_option("--tp", po->tp, "--model: tensor-parallel ranks (N or K split, experts spread)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  on_run(p, [=] { return precompile(*po); });
}

}  // namespace fp8jit::cli
