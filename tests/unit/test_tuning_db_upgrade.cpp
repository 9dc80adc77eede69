// Tuned rows survive upgrades: a row's space hash is the config space and the family's kernel
// generation, not the bytes of the device headers, so editing a template keeps every tuned row and
// bumping a generation orphans them; databases (schema 2) and exports (version 1) of earlier
// releases, keyed by the old formula, are re-keyed; every row says which fp8jit tuned it.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "autotune/lookup.hpp"
#include "autotune/tuning_db.hpp"
#include "autotune/tuning_db_internal.hpp"
#include "fp8jit/fp8jit.h"
#include "generator/family.hpp"
#include "runtime/jit/headers.hpp"
#include "tuning_db_rows.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using namespace tuning_rows;
using tuning_db_detail::legacy_space_hash;

// A family of the test's own: nothing of this build (templates, codegen) is in it, so a pinned
// hash catches any input beyond the config space and the generation.
FamilyDef toy_family() {
  FamilyDef f{};
  f.name = "toy";
  f.params = {{"dtype", false, {std::string("bf16"), std::string("fp16")}, ""},
              {"vec", true, {std::int64_t{4}, std::int64_t{8}}, ""}};
  return f;
}

TEST(TuningSpaceHash, IsTheConfigSpaceAndTheGenerationOnly) {
  const FamilyDef toy = toy_family();
  // Pinned: a change here re-keys every database in the field.
  EXPECT_EQ(tuning_space_hash(toy), "16ec114d144484f1");
  // The formula of releases before generations, pinned with the value their code computed:
  // migration 3 finds their rows only while this holds.
  EXPECT_EQ(legacy_space_hash(toy, 0x0123456789abcdefULL), "d4c1498c6c1d5efc");
  FamilyDef bumped = toy, wider = toy, moved = toy;
  bumped.generation = 2;
  wider.params[1].allowed.push_back(std::int64_t{16});
  moved.params[1].is_config = false;
  for (const FamilyDef* other : {&bumped, &wider, &moved})
    EXPECT_NE(tuning_space_hash(*other), tuning_space_hash(toy));
}

TEST(TuningSpaceHash, TemplateEditsKeepTheKey) {
  const FamilyDef& gemm = gemm_family();
  const std::uint64_t headers = embedded_headers().hash;
  // The old formula: one changed byte in any header (a comment) orphaned every tuned row.
  EXPECT_NE(legacy_space_hash(gemm, headers), legacy_space_hash(gemm, headers ^ 1));
  // Now the header and the codegen are no input at all.
  FamilyDef edited = gemm;
  edited.header = "fp8jit/gemm/edited.cuh";
  edited.render_body = [](const KernelSpec&) { return std::string("// edited\n"); };
  EXPECT_EQ(tuning_space_hash(edited), tuning_space_hash("gemm"));
  for (const FamilyDef* f : all_families()) {
    EXPECT_EQ(tuning_space_hash(f->name), tuning_space_hash(*f));
    EXPECT_EQ(tuning_space_hash(f->name).size(), 16u);
    // Today's keys never coincide with an old row's.
    EXPECT_NE(tuning_space_hash(*f), legacy_space_hash(*f, headers)) << f->name;
  }
}

constexpr std::int64_t kN = 7168, kK = 1536;  // 12 K blocks: 128-row tiles at every M used
constexpr int kSmem = 232448;
// Near the heuristic's tile at M = 3000-4096 (a row stands in for a nearby M only near its cost).
const KernelSpec kTuned = make_gemm_spec(GemmProblem{}, {128, 192, 4, 4});

TuningRecord gemm_record(std::int64_t m, const std::string& space) {
  TuningRecord r = quant_record(kH200, m, kK, 100.0, kTuned, 1);
  r.n = kN, r.space_hash = space;
  return r;
}

// The row as the releases before schema 3 wrote it.
std::vector<Value> v2_row(const TuningRecord& r) {
  return {r.gpu.str(),          r.op,      r.problem_key, r.m,         r.n, r.k, r.space_hash,
          spec_to_json(r.best), r.best_us, r.timings,     r.created_at};
}

class TuningDbUpgrade : public ::testing::Test {
 protected:
  GemmLookup lookup(std::int64_t m) const {
    return lookup_gemm(GemmProblem{}, m, kN, kK, path_, TunePolicy::cached, kH200, kSmem);
  }
  test::TempDir tmp_{"fp8jit_tuning_upgrade"};
  const std::string dir_ = tmp_.path(), path_ = dir_ + "/tuning.sqlite";
};

