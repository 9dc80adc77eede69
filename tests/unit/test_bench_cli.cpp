// `fp8jit bench` (argument checks before anything runs; the command it builds for fp8jit_bench)
// and bench/plot.sh (charts from a results directory), each run as a separate process. No GPU
// needed: the one test that starts fp8jit_bench accepts its "no GPU" answer.
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

std::string quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct Result {
  bool exited = false;  // false: killed by a signal
  int status = -1;
  std::string out, err;
};

class BenchCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fp8jit_bench_cli_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  // A shell command line, stdout and stderr captured apart.
  Result shell(const std::string& cmd) {
    const std::string out = dir_ + "/stdout", err = dir_ + "/stderr";
    const int raw = std::system((cmd + " >" + quote(out) + " 2>" + quote(err) + " </dev/null").c_str());
    Result r;
    r.exited = raw != -1 && WIFEXITED(raw);
    r.status = r.exited ? WEXITSTATUS(raw) : -1;
    r.out = read_bytes(out);
    r.err = read_bytes(err);
    return r;
  }

  Result fp8jit(const std::vector<std::string>& args) {
    std::string cmd = quote(FP8JIT_CLI_PATH);
    for (const auto& a : args) cmd += " " + quote(a);
    return shell(cmd);
  }

  // Exit status 1 (2 for what the option parser refuses) and a message on stderr naming each
  // needle (the argument and its value).
  void expect_failure(const Result& r, const std::vector<std::string>& needles, int status = 1) {
    EXPECT_TRUE(r.exited) << "killed by a signal; stderr: " << r.err;
    EXPECT_EQ(r.status, status) << "stderr: " << r.err;
    EXPECT_EQ(r.out, "");
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in stderr: " << r.err;
  }

  std::string write(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  static bool bench_built() {
    std::error_code ec;
    return fs::exists(fs::path(FP8JIT_CLI_PATH).parent_path() / "bench" / "fp8jit_bench", ec);
  }
  // The CLI finds suites relative to itself: a build tree inside or next to the source tree.
  static bool suites_reachable() {
    const fs::path exe_dir = fs::path(FP8JIT_CLI_PATH).parent_path();
    std::error_code ec;
    return fs::exists(exe_dir / ".." / "bench" / "shapes" / "square.csv", ec) ||
           fs::exists(exe_dir / ".." / ".." / "bench" / "shapes" / "square.csv", ec);
  }

  std::string dir_;
};

TEST_F(BenchCliTest, UnknownScaleIsNamed) {
  expect_failure(fp8jit({"bench", "--suite", "deepseek-v3", "--scale", "blok"}), {"--scale", "blok"});
  // One bad item in a list is enough; it is the one named.
  expect_failure(fp8jit({"bench", "--suite", "square", "--scale=block,tensor,per-row"}), {"--scale", "per-row"});
  expect_failure(fp8jit({"bench", "--suite", "square", "--scale", ","}), {"--scale"});
}

TEST_F(BenchCliTest, UnknownProviderIsNamed) {
  expect_failure(fp8jit({"bench", "--suite", "deepseek-v3", "--providers", "fp8jit,cublas"}), {"--providers", "cublas"});
  expect_failure(fp8jit({"bench", "--suite", "deepseek-v3", "--providers", "triton"}), {"--providers", "triton"});
}

TEST_F(BenchCliTest, UnknownSuiteIsNamedWithTheAvailableOnes) {
  const Result r = fp8jit({"bench", "--suite", "llama-70b"});
  if (suites_reachable()) expect_failure(r, {"--suite", "llama-70b", "deepseek-v3", "square"});
  else expect_failure(r, {"--suite", "llama-70b"});
  expect_failure(fp8jit({"bench", "--suite", "../../etc/passwd"}), {"--suite", "../../etc/passwd"});
}

TEST_F(BenchCliTest, MissingSuiteAndShapes) {
  expect_failure(fp8jit({"bench"}), {"--suite", "--shapes"});
  expect_failure(fp8jit({"bench", "--scale", "block"}), {"--suite", "--shapes"});
  // Both at once is refused too.
  expect_failure(fp8jit({"bench", "--suite", "square", "--shapes", write("s.csv", "m,n,k\n64,64,64\n")}),
                 {"--suite", "--shapes"}, 2);
}

