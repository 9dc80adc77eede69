// The `fp8jit` command-line tool, run as a separate process: output of the GPU-free commands, and
// clean failures (message on stderr, exit status 1 or 2, never a signal) for bad input.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <sstream>
#include <string>
#include <vector>

#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/jit/headers.hpp"
#include "tests/common/cli_run.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;

using test::CliResult;
using test::read_bytes;

class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/fp8jit_cli_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    fs::remove_all(dir_, ec);
  }

  CliResult run(const std::vector<std::string>& args) { return test::run_cli(args, dir_); }

  // A failure: status 1 or 2 from exit(), a message on stderr containing each needle.
  void expect_clean_failure(const CliResult& r, int status, const std::vector<std::string>& needles) {
    EXPECT_TRUE(r.exited) << "killed by a signal; stderr: " << r.err;
    EXPECT_EQ(r.status, status) << "stderr: " << r.err;
    EXPECT_FALSE(r.err.empty());
    for (const auto& n : needles) EXPECT_NE(r.err.find(n), std::string::npos) << "'" << n << "' not in stderr: " << r.err;
  }

  std::string write_file(const std::string& name, const std::string& text) {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << text;
    return path;
  }

  std::string dir_;
};

const std::string kQuantJson =
    R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":0},)"
    R"("config":{"vec":8,"threads":256,"unroll":2}})";

TEST_F(CliTest, ListShowsBothFamilies) {
  const CliResult r = run({"list"});
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  for (const FamilyDef* f : all_families()) {
    const std::string head =
        fmt::format("{} ({} valid variants, header {})\n", f->name, enumerate_specs(*f).size(), f->header);
    EXPECT_NE(r.out.find(head), std::string::npos) << head << "not in:\n" << r.out;
    for (const ParamDef& p : f->params) EXPECT_NE(r.out.find(" " + p.name + " "), std::string::npos) << p.name;
  }
  EXPECT_EQ(r.out.rfind("quantize (", 0), 0u);
  EXPECT_NE(r.out.find("\ndequantize ("), std::string::npos);
  EXPECT_NE(r.out.find("\ngemm ("), std::string::npos);
}

TEST_F(CliTest, ListSpecsOneSpecPerLine) {
  const CliResult r = run({"list", "--specs", "--family", "dequantize"});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::vector<KernelSpec> want = enumerate_specs(dequantize_family());
  std::istringstream lines(r.out);
  std::string line;
  std::size_t n = 0;
  while (std::getline(lines, line)) {
    ASSERT_LT(n, want.size());
    KernelSpec got;
    ASSERT_NO_THROW(got = spec_from_json(line)) << line;
    EXPECT_EQ(got, want[n]) << line;
    // The unchecked printing is the checked one's bytes.
    EXPECT_EQ(line, spec_to_json(want[n]));
    ++n;
  }
  EXPECT_EQ(n, want.size());
  EXPECT_EQ(std::count(r.out.begin(), r.out.end(), '\n'), static_cast<long>(want.size()));
  // --family=NAME works too and selects only that family.
  const CliResult q = run({"list", "--specs", "--family=quantize"});
  EXPECT_EQ(q.status, 0);
  EXPECT_EQ(std::count(q.out.begin(), q.out.end(), '\n'),
            static_cast<long>(enumerate_specs(quantize_family()).size()));
  EXPECT_EQ(q.out.find("\"family\":\"dequantize\""), std::string::npos);
}

TEST_F(CliTest, ListJsonDescribesTheSpaces) {
  const CliResult r = run({"list", "--json", "--family", "quantize,dequantize"});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.err, "");
  const nlohmann::json doc = nlohmann::json::parse(r.out);
  ASSERT_TRUE(doc.is_array());
  ASSERT_EQ(doc.size(), 2u);
  for (std::size_t i = 0; i < 2; ++i) {
    const FamilyDef& f = i == 0 ? quantize_family() : dequantize_family();
    const nlohmann::json& entry = doc[i];
    EXPECT_EQ(entry.at("family"), f.name);
    EXPECT_EQ(entry.at("header"), f.header);
    EXPECT_EQ(entry.at("valid_variants").get<std::size_t>(), enumerate_specs(f).size());
    ASSERT_EQ(entry.at("params").size(), f.params.size());
    for (std::size_t k = 0; k < f.params.size(); ++k) {
      const nlohmann::json& p = entry.at("params")[k];
      EXPECT_EQ(p.at("name"), f.params[k].name);
      EXPECT_EQ(p.at("kind"), f.params[k].is_config ? "config" : "problem");
      EXPECT_EQ(p.at("doc"), f.params[k].doc);
      ASSERT_EQ(p.at("allowed").size(), f.params[k].allowed.size());
      for (std::size_t v = 0; v < f.params[k].allowed.size(); ++v)
        EXPECT_EQ(param_to_string(f.params[k].allowed[v]),
                  p.at("allowed")[v].is_string()
                      ? p.at("allowed")[v].get<std::string>()
                      : std::to_string(p.at("allowed")[v].get<std::int64_t>()));
    }
  }
  // One document or one spec per line: asking for both is a usage error.
  const CliResult both = run({"list", "--json", "--specs", "--family", "quantize"});
  EXPECT_EQ(both.status, 2) << both.out;
  EXPECT_EQ(both.out, "");
}