TEST_F(TuningDbUpgrade, RowsOfAnotherBuildAreUsedUntilTheGenerationIsBumped) {
  // A build whose gemm headers and codegen differ from this one's, same generation: its row is
  // this build's.
  FamilyDef edited = gemm_family();
  edited.header = "fp8jit/gemm/edited.cuh";
  TuningDb(path_).put(gemm_record(4096, tuning_space_hash(edited)));
  EXPECT_EQ(lookup(4096).source, LookupSource::exact);
  EXPECT_EQ(lookup(4096).spec, kTuned);
  EXPECT_EQ(lookup(3000).source, LookupSource::nearest_m);

  // The next generation does not use it (and this one does not use the next one's rows).
  FamilyDef next = gemm_family();
  next.generation = gemm_family().generation + 1;
  TuningDb db(path_);
  const std::string problem = problem_key(kTuned);
  EXPECT_FALSE(db.get_exact(kH200, "gemm", problem, 4096, kN, kK, tuning_space_hash(next)));
  EXPECT_FALSE(db.get_nearest_m(kH200, "gemm", problem, 3000, kN, kK, tuning_space_hash(next)));
  db.put(gemm_record(3500, tuning_space_hash(next)));
  EXPECT_EQ(lookup(3500).source, LookupSource::nearest_m);  // 4096's row, not the closer 3500
  EXPECT_EQ(lookup(3500).spec, kTuned);
  EXPECT_EQ(db.prune({{"gemm", tuning_space_hash("gemm")}}), 1u);
}

TEST_F(TuningDbUpgrade, MigrationFromVersion2KeepsTheCurrentSpacesRows) {
  const std::uint64_t headers = embedded_headers().hash;
  const std::string older = legacy_space_hash(gemm_family(), headers ^ 1);
  {
    RawDb raw(path_);
    raw.exec(kV2Schema);
    raw.insert(v2_row(gemm_record(4096, legacy_space_hash(gemm_family(), headers))));
    raw.insert(v2_row(gemm_record(64, older)));  // tuned with other headers: stays orphaned
    // The last release keyed this way: its templates make this build's kernels.
    raw.insert(v2_row(gemm_record(8192, legacy_space_hash(gemm_family(), 0x42d186c679048016))));
    raw.insert(raw_row(kH200.str(), std::int64_t{128}, spec_to_json(kQuant), 7.5, "[]",
                       kQuantProblem, legacy_space_hash(quantize_family(), headers)));
  }
  EXPECT_EQ(lookup(4096).source, LookupSource::exact);  // the lookup's open migrates
  EXPECT_EQ(lookup(4096).spec, kTuned);
  EXPECT_EQ(lookup(8192).source, LookupSource::exact);
  TuningDb db(path_);
  // The nearest row to M = 100 is 4096's: 64's is another space.
  const auto nearest =
      db.get_nearest_m(kH200, "gemm", problem_key(kTuned), 100, kN, kK, tuning_space_hash("gemm"));
  ASSERT_TRUE(nearest);
  EXPECT_EQ(nearest->m, 4096);
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  auto quant =
      db.get_exact(kH200, "quantize", kQuantProblem, 128, 0, 4096, tuning_space_hash("quantize"));
  ASSERT_TRUE(quant.has_value());
  EXPECT_EQ(quant->best_us, 7.5);
  EXPECT_EQ(quant->fp8jit_version, "unknown");
  EXPECT_EQ(quant->tuned_on, "unknown");
  EXPECT_EQ(RawDb(path_).scalar("SELECT m FROM results WHERE space_hash = '" + older + "'"), "64");
  const std::string before = db.export_json();
  EXPECT_EQ(TuningDb(path_).export_json(), before);  // a second open changes nothing
  EXPECT_EQ(db.prune({{"gemm", tuning_space_hash("gemm")}}), 1u);
  EXPECT_EQ(db.row_count(), 3u);
}

TEST_F(TuningDbUpgrade, RebuildOfADamagedVersion2FileRekeysItsRows) {
  constexpr int kRows = 400;
  const std::string legacy = legacy_space_hash(quantize_family(), embedded_headers().hash);
  {
    RawDb raw(path_);
    raw.exec(kV2Schema);
    raw.exec("BEGIN");
    for (int i = 1; i <= kRows; ++i) {
      const TuningRecord r = quant_record(kH200, i, 4096, double(i), kQuant, 6);
      raw.insert(raw_row(kH200.str(), r.m, spec_to_json(kQuant), r.best_us, r.timings,
                         kQuantProblem, legacy));
    }
    raw.exec("COMMIT");
  }
  const auto size = fs::file_size(path_);
  ASSERT_GT(size, 64u * 1024);
  std::fstream(path_, std::ios::in | std::ios::out | std::ios::binary).seekp(size / 8192 * 4096)
      << std::string(4096, 'Z');
  const RebuildStats s = TuningDb::rebuild(path_);
  EXPECT_FALSE(s.healthy);
  EXPECT_GT(s.rows_copied, 0u);
  TuningDb db(path_);
  EXPECT_EQ(db.schema_version(), TuningDb::kSchemaVersion);
  const std::vector<TuningRecord> rows = db.list();
  EXPECT_EQ(rows.size(), s.rows_copied);
  for (const TuningRecord& r : rows) {
    EXPECT_EQ(r.space_hash, tuning_space_hash("quantize"));
    EXPECT_EQ(r.fp8jit_version, "unknown");
    EXPECT_EQ(r.tuned_on, "unknown");
  }
}