TEST_F(BenchCliTest, BadShapesFile) {
  const std::string missing = dir_ + "/no-such-shapes.csv";
  expect_failure(fp8jit({"bench", "--shapes", missing}), {"--shapes", missing, "no such file"});
  const std::string empty = write("empty.csv", "m,n,k\n# nothing\n");
  expect_failure(fp8jit({"bench", "--shapes", empty}), {"--shapes", empty, "no m,n,k rows"});
  expect_failure(fp8jit({"bench", "--shapes", dir_}), {"--shapes", dir_});
}

TEST_F(BenchCliTest, UnknownOptionAndMissingValue) {
  expect_failure(fp8jit({"bench", "--suite", "square", "--iters", "3"}), {"--iters"}, 2);
  expect_failure(fp8jit({"bench", "--suite"}), {"--suite"}, 2);
}

TEST_F(BenchCliTest, DryRunPrintsTheBenchCommand) {
  if (!bench_built()) GTEST_SKIP() << "fp8jit_bench not built (Google Benchmark missing)";
  if (!suites_reachable()) GTEST_SKIP() << "build tree away from the source tree: no bench/shapes near the CLI";
  const Result r = fp8jit({"bench", "--suite", "deepseek-v3", "--scale", "tensor,block,tensor", "--providers",
                           "cublaslt,fp8jit", "--out", dir_ + "/res", "--dry-run"});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.status, 0) << r.err;
  const fs::path shapes = fs::path(FP8JIT_SOURCE_DIR) / "bench" / "shapes" / "deepseek_v3.csv";
  for (const std::string& want :
       {std::string("/bench/fp8jit_bench "), std::string(" --benchmark_filter=^Gemm/ "),
        " --shapes=" + fs::weakly_canonical(shapes).string() + " ", std::string(" --scales=tensor,block "),
        std::string(" --providers=fp8jit,cublaslt "), " --out=" + dir_ + "/res ",
        " --benchmark_out=" + dir_ + "/res/gemm.json ", std::string(" --benchmark_out_format=json\n")})
    EXPECT_NE(r.out.find(want), std::string::npos) << "'" << want << "' not in: " << r.out;
  // Defaults: block and tensor, both providers, ./fp8jit-bench-<date>; the underscored suite name works.
  const Result d = fp8jit({"bench", "--suite", "deepseek_v3", "--dry-run"});
  ASSERT_EQ(d.status, 0) << d.err;
  EXPECT_NE(d.out.find(" --scales=block,tensor "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find(" --providers=fp8jit,cublaslt "), std::string::npos) << d.out;
  EXPECT_NE(d.out.find(" --out=fp8jit-bench-20"), std::string::npos) << d.out;
  // Only fp8jit is passed through as such.
  const std::string own = write("own shapes.csv", "m,n,k\n128,256,512\n");
  const Result o = fp8jit({"bench", "--shapes", own, "--providers", "fp8jit", "--out", dir_, "--dry-run"});
  ASSERT_EQ(o.status, 0) << o.err;
  EXPECT_NE(o.out.find(" --providers=fp8jit "), std::string::npos) << o.out;
  EXPECT_NE(o.out.find(quote("--shapes=" + own)), std::string::npos) << o.out;
}

