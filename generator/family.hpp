// A kernel family: its config space (named parameters with allowed values), the rules that tie
// parameters together, and how a valid spec becomes a name and CUDA source.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fp8jit/kernel_spec.hpp"

namespace fp8jit {

struct ParamDef {
  std::string name;
  bool is_config;  // false: part of the problem (what is computed); true: how it is computed
  std::vector<ParamValue> allowed;
  std::string doc;
  // A parameter added after specs were first saved: JSON without it reads as this value, so specs
  // written before it existed still parse (they name the same kernel as before). A problem
  // parameter at this value is also left out of the JSON, the tuning key and the space hash
  // (elided()): the problems that existed before it keep their hashes, cache files and tuned rows.
  std::optional<ParamValue> absent_means = std::nullopt;
  // A config parameter elided like a problem one at its absent_means value: one added after
  // configs were tuned and cached, whose old value names the kernels built before it.
  bool elide_config = false;
  // A config parameter that the runtime derives from the shape (a build choice, such as the
  // epilogue), which sweeps do not walk and the tuning space hash leaves out.
  bool build_choice = false;
};

// A parameter at its absent_means value that is not written (see ParamDef::absent_means).
inline bool elided(const ParamDef& def, const ParamValue& v) {
  return (!def.is_config || def.elide_config) && def.absent_means && *def.absent_means == v;
}

struct FamilyDef {
  std::string name;
  std::string header;  // the device header the generated source includes
  std::vector<ParamDef> params;
  // Cross-parameter rules: "" when the (individually valid) spec is valid, else the reason.
  std::string (*check)(const KernelSpec&);
  std::string (*name_of)(const KernelSpec&);
  std::string (*render_body)(const KernelSpec&);  // everything after the #include
  std::vector<std::string> (*entry_points)(const KernelSpec&);
  int (*dynamic_smem)(const KernelSpec&);
  int (*block_threads)(const KernelSpec&);
  int (*cluster_size)(const KernelSpec&) = nullptr;  // CTAs per cluster of the main kernel; null: 1
  // Optional: calls `emit` with every valid config of `problem` (its problem params set), in the
  // generic walk's order and with the same verdicts as `check`. For a family whose space is too
  // large to check spec by spec from the string-keyed map (gemm: 8 million combinations would
  // take seconds on every `fp8jit list` and enumeration); null: the generic walk.
  void (*walk_configs)(const KernelSpec& problem,
                       const std::function<void(const KernelSpec&)>& emit) = nullptr;
  // Part of the tuning database's key (with the params): bump it by hand when a change to the
  // family's templates or codegen changes a config's speed or what a config means, so that rows
  // tuned for the old kernels are no longer used and get re-tuned. Edits that leave every
  // kernel's speed alone (comments, renames, refactors) keep it, and so keep every tuned row.
  int generation = 1;
  // The oldest GPU architecture its kernels compile for, and whether they need Hopper's
  // arch-specific features (wgmma, TMA, setmaxnreg: sm_90a, which no other architecture runs).
  // The elementwise families need FP8 conversions only: sm_89 (Ada) and later.
  int min_arch = 90;
  bool sm90a_only = true;
};

// "" where `family` compiles for sm_<number>[a], else why not.
std::string arch_refusal(const FamilyDef& family, int number, bool arch_specific);

const std::vector<const FamilyDef*>& all_families();
const FamilyDef& find_family(std::string_view name);  // throws naming the known families
// The family's parameter of that name, or null.
const ParamDef* find_param(const FamilyDef& family, std::string_view name);

// Every valid spec of the family (problem x config), in a fixed order: problems outermost, each
// parameter's values in their declared order.
std::vector<KernelSpec> enumerate_specs(const FamilyDef& family);
// spec_to_json without validate_spec: for specs that enumerate_specs or for_each_spec made, which
// they checked already (a second check would double the cost of printing the gemm space).
std::string spec_to_json_unchecked(const KernelSpec& spec);
// The same specs in the same order, one at a time: for spaces too large to hold at once.
void for_each_spec(const FamilyDef& family, const std::function<void(const KernelSpec&)>& emit);
// Parameter values to keep to (`fp8jit list --where`): a spec matches where each named parameter
// has its value, a parameter held absent reading as its absent_means; a name the family does not
// have matches nothing.
using SpecFilter = std::map<std::string, ParamValue>;
// Whether the family has every parameter `where` names (else no spec of it can match).
bool has_params(const FamilyDef& family, const SpecFilter& where);
bool spec_matches(const FamilyDef& family, const KernelSpec& spec, const SpecFilter& where);
// for_each_spec's specs that match `where`; problems that cannot match are not walked.
void for_each_spec(const FamilyDef& family, const SpecFilter& where,
                   const std::function<void(const KernelSpec&)>& emit);
// Every valid config for the problem parameters of `problem_spec` (its config params ignored).
std::vector<KernelSpec> enumerate_configs(const FamilyDef& family, const KernelSpec& problem_spec);

// A fixed, spread subset of at most about `n` valid specs: evenly spaced over enumerate_specs(),
// plus, for every config parameter, a spec at its smallest and at its largest valid value, and
// for every problem parameter a spec with each of its values.
std::vector<KernelSpec> spread_sample(const FamilyDef& family, std::size_t n);

std::string param_to_string(const ParamValue& v);
// The value as JSON (an integer or a string), for either flavour of nlohmann's JSON.
template <class Json>
Json param_to_json(const ParamValue& v) {
  if (const auto* i = std::get_if<std::int64_t>(&v)) return *i;
  return std::get<std::string>(v);
}
// For error messages: strings quoted and cut to a bounded length.
std::string param_repr(const ParamValue& v);

// Defined by the families.
const FamilyDef& quantize_family();
const FamilyDef& dequantize_family();
const FamilyDef& gemm_family();

}  // namespace fp8jit
