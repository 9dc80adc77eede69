// What a tuned row's space_hash is computed from, and the re-keying of rows that releases before
// kernel generations keyed by the bytes of the device headers.
#include <fmt/format.h>

#include "autotune/tuning_db_internal.hpp"
#include "common/hash.hpp"
#include "generator/family.hpp"
#include "runtime/jit/headers.hpp"

namespace fp8jit {

namespace {

// The config space: every parameter, whether it is a problem or a config parameter, and its
// allowed values, in order. Changing any of them changes the candidates a sweep tries. A problem
// parameter added with absent_means adds problems without changing the candidates of the old
// ones, so it stays out, and rows tuned before it existed stay valid; so does a config parameter
// elided like one (a build choice the runtime derives from the shape, which sweeps do not walk).
std::uint64_t definition_hash(const FamilyDef& f) {
  std::uint64_t h = stable_hash64(f.name);
  for (const ParamDef& p : f.params) {
    if ((!p.is_config || p.build_choice) && p.absent_means) continue;
    h = stable_hash64(p.name + (p.is_config ? ":c:" : ":p:"), h);
    for (const ParamValue& v : p.allowed) h = stable_hash64(param_to_string(v) + ",", h);
  }
  return h;
}

}  // namespace

std::string tuning_space_hash(const FamilyDef& family) {
  return hex64(
      stable_hash64(fmt::format("generation {}", family.generation), definition_hash(family)));
}

std::string tuning_space_hash(const std::string& family) {
  return tuning_space_hash(find_family(family));
}

namespace tuning_db_detail {

std::string legacy_space_hash(const FamilyDef& family, std::uint64_t headers_hash) {
  return hex64(stable_hash64(hex64(headers_hash), definition_hash(family)));
}

namespace {

// Rows the legacy formula keyed were timed on the kernels before generations were counted: the
// first generation's, so they are re-keyed only while the family is still at it.
constexpr int kFirstGeneration = 1;

// The headers hashes of the last builds keyed by the legacy formula (the templates at commit
// fb3d41a): their templates differ from this build's only in ways that leave every kernel as it
// was, so their rows are the first generation's. This build's own headers count too. Never
// remove one: databases and exports in the field still hold their rows.
constexpr std::uint64_t kLastLegacyHeaders[] = {0x42d186c679048016ULL};

struct Rekey {
  std::string op, from, to;
};

// Every legacy key of a first-generation family with today's config space, and its new key.
const std::vector<Rekey>& legacy_rekeys() {
  static const std::vector<Rekey> rekeys = [] {
    std::vector<std::uint64_t> headers = {embedded_headers().hash};
    for (std::uint64_t h : kLastLegacyHeaders)
      if (h != headers.front()) headers.push_back(h);
    std::vector<Rekey> out;
    for (const FamilyDef* f : all_families())
      if (f->generation == kFirstGeneration)
        for (std::uint64_t h : headers)
          out.push_back({f->name, legacy_space_hash(*f, h), tuning_space_hash(*f)});
    return out;
  }();
  return rekeys;
}

}  // namespace

std::string upgraded_space_hash(std::string_view op, const std::string& hash) {
  for (const Rekey& r : legacy_rekeys())
    if (r.op == op && r.from == hash) return r.to;
  return hash;
}

// UPDATE OR IGNORE: where a row of today's key exists already (only a hand-made file can have
// both), that row stays and the legacy one is left for prune.
void rekey_legacy_rows(sqlite3* db, const std::string& path) {
  for (const Rekey& r : legacy_rekeys())
    Stmt(db, path, "UPDATE OR IGNORE results SET space_hash = ? WHERE op = ? AND space_hash = ?")
        .bind(1, r.to)
        .bind(2, r.op)
        .bind(3, r.from)
        .step();
}

}  // namespace tuning_db_detail

}  // namespace fp8jit