// Starts fp8jit_bench for real on one small shape, fp8jit only. Without a GPU the CLI says so in
// one line before starting it and nothing is written; with one, the report files appear.
TEST_F(BenchCliTest, RunsTheBenchAndReturnsItsStatus) {
  if (!bench_built()) GTEST_SKIP() << "fp8jit_bench not built (Google Benchmark missing)";
  const std::string shapes = write("tiny.csv", "m,n,k\n128,256,512\n");
  const std::string out = dir_ + "/res";
  const Result r = fp8jit({"bench", "--shapes", shapes, "--scale", "tensor", "--providers", "fp8jit", "--out", out});
  ASSERT_TRUE(r.exited) << r.err;
  if (r.err.find("needs a GPU") != std::string::npos) {
    EXPECT_EQ(r.status, 1);
    EXPECT_EQ(r.out, "");
    EXPECT_FALSE(fs::exists(out)) << "nothing is written without a GPU";
    // The bench program itself, started by hand, refuses the same way and writes nothing either.
    const Result direct = shell(quote((fs::path(FP8JIT_CLI_PATH).parent_path() / "bench" / "fp8jit_bench").string()) +
                                " --shapes=" + quote(shapes) + " --scales=tensor --providers=fp8jit --out=" +
                                quote(out) + " --benchmark_out=" + quote(out + "/gemm.json"));
    EXPECT_EQ(direct.status, 1) << direct.out << direct.err;
    EXPECT_FALSE(fs::exists(out));
  } else {
    EXPECT_EQ(r.status, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("Gemm/tensor/128x256x512"), std::string::npos) << r.out;
    const std::string csv = read_bytes(out + "/gemm.csv");
    EXPECT_NE(csv.find("128,256,512,tensor,fp8jit,passed,"), std::string::npos) << csv;
    EXPECT_NE(csv.find("128,256,512,tensor,cublaslt,skipped,"), std::string::npos) << csv;
    EXPECT_NE(read_bytes(out + "/gemm_rows.json").find("\"cublaslt_status\": \"skipped\""), std::string::npos);
  }
}

// ---- the repository's shell scripts ------------------------------------------------------------

// The scripts that run on the lent GPU (lab/scripts/session.sh, profile*.sh,
// tests/gpu/run-on-gpu.sh, ...) cannot run here: a syntax error in one would first show up in a
// device call. `bash -n` parses each without running it.
TEST_F(BenchCliTest, EveryShellScriptParses) {
  const fs::path root = FP8JIT_SOURCE_DIR;
  std::vector<fs::path> scripts = {root / ".ci" / "run"};
  for (const char* dir : {"bench", "tests/gpu", "scripts", "lab", "lab/scripts"})
    for (const auto& e : fs::directory_iterator(root / dir))
      if (e.path().extension() == ".sh") scripts.push_back(e.path());
  ASSERT_GE(scripts.size(), 15u)
      << "bench/, tests/gpu/, scripts/ and lab/scripts/ hold the GPU-call scripts";
  for (const fs::path& script : scripts) {
    const Result r = shell("bash -n " + quote(script.string()));
    EXPECT_EQ(r.status, 0) << script << ": " << r.err;
  }
}

// ---- bench/plot.sh ----------------------------------------------------------------------------

class BenchCliPlotTest : public BenchCliTest {
 protected:
  void SetUp() override {
    BenchCliTest::SetUp();
    if (shell("command -v gnuplot").status != 0) GTEST_SKIP() << "gnuplot not installed";
  }
  Result plot(const std::string& dir) {
    return shell("bash " + quote(std::string(FP8JIT_SOURCE_DIR) + "/bench/plot.sh") + " " + quote(dir));
  }
  void expect_png(const std::string& path) {
    const std::string png = read_bytes(path);
    ASSERT_GT(png.size(), 1000u) << path;
    EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << path;
  }
};

// The columns of bench/gemm_report.cpp, with a peer that has no algorithm for one shape.
const char* kGemmCsv =
    "m,n,k,scale,provider,status,time_us,tflops,ratio_to_cublaslt,roofline_fraction,kernel\n"
    "64,2112,7168,block,fp8jit,passed,17.63,109.9,1.018,0.211,gemm_a\n"
    "64,2112,7168,block,cublaslt,passed,17.95,107.9,1,,\n"
    "128,7168,2048,block,fp8jit,passed,15.30,245.6,0.843,0.258,gemm_b\n"
    "128,7168,2048,block,cublaslt,passed,12.90,291.3,1,,\n"
    "4096,4096,7168,block,fp8jit,passed,346.60,694.0,,0.050,gemm_c\n"
    "4096,4096,7168,block,cublaslt,not supported,,,,,\n"
    "64,2112,7168,tensor,fp8jit,passed,14.90,130.1,0.879,0.250,gemm_d\n"
    "64,2112,7168,tensor,cublaslt,passed,13.10,147.9,1,,\n"
    "4096,4096,7168,tensor,fp8jit,passed,183.00,1314.0,0.913,0.040,gemm_e\n"
    "4096,4096,7168,tensor,cublaslt,passed,167.00,1440.0,1,,\n";

