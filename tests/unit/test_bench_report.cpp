// fp8jit_bench's GEMM report (bench/gemm_report.cpp): the markdown table and CSV as the bench has
// always written them, the JSON of the rows through nlohmann (fields in order, null for what did
// not run, never NaN or infinity), and the three files staged together.
//
// The report's formatting needs neither Google Benchmark nor a GPU, but the bench directory is
// only built where Google Benchmark is found; compiling the source here keeps this test
// independent of that.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "bench/gemm_report.cpp"

namespace {

using fp8jit::bench::format_gemm_report;
using fp8jit::bench::GemmReport;
using fp8jit::bench::GemmRow;
using Json = nlohmann::ordered_json;

// Four rows: everything ran (BF16 too); cuBLASLt and BF16 could not run; fp8jit skipped; a NaN
// relative difference.
std::vector<GemmRow> sample_rows() {
  GemmRow a;
  a.shape = {128, 7168, 2048};
  a.mode = "block";
  a.kernel = "gemm_k1";
  a.fp8jit_us = 20.5, a.cublaslt_us = 25.25, a.rel_diff = 1.5e-3, a.roofline = 0.625;
  a.bf16_status = "passed", a.bf16_us = 41, a.bf16_rel_diff = 2e-3;
  GemmRow b;
  b.shape = {4096, 7168, 7168};
  b.mode = "tensor_fast";
  b.kernel = "gemm_k2";
  b.fp8jit_us = 400, b.peer_status = "no cuBLASLt algorithm", b.roofline = 0.1;
  b.bf16_status = "dequantize failed: oops";
  GemmRow c;
  c.shape = {64, 2112, 7168};
  c.mode = "block";
  c.fp8jit_status = "skipped";
  c.cublaslt_us = 10;
  GemmRow d;
  d.shape = {256, 512, 1024};
  d.mode = "block";
  d.kernel = "gemm_k3";
  d.fp8jit_us = 8, d.cublaslt_us = 6, d.rel_diff = NAN, d.roofline = 0.3;
  return {a, b, c, d};
}

// What the hand-written report produced for sample_rows() before it moved to nlohmann.
constexpr const char* kMarkdown =
    "GEMM on NVIDIA H200 (bf16 out; TFLOP/s from the median of 30 L2-flushed runs)\n\n"
    "| M | N | K | scale | fp8jit kernel | fp8jit µs | fp8jit TFLOP/s | cuBLASLt µs | cuBLASLt "
    "TFLOP/s | bf16 µs | bf16 TFLOP/s | ratio | roofline | rel. diff |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n"
    "| 128 | 7168 | 2048 | block | gemm_k1 | 20.5 | 183 | 25.2 | 149 | 41.0 | 92 | 1.23x | 62% | "
    "1.5e-03 |\n"
    "| 4096 | 7168 | 7168 | tensor_fast | gemm_k2 | 400.0 | 1052 | - | no cuBLASLt algorithm | - | "
    "dequantize failed: oops | - |  | - |\n"
    "| 64 | 2112 | 7168 | block | skipped | - | - | 10.0 | 194 | - | skipped | - |  | - |\n"
    "| 256 | 512 | 1024 | block | gemm_k3 | 8.0 | 34 | 6.0 | 45 | - | skipped | 0.75x |  | nan |\n"
    "\n"
    "- block: geometric mean 0.961x cuBLASLt over 2 shapes, worst 0.75x\n"
    "- block: fp8jit geometric mean 2.000x BF16 cuBLASLt over 1 shapes\n";

constexpr const char* kCsv =
    "m,n,k,scale,provider,status,time_us,tflops,ratio_to_cublaslt,roofline_fraction,kernel\n"
    "128,7168,2048,block,fp8jit,passed,20.50,183.3,1.232,0.625,gemm_k1\n"
    "128,7168,2048,block,cublaslt,passed,25.25,148.8,1,,\n"
    "128,7168,2048,block,cublaslt_bf16,passed,41.00,91.7,0.616,,\n"
    "4096,7168,7168,tensor_fast,fp8jit,passed,400.00,1052.3,,0.100,gemm_k2\n"
    "4096,7168,7168,tensor_fast,cublaslt,not supported,,,,,\n"
    "4096,7168,7168,tensor_fast,cublaslt_bf16,not supported,,,,,\n"
    "64,2112,7168,block,fp8jit,skipped,,,,,\n"
    "64,2112,7168,block,cublaslt,passed,10.00,193.8,1,,\n"
    "256,512,1024,block,fp8jit,passed,8.00,33.6,0.750,0.300,gemm_k3\n"
    "256,512,1024,block,cublaslt,passed,6.00,44.7,1,,\n";

TEST(BenchReport, MarkdownAndCsvAreUnchanged) {
  const GemmReport r = format_gemm_report(sample_rows(), "NVIDIA H200");
  EXPECT_EQ(r.md, kMarkdown);
  EXPECT_EQ(r.csv, kCsv);
}

TEST(BenchReport, JsonRowsHaveTheFieldsInOrderWithNullForWhatDidNotRun) {
  const GemmReport r = format_gemm_report(sample_rows(), "NVIDIA H200");
  const Json j = Json::parse(r.json);
  std::vector<std::string> top;
  for (const auto& [key, value] : j.items()) top.push_back(key);
  EXPECT_EQ(top, (std::vector<std::string>{"gpu", "rows", "geomean_ratio_to_cublaslt"}));
  EXPECT_EQ(j["gpu"], "NVIDIA H200");
  ASSERT_EQ(j["rows"].size(), 4u);
  const std::vector<std::string> fields = {"m",
                                           "n",
                                           "k",
                                           "scale",
                                           "fp8jit_status",
                                           "kernel",
                                           "fp8jit_us",
                                           "fp8jit_tflops",
                                           "cublaslt_status",
                                           "cublaslt_us",
                                           "cublaslt_tflops",
                                           "ratio_to_cublaslt",
                                           "roofline_fraction",
                                           "rel_diff",
                                           "cublaslt_bf16_status",
                                           "cublaslt_bf16_us",
                                           "cublaslt_bf16_tflops",
                                           "bf16_rel_diff"};
  for (const Json& row : j["rows"]) {
    std::vector<std::string> keys;
    for (const auto& [key, value] : row.items()) keys.push_back(key);
    EXPECT_EQ(keys, fields);
  }
  const Json& a = j["rows"][0];
  EXPECT_EQ(a["m"], 128);
  EXPECT_TRUE(a["m"].is_number_integer());
  EXPECT_EQ(a["kernel"], "gemm_k1");
  EXPECT_EQ(a["fp8jit_us"], 20.5);
  EXPECT_EQ(a["fp8jit_tflops"], 183.322);  // 6 significant digits, as before
  EXPECT_EQ(a["cublaslt_status"], "passed");
  EXPECT_EQ(a["ratio_to_cublaslt"], 1.23171);
  EXPECT_EQ(a["rel_diff"], 0.0015);
  EXPECT_EQ(a["cublaslt_bf16_us"], 41);
  const Json& b = j["rows"][1];
  EXPECT_EQ(b["cublaslt_status"], "no cuBLASLt algorithm");
  for (const char* absent : {"cublaslt_us", "cublaslt_tflops", "ratio_to_cublaslt", "rel_diff",
                             "cublaslt_bf16_us", "cublaslt_bf16_tflops", "bf16_rel_diff"})
    EXPECT_TRUE(b[absent].is_null()) << absent;
  const Json& c = j["rows"][2];
  EXPECT_EQ(c["fp8jit_status"], "skipped");
  for (const char* absent : {"kernel", "fp8jit_us", "fp8jit_tflops", "roofline_fraction"})
    EXPECT_TRUE(c[absent].is_null()) << absent;
  EXPECT_EQ(c["cublaslt_us"], 10);
}

TEST(BenchReport, NonFiniteValuesAreNullNeverNumbers) {
  std::vector<GemmRow> rows = sample_rows();
  rows[0].bf16_rel_diff = INFINITY;
  rows[0].roofline = -INFINITY;
  const GemmReport r = format_gemm_report(rows, "NVIDIA H200");
  const Json j = Json::parse(r.json);  // strict JSON: NaN or Infinity would not parse
  EXPECT_TRUE(j["rows"][0]["bf16_rel_diff"].is_null());
  EXPECT_TRUE(j["rows"][0]["roofline_fraction"].is_null());
  EXPECT_TRUE(j["rows"][3]["rel_diff"].is_null());  // NaN
  for (const char* bad : {"nan", "NaN", "inf", "Infinity"})
    EXPECT_EQ(r.json.find(bad), std::string::npos) << bad << " in " << r.json;
}

TEST(BenchReport, GeometricMeansPerMode) {
  const Json j = Json::parse(format_gemm_report(sample_rows(), "NVIDIA H200").json);
  const Json& g = j["geomean_ratio_to_cublaslt"];
  ASSERT_EQ(g.size(), 1u);  // tensor_fast never ran cuBLASLt
  EXPECT_EQ(g["block"]["geomean"], 0.961135);
  EXPECT_EQ(g["block"]["shapes"], 2);
  EXPECT_EQ(g["block"]["worst"], 0.75);
  // No ratio at all: an empty object, not a missing key.
  std::vector<GemmRow> rows = sample_rows();
  rows.erase(rows.begin());
  rows.pop_back();
  const Json none = Json::parse(format_gemm_report(rows, "x").json);
  ASSERT_TRUE(none.contains("geomean_ratio_to_cublaslt"));
  EXPECT_TRUE(none["geomean_ratio_to_cublaslt"].is_object());
  EXPECT_TRUE(none["geomean_ratio_to_cublaslt"].empty());
}

// A GPU name or a cuBLASLt message can hold quotes, control bytes or bytes that are not UTF-8:
// the JSON stays valid.
TEST(BenchReport, StringsAreEscapedAndInvalidUtf8Replaced) {
  std::vector<GemmRow> rows = sample_rows();
  rows[1].peer_status = "say \"no\"\\\n\x01";
  const GemmReport r = format_gemm_report(rows, "GPU \xff\xfe");
  const Json j = Json::parse(r.json);
  EXPECT_EQ(j["rows"][1]["cublaslt_status"], "say \"no\"\\\n\x01");
  EXPECT_EQ(j["gpu"], "GPU \xEF\xBF\xBD\xEF\xBF\xBD");  // U+FFFD twice
}

std::string slurp(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

TEST(BenchReport, StagedFilesAreWrittenTogetherOnCommit) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / "fp8jit_bench_report";
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::vector<GemmRow> rows = sample_rows();
  fp8jit::OutputFiles files;
  ::testing::internal::CaptureStdout();
  fp8jit::bench::stage_gemm_report(rows, "NVIDIA H200", dir.string(), files);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), kMarkdown);
  EXPECT_EQ(files.size(), 3u);
  EXPECT_TRUE(fs::is_empty(dir));  // nothing on disk before the commit
  files.commit();
  const GemmReport want = format_gemm_report(rows, "NVIDIA H200");
  EXPECT_EQ(slurp(dir / "gemm.md"), want.md);
  EXPECT_EQ(slurp(dir / "gemm.csv"), want.csv);
  EXPECT_EQ(slurp(dir / "gemm_rows.json"), want.json);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir), fs::directory_iterator()), 3);

  // No rows, or no --out: nothing staged.
  fp8jit::OutputFiles none;
  ::testing::internal::CaptureStdout();
  fp8jit::bench::stage_gemm_report({}, "NVIDIA H200", dir.string(), none);
  fp8jit::bench::stage_gemm_report(rows, "NVIDIA H200", "", none);
  (void)::testing::internal::GetCapturedStdout();
  EXPECT_EQ(none.size(), 0u);
  fs::remove_all(dir);
}

}  // namespace
