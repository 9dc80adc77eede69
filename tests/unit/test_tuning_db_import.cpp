// Importing `fp8jit db export` documents: validated as a whole before any database is opened (a
// refused document creates nothing), only the export versions this build reads, created_at
// within calendar dates, no control bytes in GPU keys or space hashes; and prune refuses a space
// hash that would delete every row of an op.
#include <gtest/gtest.h>

#include <climits>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>

#include "autotune/tuning_db.hpp"
#include "fp8jit/error.hpp"
#include "tuning_db_rows.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;
using namespace tuning_rows;
using nlohmann::json;

class TuningDbImport : public ::testing::Test {
 protected:
  // A two-row export whose second row has `edit` applied.
  static std::string doc_with(const std::function<void(json&)>& edit, int version = 1) {
    json doc = json::parse(
        export_doc({quant_record(kH200, 1, 4096, 1.0), quant_record(kH200, 2, 4096, 2.0)}));
    doc["version"] = version;
    for (json& row : doc["rows"]) {
      if (version >= 2) row["fp8jit_version"] = "0.1.0";
      if (version >= 3) row["tuned_on"] = "node7 device 1 (PCI 0000:1a:00.0, GPU-0123)";
    }
    edit(doc["rows"][1]);
    return doc.dump();
  }
  test::TempDir tmp_{"fp8jit_tuning_import"};
  const std::string dir_ = tmp_.path(), path_ = dir_ + "/new/tuning.sqlite";
};

TEST_F(TuningDbImport, RefusedDocumentCreatesNothing) {
  const std::vector<std::pair<std::string, std::string>> refused = {
      {"{\"format\": \"fp8jit-tuning\", \"version\": 1, \"rows\": [", "not valid JSON"},
      {R"({"format": "other", "version": 1, "rows": []})", "format"},
      {R"({"format": "fp8jit-tuning", "version": 4, "rows": []})", "export version 4"},
      {doc_with([](json& r) { r["m"] = -1; }), "rows[1]: negative shape"},
      {doc_with([](json& r) { r.erase("gpu"); }), "rows[1]: missing field \"gpu\""},
  };
  for (const auto& [text, why] : refused) {
    SCOPED_TRACE(why);
    expect_error([&] { parse_tuning_export(text); }, ErrorKind::invalid_argument, {why});
    expect_error([&] { TuningDb::import_into(path_, text); }, ErrorKind::invalid_argument, {why});
    EXPECT_FALSE(fs::exists(dir_ + "/new")) << "the database (or its folder) was created";
  }
  const ImportStats s = TuningDb::import_into(path_, doc_with([](json&) {}));
  EXPECT_EQ(s.inserted, 2u);
  EXPECT_EQ(TuningDb(path_).row_count(), 2u);
  EXPECT_EQ(parse_tuning_export(TuningDb(path_).export_json()).size(), 2u);
}

TEST_F(TuningDbImport, OnlyTheExportVersionsThisBuildReads) {
  EXPECT_EQ(parse_tuning_export(doc_with([](json&) {}, 1)).size(), 2u);
  EXPECT_EQ(parse_tuning_export(doc_with([](json&) {}, 2)).size(), 2u);
  EXPECT_EQ(parse_tuning_export(doc_with([](json&) {}, 3)).size(), 2u);  // today's export
  for (const char* version : {"0", "4", "-1", "2.0", "\"2\"", "null", "true", "99999999999999999999"}) {
    SCOPED_TRACE(version);
    const std::string text =
        std::string(R"({"format": "fp8jit-tuning", "rows": [], "version": )") + version + "}";
    expect_error([&] { parse_tuning_export(text); }, ErrorKind::invalid_argument,
                 {"export version ", "is not one of 1 to 3"});
  }
  // A field of a later version is unknown to an earlier one: a version-2 row with tuned_on is
  // not what any fp8jit wrote.
  expect_error(
      [&] { parse_tuning_export(doc_with([](json& r) { r["tuned_on"] = "node7 device 0"; }, 2)); },
      ErrorKind::invalid_argument, {"rows[1]: unknown field \"tuned_on\""});
  expect_error([&] { parse_tuning_export(R"({"format": "fp8jit-tuning", "rows": []})"); },
               ErrorKind::invalid_argument, {"export version null"});
}

