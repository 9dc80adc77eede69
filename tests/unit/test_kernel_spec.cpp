// KernelSpec: JSON round trips, canonical names and hashes, and validation of everything a spec
// read from a file, a database or the command line could contain.
#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit {
namespace {

using test::invalid_message;

constexpr const char* kQuant1x128 =
    R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":0},)"
    R"("config":{"vec":8,"threads":256,"unroll":2}})";

KernelSpec quant_spec() { return spec_from_json(kQuant1x128); }

KernelSpec dequant_spec() {
  return make_dequantize_spec({Fp8Format::e4m3, DType::bf16, Granularity::block128}, {16, 256, 2});
}


// `spec` must fail validation, JSON conversion, naming, hashing and rendering alike, with a
// message that contains each of `needles`.
void expect_rejected(const KernelSpec& spec, const std::vector<std::string>& needles) {
  const std::string msg = invalid_message([&] { validate_spec(spec); });
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  invalid_message([&] { (void)spec_name(spec); });
  invalid_message([&] { (void)spec_hash(spec); });
  invalid_message([&] { (void)spec_to_json(spec); });
  invalid_message([&] { (void)render_source(spec); });
}

void expect_json_rejected(const std::string& json, const std::vector<std::string>& needles) {
  const std::string msg = invalid_message([&] { (void)spec_from_json(json); });
  for (const auto& n : needles) EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
}

KernelSpec with(KernelSpec spec, const std::string& key, ParamValue v) {
  spec.params[key] = std::move(v);
  return spec;
}

// The config space sizes, from the family definitions (so a widened space needs no test edit):
// configs per problem, and configs of the tile strategy (unroll fixed to 1).
std::size_t allowed_count(const FamilyDef& f, const std::string& name) {
  for (const ParamDef& d : f.params)
    if (d.name == name) return d.allowed.size();
  ADD_FAILURE() << "no parameter " << name;
  return 0;
}
std::size_t configs_per_problem(const FamilyDef& f) {
  return allowed_count(f, "vec") * allowed_count(f, "threads") * allowed_count(f, "unroll");
}
std::size_t tile_configs(const FamilyDef& f) { return allowed_count(f, "vec") * allowed_count(f, "threads"); }

// "one of {4, 8, 16}" as validation messages print it.
std::string allowed_set(const FamilyDef& f, const std::string& name) {
  std::string out;
  for (const ParamDef& d : f.params)
    if (d.name == name)
      for (const ParamValue& v : d.allowed) out += (out.empty() ? "" : ", ") + param_to_string(v);
  return "one of {" + out + "}";
}

std::size_t quantize_count() {
  // Per input x format: tensor (2 transposes), row, 1x128 with all configs; 1x128 and row
  // transposed and 128x128 (2 transposes) on the tile strategy. Per input: DeepSeek's act_quant
  // arithmetic (1x128, E4M3, no transpose) with all configs. Per input x format: column sums of
  // every transposed granularity (tensor with all configs, the others on the tile strategy).
  const FamilyDef& f = quantize_family();
  return 3 * 2 * (4 * configs_per_problem(f) + 4 * tile_configs(f)) + 3 * configs_per_problem(f) +
         3 * 2 * (configs_per_problem(f) + 3 * tile_configs(f));
}
std::size_t dequantize_count() { return 2 * 3 * 4 * configs_per_problem(dequantize_family()); }

// ---- round trips, names, hashes ------------------------------------------------------------

// Every quantize and dequantize spec; gemm (about 10^5 variants) by a spread sample that includes
// every config parameter's extremes.
TEST(KernelSpecJson, RoundTripEveryEnumeratedSpec) {
  std::vector<KernelSpec> specs = enumerate_specs(quantize_family());
  const std::vector<KernelSpec> dq = enumerate_specs(dequantize_family());
  const std::vector<KernelSpec> gemm = spread_sample(gemm_family(), 400);
  ASSERT_GE(gemm.size(), 400u);
  specs.insert(specs.end(), dq.begin(), dq.end());
  specs.insert(specs.end(), gemm.begin(), gemm.end());
  std::set<std::string> families;
  for (const KernelSpec& s : specs) {
    const std::string json = spec_to_json(s);
    const KernelSpec back = spec_from_json(json);
    ASSERT_EQ(back, s) << json;
    ASSERT_EQ(spec_name(back), spec_name(s));
    ASSERT_EQ(spec_hash(back), spec_hash(s));
    ASSERT_EQ(spec_to_json(back), json);
    // The indented form parses to the same spec.
    ASSERT_EQ(spec_from_json(spec_to_json(s, 2)), s);
    families.insert(s.family);
  }
  EXPECT_EQ(specs.size(), quantize_count() + dequantize_count() + gemm.size());
  // Every family is covered: a new family needs a decision here.
  EXPECT_EQ(families.size(), all_families().size());
}

TEST(KernelSpecJson, EnumerationSizes) {
  EXPECT_EQ(enumerate_specs(quantize_family()).size(), quantize_count());
  EXPECT_EQ(enumerate_specs(dequantize_family()).size(), dequantize_count());
  // The spaces this suite was written against, at least (they may grow).
  EXPECT_GE(quantize_count(), 1080u);
  EXPECT_GE(dequantize_count(), 864u);
}

TEST(KernelSpecName, UniqueAcrossAllSpecsAndHashesToo) {
  std::set<std::string> names;
  std::set<std::uint64_t> hashes;
  std::size_t total = 0;
  for (const FamilyDef* f : all_families())
    for (const KernelSpec& s : enumerate_specs(*f)) {
      names.insert(spec_name(s));
      hashes.insert(spec_hash(s));
      ++total;
    }
  EXPECT_EQ(names.size(), total);
  EXPECT_EQ(hashes.size(), total);
}

TEST(KernelSpecName, PinnedNamesAndHashes) {
  // Computed once and pinned: a change means every cache entry and tuning record keyed by these
  // is invalidated, which must be a deliberate decision.
  const KernelSpec q = quant_spec();
  EXPECT_EQ(spec_name(q), "quant_sm90_bf16_e4m3_1x128_v8_t256_u2");
  EXPECT_EQ(spec_to_json(q),
            R"({"config":{"threads":256,"unroll":2,"vec":8},"family":"quantize",)"
            R"("problem":{"format":"e4m3","granularity":"1x128","input":"bf16","transpose":0}})");
  EXPECT_EQ(spec_hash(q), 0x2bfb9383524b6afdull);

  const KernelSpec d = dequant_spec();
  EXPECT_EQ(spec_name(d), "dequant_sm90_e4m3_bf16_128x128_v16_t256_u2");
  EXPECT_EQ(spec_hash(d), 0xd140f670d78f5841ull);

  const KernelSpec t = make_quantize_spec({DType::fp32, Fp8Format::e5m2, Granularity::tensor, true}, {4, 512, 4});
  EXPECT_EQ(spec_name(t), "quant_sm90_fp32_e5m2_tensor_tr_v4_t512_u4");
}

TEST(KernelSpecName, HashIgnoresJsonKeyOrderAndWhitespace) {
  const KernelSpec a = spec_from_json(
      "{ \"config\" : {\"unroll\":2, \"vec\":8, \"threads\":256},\n \"problem\": {\"transpose\":0,"
      "\"granularity\":\"1x128\",\"format\":\"e4m3\",\"input\":\"bf16\"}, \"family\":\"quantize\" }");
  EXPECT_EQ(a, quant_spec());
  EXPECT_EQ(spec_hash(a), spec_hash(quant_spec()));
}

// ---- validation: JSON shape ----------------------------------------------------------------

TEST(KernelSpecValidation, UnknownFamily) {
  // The message names the unknown family and lists every known one.
  expect_json_rejected(R"({"family":"conv2d","problem":{},"config":{}})",
                       {"family = conv2d", "quantize", "dequantize", "gemm"});
  expect_json_rejected(R"({"family":"GEMM","problem":{},"config":{}})", {"family = GEMM"});
  expect_rejected(KernelSpec{"gemm2", make_gemm_spec({}, {}).params}, {"family", "gemm2"});
  expect_rejected(KernelSpec{"quantise", quant_spec().params}, {"family", "quantise"});
  expect_rejected(KernelSpec{"", {}}, {"family"});
}

TEST(KernelSpecValidation, MissingParam) {
  KernelSpec s = quant_spec();
  s.params.erase("granularity");
  expect_rejected(s, {"quantize.granularity", "<missing>"});
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128"},)"
                       R"("config":{"vec":8,"threads":256,"unroll":2}})",
                       {"quantize.transpose", "<missing>"});
  expect_json_rejected(R"({"family":"dequantize"})", {"dequantize.format", "<missing>"});
  expect_json_rejected(R"({"problem":{},"config":{}})", {"spec.family", "null"});
  expect_json_rejected(R"({"family":7})", {"spec.family", "7"});
}