// Google Benchmark's JSON layout, cut down: one quantize, one dequantize, one other benchmark.
const char* kQuantJson = R"({
  "context": {"date": "2026-11-21T13:40:46+00:00", "caches": [{"type": "Data", "level": 1}]},
  "benchmarks": [
    {"name": "BM_Quantize1x128/4096/7168/iterations:30/manual_time", "run_type": "iteration",
     "real_time": 28.1, "time_unit": "us", "GBps": 3182.1, "copy_GBps": 3516.0, "median_us": 27.97,
     "pct_of_copy": 90.5, "label": "quant_sm90_bf16_e4m3_1x128_v16_t128_u1"},
    {"name": "BM_Dequantize128x128/7168/16384/iterations:30/manual_time", "run_type": "iteration",
     "real_time": 92.3, "time_unit": "us", "GBps": 3812.7, "copy_GBps": 3940.9, "median_us": 92.42,
     "pct_of_copy": 96.7, "label": "dequant_sm90_e4m3_bf16_128x128_v8_t128_u2"},
    {"name": "BM_ColdCompile/iterations:5", "run_type": "iteration", "real_time": 16.3, "time_unit": "ms"}
  ]
})";

TEST_F(BenchCliPlotTest, GemmCsvAndQuantJsonGiveCharts) {
  write("res/gemm.csv", kGemmCsv);
  write("res/quant.json", kQuantJson);
  const Result r = plot(dir_ + "/res");
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.status, 0) << r.out << r.err;
  for (const char* png : {"gemm_tflops_block.png", "gemm_tflops_tensor.png", "gemm_roofline.png", "quant_bandwidth.png"}) {
    expect_png(dir_ + "/res/" + png);
    EXPECT_NE(r.out.find(png), std::string::npos) << r.out;  // each written chart is listed
  }
  EXPECT_EQ(r.err.find("warning"), std::string::npos) << r.err;
  // Nothing else is left in the directory (the data files live in a temporary one).
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(dir_ + "/res")) files += e.is_regular_file();
  EXPECT_EQ(files, 6u);
}

TEST_F(BenchCliPlotTest, QuantCsvWithoutGemm) {
  write("res/quant.csv",
        "problem,m,k,status,time_us,gbps,copy_gbps,pct_of_copy,kernel\n"
        "quantize 1x128,4096,7168,passed,27.97,3182.1,3516.0,90.50,quant_x\n"
        "dequantize 128x128,7168,16384,no GPU,,,,,\n");
  const Result r = plot(dir_ + "/res");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_png(dir_ + "/res/quant_bandwidth.png");
  EXPECT_FALSE(fs::exists(dir_ + "/res/gemm_roofline.png"));
  EXPECT_NE(r.err.find("gemm.csv"), std::string::npos) << r.err;  // says what it skipped
}

TEST_F(BenchCliPlotTest, OnlyFp8jitAndNoSmallShapes) {
  write("res/gemm.csv",
        "m,n,k,scale,provider,status,time_us,tflops,ratio_to_cublaslt,roofline_fraction,kernel\n"
        "4096,4096,4096,tensor_fast,fp8jit,passed,120.0,1145.0,,0.030,gemm_f\n"
        "4096,4096,4096,tensor_fast,cublaslt,skipped,,,,,\n"
        "8192,8192,8192,tensor_fast,fp8jit,passed,800.0,1374.0,,0.010,gemm_g\n"
        "8192,8192,8192,tensor_fast,cublaslt,skipped,,,,,\n");
  const Result r = plot(dir_ + "/res");
  ASSERT_EQ(r.status, 0) << r.err;
  expect_png(dir_ + "/res/gemm_tflops_tensor_fast.png");
  EXPECT_FALSE(fs::exists(dir_ + "/res/gemm_roofline.png"));
}

TEST_F(BenchCliPlotTest, NothingToPlotFails) {
  fs::create_directories(dir_ + "/empty");
  const Result r = plot(dir_ + "/empty");
  EXPECT_TRUE(r.exited);
  EXPECT_NE(r.status, 0);
  EXPECT_NE(r.err.find("nothing to plot"), std::string::npos) << r.err;
  const Result u = plot(dir_ + "/missing");
  EXPECT_EQ(u.status, 2);
  EXPECT_NE(u.err.find("usage"), std::string::npos) << u.err;
}

}  // namespace