TEST_F(TuningDbImport, TunedOnSaysWhichCardMeasuredARow) {
  // Earlier exports did not say: "unknown". Today's carry it through export and import.
  for (const TuningRecord& r : parse_tuning_export(doc_with([](json&) {}, 2)))
    EXPECT_EQ(r.tuned_on, "unknown");
  TuningDb::import_into(path_, doc_with([](json& r) { r["tuned_on"] = "node8 device 0 (PCI 0000:19:00.0, GPU-4567)"; }, 3));
  const std::vector<TuningRecord> rows = parse_tuning_export(TuningDb(path_).export_json());
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0].tuned_on, "node7 device 1 (PCI 0000:1a:00.0, GPU-0123)");
  EXPECT_EQ(rows[1].tuned_on, "node8 device 0 (PCI 0000:19:00.0, GPU-4567)");
  // Missing, empty, too long, control bytes, not a string: refused, naming the row.
  expect_error([&] { parse_tuning_export(doc_with([](json& r) { r.erase("tuned_on"); }, 3)); },
               ErrorKind::invalid_argument, {"rows[1]: missing field \"tuned_on\""});
  expect_error([&] { parse_tuning_export(doc_with([](json& r) { r["tuned_on"] = 3; }, 3)); },
               ErrorKind::invalid_argument, {"rows[1].tuned_on: expected a string"});
  for (const std::string& bad : {std::string(), std::string(257, 'x'), std::string("node\x1b[2J")}) {
    SCOPED_TRACE(bad.size());
    expect_error([&] { parse_tuning_export(doc_with([&](json& r) { r["tuned_on"] = bad; }, 3)); },
                 ErrorKind::invalid_argument, {"rows[1]: tuned_on", "does not name a GPU"});
  }
  EXPECT_EQ(parse_tuning_export(doc_with([](json& r) { r["tuned_on"] = std::string(256, 'x'); }, 3)).size(), 2u);
}

TEST_F(TuningDbImport, CreatedAtMustBeACalendarTime) {
  for (const std::int64_t bad :
       {INT64_MAX, INT64_MIN, std::int64_t{-1}, std::int64_t{253402300800}}) {
    SCOPED_TRACE(bad);
    expect_error([&] { parse_tuning_export(doc_with([&](json& r) { r["created_at"] = bad; })); },
                 ErrorKind::invalid_argument,
                 {"rows[1]: created_at " + std::to_string(bad) + " is not a time"});
    TuningRecord r = quant_record(kH200, 1, 4096, 1.0);
    r.created_at = bad;
    expect_error([&] { TuningDb(path_).put(r); }, ErrorKind::invalid_argument, {"created_at"});
  }
  for (const std::int64_t good : {std::int64_t{1}, std::int64_t{253402300799}})
    EXPECT_EQ(parse_tuning_export(doc_with([&](json& r) { r["created_at"] = good; }))[1].created_at,
              good);
}

TEST_F(TuningDbImport, ControlBytesInGpuKeysAndSpaceHashesAreRefused) {
  expect_error([] { GpuKey::from_string("NVIDIA\x1b[31mH100|9.0|132"); },
               ErrorKind::invalid_argument, {"NVIDIA\\x1b[31mH100|9.0|132", "control bytes"});
  expect_error([] { GpuKey::from_string(std::string("H100\0x|9.0|132", 14)); },
               ErrorKind::invalid_argument, {"H100\\x00x|9.0|132"});
  EXPECT_EQ(GpuKey::from_string("NVIDIA H100|9.0|132").name, "NVIDIA H100");
  expect_error(
      [&] {
        parse_tuning_export(doc_with([](json& r) { r["gpu"] = "NVIDIA\x1b[31mH100|9.0|132"; }));
      },
      ErrorKind::invalid_argument, {"rows[1]: ", "gpu key", "\\x1b"});
  expect_error([&] { parse_tuning_export(doc_with([](json& r) { r["space_hash"] = "a\x07z"; })); },
               ErrorKind::invalid_argument,
               {"rows[1]: space_hash \"a\\x07z\" holds control bytes"});
  // put() keeps the same rule: such a key would reach a terminal through `fp8jit db list`.
  TuningDb db(path_);
  TuningRecord r = quant_record({"NVIDIA\nH200", 9, 0, 132}, 1, 4096, 1.0);
  expect_error([&] { db.put(r); }, ErrorKind::invalid_argument, {"gpu key", "\\x0a"});
  r = quant_record(kH200, 1, 4096, 1.0);
  r.space_hash = "space\x7f";
  expect_error([&] { db.put(r); }, ErrorKind::invalid_argument, {"space_hash", "\\x7f"});
  EXPECT_EQ(db.row_count(), 0u);
}

TEST_F(TuningDbImport, PruneRefusesASpaceHashThatWouldDeleteEveryRowOfAnOp) {
  TuningDb db(path_);
  for (int m = 1; m <= 3; ++m) db.put(quant_record(kH200, m, 4096, 1.0 * m));
  expect_error(
      [&] {
        db.prune({{"quantize", ""}});
      },
      ErrorKind::invalid_argument,
      {"prune: the space hash to keep for op \"quantize\" is empty",
       "tuning_space_hash(\"quantize\")"});
  expect_error(
      [&] {
        db.prune({{"quantize", "space\x1b"}});
      },
      ErrorKind::invalid_argument, {"\"space\\x1b\", which holds control bytes"});
  EXPECT_EQ(db.row_count(), 3u);
  EXPECT_EQ(db.prune({{"quantize", "space-1"}}), 0u);  // the rows' own space: all stay
  EXPECT_EQ(db.prune({{"quantize", "space-2"}}), 3u);
}

}  // namespace
}  // namespace fp8jit