// The lines of `out`, each a spec.
std::vector<KernelSpec> spec_lines(const std::string& out) {
  std::vector<KernelSpec> specs;
  std::istringstream lines(out);
  for (std::string line; std::getline(lines, line);) specs.push_back(spec_from_json(line));
  return specs;
}

TEST_F(CliTest, ListWhereKeepsToTheValues) {
  // Problem and config values together, checked against the family's own enumeration.
  const CliResult q =
      run({"list", "--specs", "--family", "quantize", "--where", "granularity=1x128,vec=8"});
  ASSERT_EQ(q.status, 0) << q.err;
  std::vector<KernelSpec> want;
  for (const KernelSpec& s : enumerate_specs(quantize_family()))
    if (s.s("granularity") == "1x128" && s.i("vec") == 8) want.push_back(s);
  ASSERT_FALSE(want.empty());
  EXPECT_EQ(spec_lines(q.out), want);
  // A whole gemm problem and one config value: the problem's valid configs with that value.
  const std::string problem =
      "a_format=e4m3,b_format=e4m3,out=bf16,scale=block,bias=0,accum=precise,layout=dense";
  const CliResult g =
      run({"list", "--specs", "--family", "gemm", "--where", problem + ",block_m=128"});
  ASSERT_EQ(g.status, 0) << g.err;
  std::vector<KernelSpec> configs;
  KernelSpec p{"gemm",
               {{"a_format", "e4m3"}, {"b_format", "e4m3"}, {"out", "bf16"}, {"scale", "block"},
                {"bias", std::int64_t{0}}, {"accum", "precise"}, {"layout", "dense"}}};
  for (const KernelSpec& s : enumerate_configs(gemm_family(), p))
    if (s.i("block_m") == 128) configs.push_back(s);
  ASSERT_FALSE(configs.empty());
  const std::vector<KernelSpec> got = spec_lines(g.out);
  ASSERT_EQ(got.size(), configs.size());
  for (const KernelSpec& s : got) {
    EXPECT_EQ(s.s("scale"), "block");
    EXPECT_EQ(s.i("block_m"), 128);
  }
  // A parameter held absent at its default matches that default (swap_ab = 0 is not written).
  const CliResult unswapped =
      run({"list", "--family", "gemm", "--where", problem + ",block_m=128,swap_ab=0"});
  const auto swapped = std::count_if(configs.begin(), configs.end(), [](const KernelSpec& s) {
    return s.params.count("swap_ab") && s.i("swap_ab") == 1;
  });
  ASSERT_GT(swapped, 0);
  EXPECT_NE(unswapped.out.find(
                fmt::format("gemm ({} valid variants with ", configs.size() - swapped)),
            std::string::npos)
      << unswapped.out;
  // The counts and the JSON document keep to it too; families without the parameter are left out.
  const CliResult j = run({"list", "--json", "--where", "format=e5m2"});
  ASSERT_EQ(j.status, 0) << j.err;
  const nlohmann::json doc = nlohmann::json::parse(j.out);
  ASSERT_EQ(doc.size(), 2u);  // quantize and dequantize; gemm has a_format and b_format
  EXPECT_EQ(doc[0].at("where"), "format=e5m2");
  std::size_t e5m2 = 0;
  for (const KernelSpec& s : enumerate_specs(quantize_family())) e5m2 += s.s("format") == "e5m2";
  EXPECT_EQ(doc[0].at("valid_variants").get<std::size_t>(), e5m2);
}

