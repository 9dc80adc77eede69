// info, list, emit, compile, compile-all: everything that needs no GPU.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>

#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "common/file_io.hpp"
#include "runtime/jit/headers.hpp"
#include "runtime/jit/kernel_cache.hpp"
#include "runtime/jit/nvrtc.hpp"
#include "runtime/sass/gemm_post_passes.hpp"
#include "common/parallel.hpp"
#include "common/settings.hpp"
#include "tools/cli.hpp"
#include "tools/options.hpp"
#include "tools/progress.hpp"

namespace fp8jit::cli {
namespace {

// Families with a huge space (gemm: thousands of variants of a few seconds each) are compiled
// by a fixed spread sample unless --sample 0 asks for everything.
constexpr std::size_t kFullCompileLimit = 3000;

std::vector<std::string> family_names() {
  std::vector<std::string> out;
  for (const FamilyDef* f : all_families()) out.push_back(f->name);
  return out;
}

// A comma-separated list of known family names.
CLI::Validator families_validator() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        const auto names = family_names();
        const auto items = split_list(text);
        if (items.empty()) return "expected one or more of " + join(names, ", ");
        for (const std::string& f : items)
          if (std::find(names.begin(), names.end(), f) == names.end())
            return fmt::format("unknown family \"{}\" (known: {})", printable(f, 40), join(names, ", "));
        return "";
      },
      "FAMILY[,FAMILY...]");
}

std::vector<const FamilyDef*> selected_families(const std::string& list) {
  if (list.empty()) return all_families();
  std::vector<const FamilyDef*> out;
  for (const std::string& name : split_list(list)) out.push_back(&find_family(name));
  return out;
}

int info() {
  const Settings& s = Settings::get();
  if (driver::available()) {
    const driver::DeviceInfo d = driver::device_info(driver::current_device());
    fmt::print("gpu:        {} (compute capability {}.{}, {} SMs, {} MiB, L2 {} KiB)\n", d.name, d.cc_major,
               d.cc_minor, d.sm_count, d.total_mem >> 20, d.l2_bytes >> 10);
    fmt::print("driver:     CUDA {}.{}\n", d.driver_version / 1000, d.driver_version % 1000 / 10);
  } else {
    fmt::print("gpu:        none ({})\n", driver::unavailable_reason());
  }
  fmt::print("nvrtc:      {}\n", nvrtc_version());
  fmt::print("cache dir:  {}{}\n", printable(s.cache_dir), s.disk_cache ? "" : " (disabled)");
  fmt::print("tuning db:  {}\n", printable(s.db_path));
  fmt::print("headers:    {} embedded, hash {:016x}\n", embedded_headers().names.size(), embedded_headers().hash);
  fmt::print("settings:\n");
  for (const auto& [name, doc] : Settings::documented()) fmt::print("  {:<24} {}\n", name, doc);
  return 0;
}

// The config spaces as one JSON document: what `list` prints, for programs.
nlohmann::ordered_json space_json(const FamilyDef& f, std::size_t valid,
                                  const std::string& where) {
  nlohmann::ordered_json params = nlohmann::ordered_json::array();
  for (const ParamDef& p : f.params) {
    nlohmann::ordered_json allowed = nlohmann::ordered_json::array();
    for (const ParamValue& v : p.allowed) allowed.push_back(param_to_json<nlohmann::ordered_json>(v));
    params.push_back({{"name", p.name},
                      {"kind", p.is_config ? "config" : "problem"},
                      {"allowed", std::move(allowed)},
                      {"doc", p.doc}});
  }
  nlohmann::ordered_json out = {
      {"family", f.name}, {"header", f.header}, {"valid_variants", valid}};
  if (!where.empty()) out["where"] = where;
  out["params"] = std::move(params);
  return out;
}

void print_space(const FamilyDef& f, std::size_t valid, const std::string& where) {
  fmt::print("{} ({} valid variants{}, header {})\n", f.name, valid,
             where.empty() ? "" : " with " + where, f.header);
  for (const ParamDef& p : f.params) {
    std::vector<std::string> vals;
    for (const auto& v : p.allowed) vals.push_back(param_to_string(v));
    fmt::print("  {:<7} {:<12} {{{}}}  {}\n", p.is_config ? "config" : "problem", p.name,
               fmt::join(vals, ", "), p.doc);
  }
}