TEST(KernelSpecValidation, UnknownExtraParam) {
  expect_rejected(with(quant_spec(), "swizzle", std::int64_t{1}), {"quantize.swizzle", "unknown parameter"});
  expect_rejected(with(dequant_spec(), "transpose", std::int64_t{0}), {"dequantize.transpose", "unknown"});
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128",)"
                       R"("transpose":0},"config":{"vec":8,"threads":256,"unroll":2,"stages":3}})",
                       {"quantize.stages", "3", "unknown parameter"});
}

TEST(KernelSpecValidation, WrongTypes) {
  expect_rejected(with(quant_spec(), "vec", std::string("8")), {"quantize.vec", "8", "{4, 8, 16}"});
  expect_rejected(with(quant_spec(), "input", std::int64_t{1}), {"quantize.input", "1", "bf16"});
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128",)"
                       R"("transpose":0},"config":{"vec":8.0,"threads":256,"unroll":2}})",
                       {"config.vec", "8.0", "integer or a string"});
  expect_json_rejected(R"({"family":"quantize","problem":{"input":["bf16"],"format":"e4m3","granularity":"1x128",)"
                       R"("transpose":0},"config":{"vec":8,"threads":256,"unroll":2}})",
                       {"problem.input", "<array of 1 entries>"});
  expect_json_rejected(R"({"family":"quantize","problem":{"input":null}})", {"problem.input", "null"});
}