TEST_F(CliTest, ListWhereRefusesWhatItCannotRead) {
  const std::vector<std::pair<std::string, std::string>> usage = {
      {"scale=bogus", "is not one of"},         {"nokey=1", "unknown parameter"},
      {"epilogue=tma", "chosen by the runtime"}, {"scale=block,scale=tensor", "given twice"},
      {"scale", "expected KEY=VALUE"},          {"=block", "expected KEY=VALUE"},
      {"scale=", "expected KEY=VALUE"},         {",", "expected KEY=VALUE"},
      {"block_m=0128x", "is not one of"},       {"", "expected KEY=VALUE"},
      {"scale=" + std::string(100000, 'x'), "is not one of"},
      {std::string(100000, 'k') + "=1", "unknown parameter"}};
  for (const auto& [where, needle] : usage) {
    const CliResult r = run({"list", "--specs", "--where", where});
    EXPECT_EQ(r.status, 2) << where;
    EXPECT_EQ(r.out, "") << where;
    EXPECT_NE(r.err.find(needle), std::string::npos) << where << ": " << r.err;
  }
  // A huge message is not echoed whole: values are cut in what the error prints.
  const CliResult huge = run({"list", "--where", "scale=" + std::string(100000, 'x')});
  EXPECT_LT(huge.err.size(), 2000u);
  // The option without its value, and --specs given a value: usage errors.
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"list", "--specs", "--where"},
        std::vector<std::string>{"list", "--specs=maybe", "--family", "quantize"}}) {
    const CliResult u = run(args);
    EXPECT_EQ(u.status, 2) << args.back();
    EXPECT_EQ(u.out, "") << args.back();
  }
  // Known to a family, but not to the one selected.
  const CliResult r = run({"list", "--specs", "--family", "quantize", "--where", "scale=block"});
  EXPECT_EQ(r.status, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("--where: unknown parameter \"scale\""), std::string::npos) << r.err;
}

TEST_F(CliTest, EmitPrintsRenderSource) {
  const std::vector<KernelSpec> specs = {
      spec_from_json(kQuantJson),
      make_quantize_spec({DType::fp32, Fp8Format::e5m2, Granularity::tensor, true}, {4, 512, 4}),
      make_dequantize_spec({Fp8Format::e5m2, DType::fp16, Granularity::block128}, {16, 64, 1}),
      make_gemm_spec({Fp8Format::e5m2, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise, true}, {64, 24, 3, 16})};
  for (const KernelSpec& s : specs) {
    const CliResult r = run({"emit", "--spec", spec_to_json(s)});
    ASSERT_TRUE(r.exited);
    EXPECT_EQ(r.status, 0) << r.err;
    EXPECT_EQ(r.out, render_source(s));
    EXPECT_EQ(r.err, "");
  }
  const CliResult eq = run({"emit", "--spec=" + kQuantJson});
  EXPECT_EQ(eq.status, 0) << eq.err;
  EXPECT_EQ(eq.out, render_source(spec_from_json(kQuantJson)));
}

TEST_F(CliTest, EmitReadsSpecFile) {
  const KernelSpec s = make_dequantize_spec({Fp8Format::e4m3, DType::fp32, Granularity::row}, {8, 512, 4});
  const std::string path = write_file("spec.json", spec_to_json(s, 2) + "\n");
  const CliResult r = run({"emit", "--spec", path});
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_EQ(r.out, render_source(s));
}

TEST_F(CliTest, CompileWritesCubinAndPtx) {
  const std::string cubin = dir_ + "/k.cubin", ptx = dir_ + "/k.ptx";
  const CliResult r = run({"compile", "--spec", kQuantJson, "--ptx", ptx, "--cubin", cubin});
  ASSERT_TRUE(r.exited);
  ASSERT_EQ(r.status, 0) << r.err;
  const std::string bin = read_bytes(cubin), text = read_bytes(ptx);
  ASSERT_GT(bin.size(), 4u);
  EXPECT_EQ(bin.substr(0, 4), "\x7f" "ELF");
  EXPECT_NE(text.find(".target sm_90a"), std::string::npos);
  EXPECT_NE(text.find(".entry fp8jit_quantize("), std::string::npos);
  EXPECT_EQ(text.find('\0'), std::string::npos);
  EXPECT_NE(r.out.find(fmt::format("quant_sm90_bf16_e4m3_1x128_v8_t256_u2: sm_90a cubin {} bytes", bin.size())),
            std::string::npos)
      << r.out;
}