// --where KEY=VALUE[,KEY=VALUE...] read against the parameters of `families`: "" and `out` set,
// or what is wrong with it.
std::string parse_where(const std::string& text, const std::vector<const FamilyDef*>& families,
                        SpecFilter* out) {
  std::vector<std::string> known;
  for (const FamilyDef* f : families)
    for (const ParamDef& d : f->params)
      if (!d.build_choice && std::find(known.begin(), known.end(), d.name) == known.end())
        known.push_back(d.name);
  const std::vector<std::string> items = split_list(text);
  if (items.empty()) return "expected KEY=VALUE[,KEY=VALUE...]";
  for (const std::string& item : items) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      return fmt::format("\"{}\": expected KEY=VALUE", printable(item, 40));
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    std::vector<std::string> allowed;
    std::optional<ParamValue> match;
    bool build_choice = false;
    for (const FamilyDef* f : families)
      for (const ParamDef& d : f->params) {
        if (d.name != key) continue;
        build_choice = build_choice || d.build_choice;
        for (const ParamValue& v : d.allowed) {
          const std::string shown = param_to_string(v);
          if (shown == value) match = v;
          if (std::find(allowed.begin(), allowed.end(), shown) == allowed.end())
            allowed.push_back(shown);
        }
      }
    if (build_choice)
      return fmt::format("{} is chosen by the runtime from the shape; specs are listed without it",
                         key);
    if (allowed.empty())
      return fmt::format("unknown parameter \"{}\" (known: {})", printable(key, 40),
                         join(known, ", "));
    if (!match)
      return fmt::format("{} = \"{}\" is not one of {{{}}}", key, printable(value, 40),
                         join(allowed, ", "));
    if (!out->emplace(key, *match).second) return fmt::format("{} given twice", key);
  }
  return "";
}

// --where against every family (list() checks it again against the selected ones).
CLI::Validator where_validator() {
  return CLI::Validator(
      [](std::string& text) {
        SpecFilter where;
        return parse_where(text, all_families(), &where);
      },
      "KEY=VALUE[,KEY=VALUE...]");
}

enum class ListFormat { text, json, specs };

int list(const std::string& families, const std::string& where_text, ListFormat format) {
  const std::vector<const FamilyDef*> selected = selected_families(families);
  SpecFilter where;
  if (!where_text.empty())
    if (const std::string why = parse_where(where_text, selected, &where); !why.empty())
      throw Error(ErrorKind::invalid_argument, "--where: " + why);
  nlohmann::ordered_json doc = nlohmann::ordered_json::array();
  for (const FamilyDef* f : selected) {
    if (!has_params(*f, where)) continue;  // no spec of it can match: not shown
    // Streamed: the gemm space's specs (about a million) are never all held at once. The walk
    // checked each spec, so it is printed without a second check.
    std::size_t count = 0;
    for_each_spec(*f, where, [&](const KernelSpec& s) {
      if (format == ListFormat::specs) fmt::print("{}\n", spec_to_json_unchecked(s));
      ++count;
    });
    if (format == ListFormat::text) print_space(*f, count, where_text);
    if (format == ListFormat::json) doc.push_back(space_json(*f, count, where_text));
  }
  if (format == ListFormat::json) fmt::print("{}\n", doc.dump(2));
  return 0;
}

struct CompileOptions {
  std::string spec, ptx, cubin, arch = "sm_90a";
};

int compile(const CompileOptions& o) {
  const KernelSpec spec = read_spec(o.spec);
  const GpuArch arch = parse_gpu_arch(o.arch);
  if (const std::string why =
          arch_refusal(find_family(spec.family), arch.number, arch.arch_specific);
      !why.empty())
    throw Error(ErrorKind::invalid_argument, fmt::format("--arch {}: {}", arch.name(), why));
  const std::string name = spec_name(spec), source = render_source(spec);
  OutputFiles outputs;  // checked now, written only when every compilation succeeded
  CompileResult cubin = nvrtc_compile(name, source, CompileTarget::cubin, arch);
  // The default runtime's post-passes: the bytes it would load.
  const std::vector<CubinPostPass> passes =
      gemm_post_passes(RuntimeOptions::from_settings().ffma_reuse);
  const std::vector<std::string> reports = run_post_passes(passes, spec.family, cubin.binary);
  if (!o.cubin.empty()) outputs.add(o.cubin, cubin.binary);
  if (!o.ptx.empty())
    outputs.add(o.ptx, nvrtc_compile(name, source, CompileTarget::ptx, arch).binary);
  outputs.commit();
  fmt::print("{}: {} cubin {} bytes, compiled in {:.3f} s\n", name, arch.name(),
             cubin.binary.size(), cubin.seconds);
  for (const std::string& report : reports) fmt::print("post-pass {}\n", report);
  if (!cubin.log.empty()) fmt::print("nvrtc log:\n{}\n", cubin.log);
  return 0;
}