// The value "8" (a string) must read differently from the integer 8 in the message.
TEST(KernelSpecValidation, WrongTypeMessageShowsTheString) {
  const std::string msg = invalid_message([&] { validate_spec(with(quant_spec(), "vec", std::string("8"))); });
  EXPECT_NE(msg.find("\"8\""), std::string::npos) << msg;
}

TEST(KernelSpecValidation, OutOfSetIntegers) {
  const FamilyDef& q = quantize_family();
  expect_rejected(with(quant_spec(), "vec", std::int64_t{3}), {"quantize.vec = 3", allowed_set(q, "vec")});
  expect_rejected(with(quant_spec(), "threads", std::int64_t{96}), {"quantize.threads = 96", allowed_set(q, "threads")});
  expect_rejected(with(quant_spec(), "unroll", std::int64_t{0}), {"quantize.unroll = 0", allowed_set(q, "unroll")});
  expect_rejected(with(quant_spec(), "vec", std::int64_t{-8}), {"quantize.vec = -8"});
  expect_rejected(with(quant_spec(), "threads", std::int64_t{1} << 62), {"quantize.threads = 4611686018427387904"});
  expect_rejected(with(quant_spec(), "unroll", std::int64_t{1} << 62), {"quantize.unroll = 4611686018427387904"});
  expect_rejected(with(quant_spec(), "transpose", std::int64_t{2}), {"quantize.transpose = 2", "one of {0, 1}"});
  expect_rejected(with(dequant_spec(), "vec", std::int64_t{32}), {"dequantize.vec = 32"});
  expect_json_rejected(R"({"family":"dequantize","problem":{"format":"e4m3","output":"bf16","granularity":"row"},)"
                       R"("config":{"vec":16,"threads":-256,"unroll":2}})",
                       {"dequantize.threads = -256"});
  expect_json_rejected(R"({"family":"dequantize","problem":{"format":"e4m3","output":"bf16","granularity":"row"},)"
                       R"("config":{"vec":16,"threads":256,"unroll":18446744073709551615}})",
                       {"config.unroll", "integer out of range"});
}