TEST_F(CliTest, InfoWithoutGpu) {
  if (driver::available()) GTEST_SKIP() << "a GPU is present";
  const CliResult r = run({"info"});
  ASSERT_TRUE(r.exited);
  EXPECT_EQ(r.status, 0) << r.err;
  EXPECT_NE(r.out.find("gpu:        none ("), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(fmt::format("hash {:016x}", embedded_headers().hash)), std::string::npos) << r.out;
}

TEST_F(CliTest, HelpAndUsage) {
  const CliResult h = run({"--help"});
  EXPECT_EQ(h.status, 0);
  EXPECT_NE(h.out.find("Usage: fp8jit [OPTIONS] SUBCOMMAND"), std::string::npos) << h.out;
  for (const char* cmd : {"info", "list", "emit", "compile", "compile-all", "quantize", "dequantize", "gemm",
                          "select-gemm", "tune", "precompile", "demo", "db", "bench"})
    EXPECT_NE(h.out.find(std::string("  ") + cmd + " "), std::string::npos) << cmd << " not in:\n" << h.out;
  const CliResult none = run({});
  EXPECT_TRUE(none.exited);
  EXPECT_EQ(none.status, 2);
  EXPECT_NE(none.err.find("Usage: fp8jit [OPTIONS] SUBCOMMAND"), std::string::npos);
}

TEST_F(CliTest, ErrorsExitCleanly) {
  expect_clean_failure(run({"frobnicate"}), 2, {"fp8jit: unknown command \"frobnicate\"", "fp8jit --help"});
  expect_clean_failure(run({"list", "--bogus"}), 2, {"fp8jit list: ", "--bogus", "fp8jit list --help"});
  expect_clean_failure(run({"list", "json"}), 2, {"json", "not expected"});
  expect_clean_failure(run({"list", "--family", "conv2d"}), 2,
                       {"--family", "unknown family \"conv2d\" (known: quantize, dequantize, gemm)"});
  // compile-all checks every family and --sample before compiling anything.
  expect_clean_failure(run({"compile-all", "--family", "quantize,conv2d"}), 2, {"unknown family \"conv2d\""});
  expect_clean_failure(run({"compile-all", "--family", ","}), 2, {"--family", "expected one or more"});
  expect_clean_failure(run({"compile-all", "--family", "gemm", "--sample", "-1"}), 2, {"--sample", "-1", "out of range"});
  expect_clean_failure(run({"compile-all", "--family", "gemm", "--jobs", "0"}), 2, {"--jobs", "0 is out of range [1, 1024]"});
  expect_clean_failure(run({"emit"}), 2, {"--spec is required"});
  expect_clean_failure(run({"emit", "--spec"}), 2, {"--spec", "required"});
  expect_clean_failure(run({"compile", "--ptx", dir_ + "/x.ptx"}), 2, {"--spec is required"});
  expect_clean_failure(run({"emit", "--spec", "{\"family\":\"quantize\","}), 1, {"not valid JSON"});
  expect_clean_failure(run({"emit", "--spec", "{}"}), 1, {"spec.family"});
  expect_clean_failure(run({"emit", "--spec", dir_ + "/does_not_exist.json"}), 1,
                       {"--spec", "does_not_exist.json", "no such file"});
  expect_clean_failure(run({"emit", "--spec", write_file("bad.json", "not json at all")}), 1, {"not valid JSON"});
  // The tile strategy (per row with a transposed output) reads no unroll: 2 would duplicate 1.
  expect_clean_failure(run({"compile", "--spec", R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3",)"
                                                 R"("granularity":"row","transpose":1},"config":{"vec":8,"threads":256,"unroll":2}})"}),
                       1, {"unroll = 2", "tile strategy"});
}

TEST_F(CliTest, HostileSpecIsRejectedBeforeRendering) {
  const std::string hostile =
      R"({"family":"quantize","problem":{"input":"bf16\"; system(\"rm -rf /\"); //","format":"e4m3",)"
      R"("granularity":"1x128","transpose":0},"config":{"vec":8,"threads":256,"unroll":2}})";
  for (const char* cmd : {"emit", "compile"}) {
    const std::string marker = dir_ + "/out.cubin";
    const CliResult r = run({cmd, "--spec", hostile, "--cubin", marker});
    if (std::string(cmd) == "emit") {
      expect_clean_failure(r, 2, {"--cubin"});  // emit takes no --cubin: rejected as an option
      const CliResult e = run({cmd, "--spec", hostile});
      expect_clean_failure(e, 1, {"quantize.input", "rm -rf"});
      EXPECT_EQ(e.out, "");
    } else {
      expect_clean_failure(r, 1, {"quantize.input", "one of {bf16, fp16, fp32}"});
      EXPECT_EQ(r.out, "");
      EXPECT_FALSE(fs::exists(marker));
    }
  }
  const CliResult g = run({"emit", "--spec", write_file("g.json", R"({"family":"quantize","problem":{"input":"bf16",)"
                                                                 R"("format":"e4m3","granularity":"1x128\n#include </etc/passwd>",)"
                                                                 R"("transpose":0},"config":{"vec":8,"threads":256,"unroll":2}})")});
  expect_clean_failure(g, 1, {"quantize.granularity"});
  EXPECT_EQ(g.out, "");
}

