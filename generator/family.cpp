#include "generator/family.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <functional>

#include "fp8jit/error.hpp"

namespace fp8jit {

const std::vector<const FamilyDef*>& all_families() {
  static const std::vector<const FamilyDef*> families = {&quantize_family(), &dequantize_family(),
                                                         &gemm_family()};
  return families;
}

const FamilyDef& find_family(std::string_view name) {
  std::string known;
  for (const FamilyDef* f : all_families()) {
    if (f->name == name) return *f;
    known += (known.empty() ? "" : ", ") + f->name;
  }
  throw_invalid("family", std::string(name), "known families: " + known);
}

const ParamDef* find_param(const FamilyDef& family, std::string_view name) {
  for (const ParamDef& def : family.params)
    if (def.name == name) return &def;
  return nullptr;
}

std::string arch_refusal(const FamilyDef& family, int number, bool arch_specific) {
  if (family.sm90a_only && !(number == 90 && arch_specific))
    return fmt::format("{} kernels need sm_90a (Hopper's wgmma, TMA and setmaxnreg)", family.name);
  if (number < family.min_arch)
    return fmt::format("{} kernels need sm_{} or later (FP8 conversions)", family.name,
                       family.min_arch);
  return {};
}

std::string param_to_string(const ParamValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  return std::get<std::string>(v);
}

std::string param_repr(const ParamValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return std::to_string(*i);
  const std::string& s = std::get<std::string>(v);
  // Quoted and cut, so "8" reads differently from 8 and a hostile string stays short.
  return "\"" + (s.size() > 64 ? s.substr(0, 61) + "..." : s) + "\"";
}

namespace {

// Walks the cartesian product of the allowed values of the parameters `vary` picks, depth first
// in the family's parameter order, calling `emit` for every combination (unchecked).
void walk(const FamilyDef& family, KernelSpec& spec, std::size_t index,
          bool (*vary)(const ParamDef&), const std::function<void(const KernelSpec&)>& emit) {
  if (index == family.params.size()) {
    emit(spec);
    return;
  }
  const ParamDef& def = family.params[index];
  if (!vary(def)) {
    walk(family, spec, index + 1, vary, emit);
    return;
  }
  for (const ParamValue& v : def.allowed) {
    spec.params[def.name] = v;
    walk(family, spec, index + 1, vary, emit);
  }
}

bool is_problem(const ParamDef& def) {
  return !def.is_config;
}
bool is_config(const ParamDef& def) {
  return def.is_config;
}

// Every valid config of `problem`: the family's own walk where it has one, else every config
// combination through `check`.
void walk_valid_configs(const FamilyDef& family, const KernelSpec& problem,
                        const std::function<void(const KernelSpec&)>& emit) {
  if (family.walk_configs) {
    family.walk_configs(problem, emit);
    return;
  }
  KernelSpec spec = problem;
  walk(family, spec, 0, is_config, [&](const KernelSpec& s) {
    if (family.check(s).empty()) emit(s);
  });
}

}  // namespace

void for_each_spec(const FamilyDef& family, const std::function<void(const KernelSpec&)>& emit) {
  KernelSpec problem{family.name, {}};
  // Problems outermost, as the parameters are declared: the same order as one walk over all.
  walk(family, problem, 0, is_problem,
       [&](const KernelSpec& p) { walk_valid_configs(family, p, emit); });
}

bool has_params(const FamilyDef& family, const SpecFilter& where) {
  return std::all_of(where.begin(), where.end(),
                     [&](const auto& kv) { return find_param(family, kv.first) != nullptr; });
}

bool spec_matches(const FamilyDef& family, const KernelSpec& spec, const SpecFilter& where) {
  for (const auto& [name, value] : where) {
    const ParamDef* def = find_param(family, name);
    if (!def) return false;
    const auto it = spec.params.find(name);
    if (it != spec.params.end() ? it->second != value : def->absent_means != value) return false;
  }
  return true;
}

void for_each_spec(const FamilyDef& family, const SpecFilter& where,
                   const std::function<void(const KernelSpec&)>& emit) {
  if (!has_params(family, where)) return;
  // The problem part decides which problems are walked; each config then checks the rest.
  SpecFilter problem_part, config_part;
  for (const auto& [name, value] : where)
    (find_param(family, name)->is_config ? config_part : problem_part).emplace(name, value);
  KernelSpec problem{family.name, {}};
  walk(family, problem, 0, is_problem, [&](const KernelSpec& p) {
    if (!spec_matches(family, p, problem_part)) return;
    walk_valid_configs(family, p, [&](const KernelSpec& s) {
      if (spec_matches(family, s, config_part)) emit(s);
    });
  });
}

std::vector<KernelSpec> enumerate_specs(const FamilyDef& family) {
  std::vector<KernelSpec> out;
  for_each_spec(family, [&](const KernelSpec& s) { out.push_back(s); });
  return out;
}

std::vector<KernelSpec> spread_sample(const FamilyDef& family, std::size_t n) {
  const std::vector<KernelSpec> all = enumerate_specs(family);
  if (all.size() <= n || n == 0) return all;
  std::vector<bool> take(all.size(), false);
  for (std::size_t i = 0; i < n; ++i) take[i * all.size() / n] = true;
  for (const ParamDef& def : family.params) {
    if (!def.is_config) {
      // Every problem value (scale mode, output type, ...), by the middle spec that has it: the
      // even spacing alone can miss a value once the config space grows.
      for (const ParamValue& value : def.allowed) {
        std::vector<std::size_t> with;
        for (std::size_t i = 0; i < all.size(); ++i)
          if (all[i].params.at(def.name) == value) with.push_back(i);
        if (!with.empty()) take[with[with.size() / 2]] = true;
      }
      continue;
    }
    if (def.build_choice) continue;  // the walk does not vary it
    // First spec at the smallest and at the largest value that occurs among valid specs (a
    // parameter held absent at its default reads as that default).
    const auto value = [&](std::size_t i) -> const ParamValue& {
      const auto it = all[i].params.find(def.name);
      return it != all[i].params.end() ? it->second : *def.absent_means;
    };
    std::size_t lo = 0, hi = 0;
    for (std::size_t i = 0; i < all.size(); ++i) {
      if (value(i) < value(lo)) lo = i;
      if (value(hi) < value(i)) hi = i;
    }
    take[lo] = take[hi] = true;
  }
  std::vector<KernelSpec> out;
  for (std::size_t i = 0; i < all.size(); ++i)
    if (take[i]) out.push_back(all[i]);
  return out;
}

std::vector<KernelSpec> enumerate_configs(const FamilyDef& family, const KernelSpec& problem_spec) {
  std::vector<KernelSpec> out;
  KernelSpec spec{family.name, {}};
  for (const ParamDef& def : family.params) {
    if (def.is_config) continue;
    auto it = problem_spec.params.find(def.name);
    if (it == problem_spec.params.end())
      throw_invalid(def.name, "<missing>", "problem parameter required");
    spec.params[def.name] = it->second;
  }
  walk_valid_configs(family, spec, [&](const KernelSpec& s) { out.push_back(s); });
  return out;
}

}  // namespace fp8jit