// json::parse throws json::out_of_range (406), not parse_error, for a number literal that
// overflows a double: it must still surface as fp8jit::Error(invalid_argument).
TEST(KernelSpecValidation, NumberOverflowIsInvalidArgument) {
  expect_json_rejected(R"({"family":"dequantize","problem":{"format":"e4m3","output":"bf16","granularity":"row"},)"
                       R"("config":{"vec":16,"threads":256,"unroll":1e400}})",
                       {"not valid JSON", "1e400"});
}

TEST(KernelSpecValidation, HostileStringsNeverRendered) {
  const std::vector<std::string> hostile = {
      "bf16\"; system(\"rm -rf /\"); //", "1x128\n#include <evil.h>", "../../etc/passwd", "",
      "bf16 ", "BF16", "b\xc3\xa9" "f16", "\xef\xbd\x82\xef\xbd\x86" "16", std::string("bf16\0x", 6)};
  for (const std::string& h : hostile) {
    for (const char* key : {"input", "format", "granularity"}) {
      const KernelSpec s = with(quant_spec(), key, h);
      SCOPED_TRACE(std::string(key) + " = " + h);
      expect_rejected(s, {std::string("quantize.") + key});
    }
    expect_rejected(with(dequant_spec(), "output", h), {"dequantize.output"});
  }
  const std::string msg = invalid_message([&] {
    (void)spec_from_json(R"({"family":"quantize","problem":{"input":"bf16\"; system(\"rm -rf /\"); //",)"
                         R"("format":"e4m3","granularity":"1x128","transpose":0},"config":{"vec":8,"threads":256,"unroll":2}})");
  });
  EXPECT_NE(msg.find("quantize.input = \"bf16\"; system(\"rm -rf /\"); //\""), std::string::npos) << msg;
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128\n",)"
                       R"("transpose":0},"config":{"vec":8,"threads":256,"unroll":2}})",
                       {"quantize.granularity"});
  expect_json_rejected(R"({"family":"../../etc/passwd"})", {"family", "../../etc/passwd"});
}

TEST(KernelSpecValidation, ParamInWrongSection) {
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128",)"
                       R"("transpose":0,"vec":8},"config":{"threads":256,"unroll":2}})",
                       {"quantize.vec", "8", "belongs in \"config\""});
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128"},)"
                       R"("config":{"transpose":0,"vec":8,"threads":256,"unroll":2}})",
                       {"quantize.transpose", "belongs in \"problem\""});
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128",)"
                       R"("transpose":0,"vec":8},"config":{"vec":8,"threads":256,"unroll":2}})",
                       {"both problem and config"});
}

TEST(KernelSpecValidation, TopLevelShape) {
  expect_json_rejected(R"({"family":"quantize","problem":{},"config":{},"extra":1})", {"spec.extra"});
  expect_json_rejected(R"({"family":"quantize","problem":[],"config":{}})", {"problem", "JSON object"});
  expect_json_rejected(R"({"family":"quantize","problem":{},"config":"vec=8"})", {"config", "JSON object"});
  expect_json_rejected("[1,2,3]", {"spec", "expected a JSON object"});
  expect_json_rejected("\"quantize\"", {"spec", "expected a JSON object"});
  expect_json_rejected("42", {"spec", "expected a JSON object"});
  expect_json_rejected("null", {"spec", "expected a JSON object"});
  expect_json_rejected("", {"not valid JSON"});
  expect_json_rejected("{\"family\":\"quantize\",", {"not valid JSON"});
  expect_json_rejected("{'family':'quantize'}", {"not valid JSON"});
  expect_json_rejected(std::string(kQuant1x128) + "x", {"not valid JSON"});
  expect_json_rejected("{\"family\":\"quantize\xff\"}", {"not valid JSON"});
}

TEST(KernelSpecValidation, BooleansReadAsZeroOrOne) {
  // read_params maps JSON booleans to 0/1: accepted where 0/1 are allowed, canonicalised to ints.
  const KernelSpec t = spec_from_json(
      R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":true},)"
      R"("config":{"vec":8,"threads":256,"unroll":1}})");
  EXPECT_EQ(t.i("transpose"), 1);
  EXPECT_NE(spec_to_json(t).find("\"transpose\":1"), std::string::npos);
  const KernelSpec f = spec_from_json(
      R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128","transpose":false},)"
      R"("config":{"vec":8,"threads":256,"unroll":2}})");
  EXPECT_EQ(f, quant_spec());
  expect_json_rejected(R"({"family":"quantize","problem":{"input":"bf16","format":"e4m3","granularity":"1x128",)"
                       R"("transpose":0},"config":{"vec":true,"threads":256,"unroll":2}})",
                       {"quantize.vec = 1"});
  expect_rejected(with(quant_spec(), "transpose", std::string("0")), {"quantize.transpose"});
}