TEST_F(TuningDbUpgrade, MigrationFromVersion3KeepsEveryRowAndSaysTunedOnIsUnknown) {
  {
    RawDb raw(path_);
    raw.exec(kV2Schema);
    raw.exec("ALTER TABLE results ADD COLUMN fp8jit_version TEXT NOT NULL DEFAULT 'unknown';"
             "UPDATE meta SET value = 3 WHERE key = 'schema_version';");
    std::vector<Value> row = raw_row(kH200.str(), std::int64_t{128}, spec_to_json(kQuant), 7.5, "[]",
                                     kQuantProblem, tuning_space_hash("quantize"));
    row.push_back(std::string("0.9.0"));
    raw.insert(row);
  }
  TuningDb db(path_);
  EXPECT_EQ(db.schema_version(), 4);
  const std::vector<TuningRecord> rows = db.list();
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0].fp8jit_version, "0.9.0");
  EXPECT_EQ(rows[0].tuned_on, "unknown");
  EXPECT_EQ(rows[0].best_us, 7.5);
}

TEST_F(TuningDbUpgrade, RowsCarryTheVersionThatTunedThem) {
  TuningDb a(path_);
  a.put(quant_record(kH200, 64, 4096, 10.0));  // this library's version
  TuningRecord old = quant_record(kH200, 128, 4096, 12.0);
  old.fp8jit_version = "0.0.9";
  a.put(old);
  EXPECT_EQ(a.get_exact(kH200, "quantize", kQuantProblem, 64, 0, 4096, "space-1")->fp8jit_version,
            fp8jit_version());
  TuningRecord bad = quant_record(kH200, 256, 4096, 1.0);
  bad.fp8jit_version = "1.0\x1b[2J";
  expect_error([&] { a.put(bad); }, ErrorKind::invalid_argument, {"is not a version"});
  std::vector<Value> hostile = raw_row(kH200.str(), std::int64_t{512}, spec_to_json(kQuant));
  hostile.push_back(std::string("1.0\x1b[2J"));  // would reach a terminal through `db list`
  RawDb(path_).insert(hostile);
  EXPECT_FALSE(a.get_exact(kH200, "quantize", kQuantProblem, 512, 0, 4096, "space-1"));

  const std::string text = a.export_json();
  const nlohmann::json doc = nlohmann::json::parse(text);
  EXPECT_EQ(doc["version"], 3);
  ASSERT_EQ(doc["rows"].size(), 2u);
  EXPECT_EQ(doc["rows"][0]["fp8jit_version"], fp8jit_version());
  EXPECT_EQ(doc["rows"][1]["fp8jit_version"], "0.0.9");
  TuningDb b(dir_ + "/b.sqlite");
  EXPECT_EQ(b.import_json(text).inserted, 2u);
  EXPECT_EQ(b.export_json(), text);
}

TEST_F(TuningDbUpgrade, ExportsOfEarlierReleasesImport) {
  // Version 1: no fp8jit_version, and this build's space keyed by the legacy formula.
  TuningRecord legacy = quant_record(kH200, 64, 4096, 10.0);
  legacy.space_hash = legacy_space_hash(quantize_family(), embedded_headers().hash);
  const TuningRecord other = quant_record(kH200, 128, 4096, 12.0);  // "space-1": left alone
  TuningDb db(path_);
  EXPECT_EQ(db.import_json(export_doc({legacy, other})).inserted, 2u);
  auto row =
      db.get_exact(kH200, "quantize", kQuantProblem, 64, 0, 4096, tuning_space_hash("quantize"));
  ASSERT_TRUE(row.has_value());
  EXPECT_EQ(row->fp8jit_version, "unknown");
  EXPECT_TRUE(db.get_exact(kH200, "quantize", kQuantProblem, 128, 0, 4096, "space-1"));

  nlohmann::json v1 = nlohmann::json::parse(export_doc({other}));
  v1["rows"][0]["fp8jit_version"] = "0.1.0";
  expect_error([&] { db.import_json(v1.dump()); }, ErrorKind::invalid_argument,
               {"rows[0]: unknown field \"fp8jit_version\""});
  nlohmann::json v2 = nlohmann::json::parse(export_doc({other}));
  v2["version"] = 2;
  expect_error([&] { db.import_json(v2.dump()); }, ErrorKind::invalid_argument,
               {"rows[0]: missing field \"fp8jit_version\""});
  v2["rows"][0]["fp8jit_version"] = "";
  expect_error([&] { db.import_json(v2.dump()); }, ErrorKind::invalid_argument,
               {"rows[0]: fp8jit_version \"\" is not a version"});
}

}  // namespace
}  // namespace fp8jit