int compile_all(const std::string& families, int jobs, std::int64_t sample) {
  int failures = 0;
  for (const FamilyDef* f : selected_families(families)) {
    std::vector<KernelSpec> specs = enumerate_specs(*f);
    const std::size_t total = specs.size();
    if (sample > 0 && total > kFullCompileLimit) specs = spread_sample(*f, static_cast<std::size_t>(sample));
    std::mutex mutex;
    double total_seconds = 0, max_seconds = 0;
    std::size_t bytes = 0;
    const auto t0 = std::chrono::steady_clock::now();
    Progress progress(fmt::format("compiling {} {} kernels", specs.size(), f->name), specs.size());
    parallel_for(specs.size(), resolve_jobs(jobs), [&](std::size_t i) {
      const std::string name = spec_name(specs[i]);
      try {
        const CompileResult r = nvrtc_compile(name, render_source(specs[i]), CompileTarget::cubin);
        std::lock_guard<std::mutex> lock(mutex);
        total_seconds += r.seconds;
        max_seconds = std::max(max_seconds, r.seconds);
        bytes += r.binary.size();
      } catch (const std::exception& e) {
        std::lock_guard<std::mutex> lock(mutex);
        ++failures;
        fmt::print(stderr, "FAILED {}: {}\n", name, e.what());
      }
      progress.advance(1, name);
    });
    progress.finish();
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    fmt::print("{:<11} {:>5} of {} variants compiled for sm_90a in {:.1f} s on {} threads: mean {:.3f} s, max {:.3f} s, "
               "{:.1f} MiB of cubins\n",
               f->name, specs.size(), total, wall, resolve_jobs(jobs), total_seconds / std::max<std::size_t>(1, specs.size()),
               max_seconds, bytes / 1048576.0);
  }
  fmt::print("{}\n", failures ? fmt::format("{} variants FAILED", failures) : std::string("all variants compiled"));
  return failures ? 1 : 0;
}

}  // namespace

KernelSpec read_spec(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r\n");
  if (first != std::string::npos && (s[first] == '{' || s[first] == '['))
    return spec_from_json(s);  // spec_from_json names what a non-object is
  return spec_from_json(read_regular_file(s, "--spec", std::size_t{1} << 20));
}

void add_kernel_commands(CLI::App& app) {
  on_run(app.add_subcommand("info", "GPU, driver, NVRTC, cache and settings"), info);

  auto* l = app.add_subcommand("list", "kernel families and their config spaces");
  auto families = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false), specs = std::make_shared<bool>(false);
  l->add_option("--family", *families, "only these families, comma-separated")->check(families_validator());
  auto* json_flag = l->add_flag("--json", *json, "the config spaces as one JSON document");
  l->add_flag("--specs", *specs,
              "every valid spec as JSON, one per line (the gemm family has about a million: "
              "narrow it with --family)")
      ->excludes(json_flag);
  auto where = std::make_shared<std::string>();
  l->add_option("--where", *where,
                "only specs with these parameter values, e.g. scale=block,block_m=128 (counts and "
                "--specs alike)")
      ->check(where_validator());
  on_run(l, [=] {
    return list(*families, *where,
                *specs ? ListFormat::specs : *json ? ListFormat::json : ListFormat::text);
  });

  auto* e = app.add_subcommand("emit", "print the generated CUDA source of a spec");
  auto spec = std::make_shared<std::string>();
  e->add_option("--spec", *spec, "the spec as JSON, or a file holding it (`fp8jit list --specs` prints every valid one)")
      ->required();
  on_run(e, [=] {
    fmt::print("{}", render_source(read_spec(*spec)));
    return 0;
  });

  auto* c = app.add_subcommand("compile",
                               "NVRTC-compile a spec for sm_90a, or another arch (no GPU needed)");
  auto co = std::make_shared<CompileOptions>();
  c->add_option("--spec", co->spec, "the spec as JSON, or a file holding it")->required();
  c->add_option(
       "--arch", co->arch,
       "target architecture: sm_90a (the runtime's), or for quantize and dequantize any "
       "sm_<number> "
       "from sm_89 this NVRTC supports (e.g. sm_89, sm_120); the PTX is for compute_<number>")
      ->capture_default_str();
  c->add_option("--cubin", co->cubin, "write the cubin (after the post-passes the runtime applies) here");
  c->add_option("--ptx", co->ptx, "write the PTX here");
  on_run(c, [=] { return compile(*co); });

  auto* a = app.add_subcommand("compile-all", "compile every variant of the chosen families (a spread sample of gemm)");
  auto all_families = std::make_shared<std::string>();
  auto jobs = std::make_shared<int>(1);
  auto sample = std::make_shared<std::int64_t>(96);
  a->add_option("--family", *all_families, "families, comma-separated (default: all)")->check(families_validator());
  add_jobs(a, *jobs);
  a->add_option("--sample", *sample, "variants of a space over 3000 to compile, spread over it (0: every variant)")
      ->check(integer_in(0, 1000000))
      ->capture_default_str();
  on_run(a, [=] { return compile_all(*all_families, *jobs, *sample); });
}

}  // namespace fp8jit::cli