// ---- cross-parameter rules -----------------------------------------------------------------

// Per row with a transposed output runs on the tile strategy (three kernels: row and column
// amaxes, the cast, the scales), which takes unroll 1 only.
TEST(KernelSpecRules, RowWithTransposeIsATileSpec) {
  KernelSpec s = with(with(with(quant_spec(), "granularity", std::string("row")), "transpose", std::int64_t{1}),
                      "unroll", std::int64_t{1});
  EXPECT_NO_THROW(validate_spec(s));
  EXPECT_EQ(spec_entry_points(s), (std::vector<std::string>{"fp8jit_amax", "fp8jit_quantize", "fp8jit_finalize"}));
  expect_rejected(with(s, "unroll", std::int64_t{2}), {"invalid quantize spec", "unroll = 2", "tile strategy"});
}

TEST(KernelSpecRules, TileStrategyNeedsUnrollOne) {
  const KernelSpec block = with(quant_spec(), "granularity", std::string("128x128"));
  for (std::int64_t u : {2, 4})
    expect_rejected(with(block, "unroll", u), {"invalid quantize spec", "unroll = " + std::to_string(u), "tile"});
  EXPECT_NO_THROW(validate_spec(with(block, "unroll", std::int64_t{1})));
  // 1x128 with transpose also takes the tile strategy.
  const KernelSpec tr = with(quant_spec(), "transpose", std::int64_t{1});
  expect_rejected(tr, {"unroll = 2", "tile"});
  EXPECT_NO_THROW(validate_spec(with(tr, "unroll", std::int64_t{1})));
  // Per-tensor: unroll drives the amax pass, so every unroll is valid even with transpose.
  const KernelSpec tensor_tr = with(with(quant_spec(), "granularity", std::string("tensor")), "transpose", std::int64_t{1});
  for (std::int64_t u : {1, 2, 4}) EXPECT_NO_THROW(validate_spec(with(tensor_tr, "unroll", u)));
  // Dequantize has no such rule.
  for (std::int64_t u : {1, 2, 4}) EXPECT_NO_THROW(validate_spec(with(dequant_spec(), "unroll", u)));
}

// ---- typed front doors ---------------------------------------------------------------------

std::vector<QuantizeProblem> quantize_problems() {
  std::vector<QuantizeProblem> out;
  std::set<std::string> seen;
  for (const KernelSpec& s : enumerate_specs(quantize_family())) {
    const QuantizeProblem p = quantize_problem_of(s);
    if (seen.insert(s.s("input") + s.s("format") + s.s("granularity") + std::to_string(s.i("transpose"))).second)
      out.push_back(p);
  }
  return out;
}

std::vector<DequantizeProblem> dequantize_problems() {
  std::vector<DequantizeProblem> out;
  std::set<std::string> seen;
  for (const KernelSpec& s : enumerate_specs(dequantize_family()))
    if (seen.insert(s.s("format") + s.s("output") + s.s("granularity")).second) out.push_back(dequantize_problem_of(s));
  return out;
}

TEST(KernelSpecTyped, MakeAndOfRoundTrip) {
  for (const KernelSpec& s : enumerate_specs(quantize_family())) {
    const QuantizeProblem p = quantize_problem_of(s);
    const ElementwiseConfig c = elementwise_config_of(s);
    ASSERT_EQ(make_quantize_spec(p, c), s) << spec_name(s);
    EXPECT_EQ(to_string(p.input), s.s("input"));
    EXPECT_EQ(to_string(p.granularity), s.s("granularity"));
    EXPECT_EQ(p.transpose, s.i("transpose") == 1);
    EXPECT_EQ(c.vec, s.i("vec"));
  }
  for (const KernelSpec& s : enumerate_specs(dequantize_family())) {
    const DequantizeProblem p = dequantize_problem_of(s);
    ASSERT_EQ(make_dequantize_spec(p, elementwise_config_of(s)), s) << spec_name(s);
    EXPECT_EQ(to_string(p.output), s.s("output"));
  }
  invalid_message([] { (void)quantize_problem_of(dequant_spec()); });
  invalid_message([] { (void)dequantize_problem_of(quant_spec()); });
  invalid_message([] { (void)make_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::row, true}, {}); });
  invalid_message([] { (void)make_quantize_spec({}, {8, 96, 2}); });
  invalid_message([] { (void)make_dequantize_spec({}, {3, 256, 2}); });
  EXPECT_EQ(make_quantize_spec({}, {}), quant_spec());  // the struct defaults are this spec
}