// A deeply nested value must be refused while parsing: nlohmann's serializer (used by error
// messages) recurses once per level, so echoing such a value back would overflow the stack.
TEST_F(CliTest, DeeplyNestedSpecFailsCleanly) {
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_clean_failure(run({"emit", "--spec", write_file("deep.json", deep)}), 1, {"nests deeper than"});
  expect_clean_failure(run({"emit", "--spec", write_file("deep2.json", R"({"family":"quantize","problem":{"input":)" + deep + "}}")}),
                       1, {"nests deeper than"});
}

TEST_F(CliTest, ModeratelyNestedSpecFailsCleanly) {
  const std::string nested = std::string(1000, '[') + std::string(1000, ']');
  expect_clean_failure(run({"emit", "--spec", write_file("nested.json", nested)}), 1, {"nests deeper than"});
  const std::string shallow = R"({"family":"quantize","problem":{"input":[1,[2]]}})";
  expect_clean_failure(run({"emit", "--spec", write_file("shallow.json", shallow)}), 1,
                       {"problem.input = <array of 2 entries>"});
}

// `fp8jit gemm --config` is read before the GPU is needed: a bad one fails the same everywhere.
TEST_F(CliTest, GemmConfigOverridesAreChecked) {
  expect_clean_failure(run({"gemm", "--config", "{\"block_n\":"}), 1, {"--config", "not JSON"});
  expect_clean_failure(run({"gemm", "--config", "[160]"}), 1, {"--config", "[160]", "JSON object"});
  expect_clean_failure(run({"gemm", "--config", "{\"tile\":160}"}), 1, {"--config key = tile", "block_n"});
  expect_clean_failure(run({"gemm", "--config", "{\"block_n\":\"160\"}"}), 1,
                       {"--config block_n = \"160\"", "integer"});
  if (!driver::available())
    expect_clean_failure(run({"gemm", "--config", "{\"block_n\":160,\"stages\":5}"}), 1, {"needs a GPU"});
}

// --bias: the spec of a GEMM with a bias, which the heuristic may give another tile (block
// scaling at 4096x4096x7168: 256x128 without, 128-row tiles with, whose registers hold the
// bias's columns beside the accumulators).
TEST_F(CliTest, SelectGemmTakesABias) {
  // Short K (4 K blocks): the tall tile is timed there without a bias only.
  const CliResult plain = run({"select-gemm", "--m", "1024", "--n", "16384", "--k", "512"});
  const CliResult biased =
      run({"select-gemm", "--m", "1024", "--n", "16384", "--k", "512", "--bias"});
  ASSERT_EQ(plain.status, 0) << plain.err;
  ASSERT_EQ(biased.status, 0) << biased.err;
  EXPECT_NE(plain.out.find("\"bias\":0"), std::string::npos) << plain.out;
  EXPECT_NE(biased.out.find("\"bias\":1"), std::string::npos) << biased.out;
  EXPECT_NE(plain.out.find("\"block_m\":256"), std::string::npos) << plain.out;
  EXPECT_NE(biased.out.find("\"block_m\":128"), std::string::npos) << biased.out;
  if (!driver::available())
    expect_clean_failure(run({"gemm", "--bias", "--scale", "tensor"}), 1, {"needs a GPU"});
}

TEST_F(CliTest, QuantizeWithoutGpuFailsCleanly) {
  if (driver::available()) GTEST_SKIP() << "a GPU is present";
  const CliResult r = run({"quantize", "--m", "256", "--k", "512"});
  expect_clean_failure(r, 1, {"needs a GPU", "libcuda"});
  expect_clean_failure(run({"dequantize"}), 1, {"needs a GPU"});
}

}  // namespace
}  // namespace fp8jit
