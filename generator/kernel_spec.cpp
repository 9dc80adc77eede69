#include "fp8jit/kernel_spec.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <nlohmann/json.hpp>

#include "fp8jit/error.hpp"
#include "generator/family.hpp"
#include "common/hash.hpp"

namespace fp8jit {

using nlohmann::json;

std::int64_t KernelSpec::i(const std::string& key) const {
  auto it = params.find(key);
  if (it == params.end() || !std::holds_alternative<std::int64_t>(it->second))
    throw_invalid(key, it == params.end() ? "<missing>" : param_to_string(it->second),
                  "integer parameter required by family '" + family + "'");
  return std::get<std::int64_t>(it->second);
}

const std::string& KernelSpec::s(const std::string& key) const {
  auto it = params.find(key);
  if (it == params.end() || !std::holds_alternative<std::string>(it->second))
    throw_invalid(key, it == params.end() ? "<missing>" : param_to_string(it->second),
                  "string parameter required by family '" + family + "'");
  return std::get<std::string>(it->second);
}

namespace {

std::string allowed_list(const ParamDef& def) {
  std::string out;
  for (const ParamValue& v : def.allowed) out += (out.empty() ? "" : ", ") + param_to_string(v);
  return "one of {" + out + "}";
}

}  // namespace

void validate_spec(const KernelSpec& spec) {
  const FamilyDef& family = find_family(spec.family);
  for (const ParamDef& def : family.params) {
    auto it = spec.params.find(def.name);
    if (it == spec.params.end() && def.elide_config) continue;  // absent: its absent_means
    if (it == spec.params.end())
      throw_invalid(spec.family + "." + def.name, "<missing>", allowed_list(def));
    if (std::find(def.allowed.begin(), def.allowed.end(), it->second) == def.allowed.end())
      throw_invalid(spec.family + "." + def.name, param_repr(it->second), allowed_list(def));
  }
  for (const auto& [name, value] : spec.params) {
    if (!find_param(family, name)) throw_invalid(spec.family + "." + name, param_repr(value), "unknown parameter");
  }
  if (std::string why = family.check(spec); !why.empty())
    throw Error(ErrorKind::invalid_argument, "invalid " + spec.family + " spec: " + why);
}

std::string spec_name(const KernelSpec& spec) {
  validate_spec(spec);
  return find_family(spec.family).name_of(spec);
}

namespace {

json spec_json(const KernelSpec& spec) {
  const FamilyDef& family = find_family(spec.family);
  json problem = json::object(), config = json::object();
  for (const ParamDef& def : family.params) {
    auto it = spec.params.find(def.name);
    if (it == spec.params.end() || elided(def, it->second)) continue;
    (def.is_config ? config : problem)[def.name] = param_to_json<json>(it->second);
  }
  return json{{"family", spec.family}, {"problem", problem}, {"config", config}};
}

}  // namespace

std::string spec_to_json(const KernelSpec& spec, int indent) {
  validate_spec(spec);
  return spec_json(spec).dump(indent);
}

std::string spec_to_json_unchecked(const KernelSpec& spec) {
  return spec_json(spec).dump();
}

std::uint64_t spec_hash(const KernelSpec& spec) {
  // nlohmann::json objects sort their keys, so the dump is canonical.
  return stable_hash64(spec_to_json(spec));
}

namespace {

constexpr int kMaxDepth = 4;

// A short, bounded rendering of a JSON value for error messages.
std::string brief(const json& v) {
  if (v.is_object() || v.is_array()) return fmt::format("<{} of {} entries>", v.type_name(), v.size());
  std::string s = v.dump();
  return s.size() > 80 ? s.substr(0, 77) + "..." : s;
}

void read_params(const json& section, const char* where, KernelSpec& spec) {
  if (!section.is_object()) throw_invalid(where, brief(section), "expected a JSON object");
  for (const auto& [key, value] : section.items()) {
    if (value.is_number_unsigned() && value.get<std::uint64_t>() > std::uint64_t(INT64_MAX))
      throw_invalid(std::string(where) + "." + key, brief(value), "integer out of range");
    if (value.is_number_integer()) spec.params[key] = value.get<std::int64_t>();
    else if (value.is_boolean()) spec.params[key] = static_cast<std::int64_t>(value.get<bool>());
    else if (value.is_string()) spec.params[key] = value.get<std::string>();
    else throw_invalid(std::string(where) + "." + key, brief(value), "expected an integer or a string");
  }
}

}  // namespace

KernelSpec spec_from_json(std::string_view text) {
  json j;
  try {
    // NOTE: a spec nests two levels; refusing deeper input while parsing keeps a hostile file
    // from exhausting the stack in the recursive serialiser used by error messages.
    j = json::parse(text, [](int depth, json::parse_event_t, json&) {
      if (depth > kMaxDepth)
        throw Error(ErrorKind::invalid_argument,
                    fmt::format("spec JSON nests deeper than {} levels; a spec is {{family, problem: {{...}}, config: {{...}}}}", kMaxDepth));
      return true;
    });
  } catch (const Error&) {
    throw;
  } catch (const json::exception& e) {  // parse errors and numbers out of range alike
    throw Error(ErrorKind::invalid_argument, std::string("spec is not valid JSON: ") + e.what());
  }
  if (!j.is_object()) throw_invalid("spec", brief(j), "expected a JSON object");
  for (const auto& [key, _] : j.items())
    if (key != "family" && key != "problem" && key != "config")
      throw_invalid("spec." + key, "present", "a spec has only family, problem and config");
  if (!j.contains("family") || !j["family"].is_string())
    throw_invalid("spec.family", brief(j.value("family", json())), "a string naming the family");
  KernelSpec spec{j["family"].get<std::string>(), {}};
  const FamilyDef& family = find_family(spec.family);
  read_params(j.value("problem", json::object()), "problem", spec);
  std::size_t before = spec.params.size();
  read_params(j.value("config", json::object()), "config", spec);
  if (spec.params.size() != before + j.value("config", json::object()).size())
    throw Error(ErrorKind::invalid_argument, "spec: a parameter appears in both problem and config");
  // A parameter must sit in its own section, so the JSON form stays canonical.
  for (const ParamDef& def : family.params) {
    const json& section = j.value(def.is_config ? "config" : "problem", json::object());
    if (spec.params.count(def.name) && !section.contains(def.name))
      throw_invalid(spec.family + "." + def.name, param_to_string(spec.params[def.name]),
                    std::string("belongs in \"") + (def.is_config ? "config" : "problem") + "\"");
  }
  // Elided config parameters are held only where they differ from absent_means, so that a spec
  // read back equals the one written.
  for (const ParamDef& def : family.params) {
    if (def.elide_config) {
      if (const auto it = spec.params.find(def.name);
          it != spec.params.end() && it->second == *def.absent_means)
        spec.params.erase(it);
    } else if (def.absent_means && !spec.params.count(def.name)) {
      spec.params[def.name] = *def.absent_means;
    }
  }
  validate_spec(spec);
  return spec;
}

std::vector<std::string> spec_entry_points(const KernelSpec& spec) {
  validate_spec(spec);
  return find_family(spec.family).entry_points(spec);
}

int spec_dynamic_smem(const KernelSpec& spec) {
  validate_spec(spec);
  return find_family(spec.family).dynamic_smem(spec);
}
int spec_block_threads(const KernelSpec& spec) {
  validate_spec(spec);
  return find_family(spec.family).block_threads(spec);
}
int spec_cluster_size(const KernelSpec& spec) {
  validate_spec(spec);
  const FamilyDef& f = find_family(spec.family);
  return f.cluster_size ? f.cluster_size(spec) : 1;
}

}  // namespace fp8jit