TEST(KernelSpecTyped, ProblemCounts) {
  EXPECT_EQ(quantize_problems().size(), 48u);  // 3 inputs x 2 formats x 4 granularities x 2 transposes
  EXPECT_EQ(dequantize_problems().size(), 24u);
}

TEST(KernelSpecTyped, DefaultsValidateAndRespectMaxVec) {
  // The heuristic's choices come from measured sweeps (generator/heuristics.cpp); what must hold:
  // the spec is valid, solves the asked problem, and never uses a wider vector than alignment
  // allows (max_vec), while 4 (always allowed) is used when that is the bound.
  for (const QuantizeProblem& p : quantize_problems()) {
    int previous = 0;
    for (int max_vec : {4, 8, 16}) {
      const KernelSpec s = default_quantize_spec(p, max_vec);
      SCOPED_TRACE(spec_name(s) + " max_vec " + std::to_string(max_vec));
      ASSERT_NO_THROW(validate_spec(s));
      const QuantizeProblem back = quantize_problem_of(s);
      EXPECT_TRUE(back.input == p.input && back.format == p.format && back.granularity == p.granularity &&
                  back.transpose == p.transpose);
      EXPECT_LE(s.i("vec"), max_vec);
      if (max_vec == 4) EXPECT_EQ(s.i("vec"), 4);
      EXPECT_GE(s.i("vec"), previous);  // more alignment never narrows the access
      EXPECT_LE(s.i("vec") * static_cast<std::int64_t>(dtype_size(p.input)), 32);
      previous = static_cast<int>(s.i("vec"));
    }
    EXPECT_EQ(default_quantize_spec(p), default_quantize_spec(p, 16));
  }
  for (const DequantizeProblem& p : dequantize_problems()) {
    int previous = 0;
    for (int max_vec : {4, 8, 16}) {
      const KernelSpec s = default_dequantize_spec(p, max_vec);
      SCOPED_TRACE(spec_name(s) + " max_vec " + std::to_string(max_vec));
      ASSERT_NO_THROW(validate_spec(s));
      const DequantizeProblem back = dequantize_problem_of(s);
      EXPECT_TRUE(back.format == p.format && back.output == p.output && back.granularity == p.granularity);
      EXPECT_LE(s.i("vec"), max_vec);
      if (max_vec == 4) EXPECT_EQ(s.i("vec"), 4);
      EXPECT_GE(s.i("vec"), previous);
      previous = static_cast<int>(s.i("vec"));
    }
    EXPECT_EQ(default_dequantize_spec(p), default_dequantize_spec(p, 16));
  }
  // Per row with a transposed output: the tile strategy.
  EXPECT_EQ(spec_name(default_quantize_spec({DType::bf16, Fp8Format::e4m3, Granularity::row, true})),
            "quant_sm90_bf16_e4m3_row_tr_v8_t256_u1");
}

TEST(KernelSpecAccessors, TypedGettersThrowNamingTheKey) {
  const KernelSpec s = quant_spec();
  EXPECT_EQ(s.i("vec"), 8);
  EXPECT_EQ(s.s("input"), "bf16");
  EXPECT_NE(invalid_message([&] { (void)s.i("input"); }).find("input = bf16"), std::string::npos);
  EXPECT_NE(invalid_message([&] { (void)s.s("vec"); }).find("vec = 8"), std::string::npos);
  EXPECT_NE(invalid_message([&] { (void)s.i("nope"); }).find("nope = <missing>"), std::string::npos);
}

}  // namespace
}  // namespace fp8jit
