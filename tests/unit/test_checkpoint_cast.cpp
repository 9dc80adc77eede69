// fp8jit cast on checkpoints made here (sharded, odd shapes, 1-D tensors, extras of other dtypes),
// with the host-reference converter: bytes against the reference conversions, the FP8 round
// trip, resuming, and bad input refused by name with nothing written.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <random>

#include "checkpoint/cast.hpp"
#include "checkpoint/checkpoint.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/reference.hpp"
#include "tests/common/expect_error.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Bytes = std::vector<std::uint8_t>;

struct Tensor {
  StDtype dtype;
  std::vector<std::int64_t> shape;
  Bytes data;
};
using Shard = std::map<std::string, Tensor>;

void write_shard(const std::string& path, const Shard& shard) {
  std::vector<TensorDecl> decls;
  for (const auto& [name, t] : shard) decls.push_back({name, t.dtype, t.shape});
  SafetensorsWriter w(path, layout_of(decls, {}));
  while (const TensorInfo* t = w.next()) {
    const Bytes& b = shard.at(t->name).data;
    w.write(std::string(b.begin(), b.end()));
  }
  w.commit();
}

void write_text(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}
std::string read_text(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A sharded checkpoint: shard names -> tensors, plus index and config.json.
void write_checkpoint(const std::string& dir, const std::map<std::string, Shard>& shards,
                      const json& config = {{"model_type", "test"}}) {
  fs::create_directories(dir);
  json map = json::object();
  for (const auto& [file, shard] : shards) {
    write_shard(dir + "/" + file, shard);
    for (const auto& entry : shard) map[entry.first] = file;
  }
  write_text(dir + "/" + kIndexName,
             json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump());
  write_text(dir + "/config.json", config.dump());
  write_text(dir + "/tokenizer.json", R"({"vocab": {}})");
}

Bytes random_bf16(std::int64_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.f, 1.f);
  Bytes b(static_cast<std::size_t>(n) * 2);
  for (std::int64_t i = 0; i < n; ++i) {
    const std::uint16_t h = fp8::float_to_bf16(dist(gen));
    std::memcpy(&b[i * 2], &h, 2);
  }
  return b;
}

Bytes random_bytes(std::size_t n, std::uint32_t seed) {
  std::mt19937 gen(seed);
  Bytes b(n);
  for (auto& x : b)
    x = static_cast<std::uint8_t>(gen() & 0x7e);  // finite E4M3 codes, both signs via 0x80 below
  for (std::size_t i = 0; i < n; i += 3) b[i] |= 0x80;
  return b;
}

Bytes scales_for(std::int64_t n, std::int64_t k, float base) {
  const std::int64_t count = ((n + 127) / 128) * ((k + 127) / 128);
  Bytes b(static_cast<std::size_t>(count) * 4);
  for (std::int64_t i = 0; i < count; ++i) {
    const float s = base * static_cast<float>(i + 1);
    std::memcpy(&b[i * 4], &s, 4);
  }
  return b;
}

Tensor fp8_weight(std::int64_t n, std::int64_t k, std::uint32_t seed) {
  return {StDtype::F8_E4M3, {n, k}, random_bytes(static_cast<std::size_t>(n * k), seed)};
}
Tensor scale(std::int64_t n, std::int64_t k, float base) {
  return {StDtype::F32, {(n + 127) / 128, (k + 127) / 128}, scales_for(n, k, base)};
}

// An FP8 model: odd shapes, a scale in the other shard, norms (1-D BF16), an F32 bias, an I64.
std::map<std::string, Shard> fp8_model() {
  return {{"model-00001-of-00002.safetensors",
           {{"layers.0.attn.wq.weight", fp8_weight(300, 200, 1)},
            {"layers.0.attn.wq.weight_scale_inv", scale(300, 200, 0.01f)},
            {"layers.0.mlp.w1.weight", fp8_weight(256, 384, 2)},
            {"layers.0.attn_norm.weight", {StDtype::BF16, {200}, random_bf16(200, 3)}},
            {"layers.0.bias", {StDtype::F32, {3}, Bytes(12, 7)}}}},
          {"model-00002-of-00002.safetensors",
           {{"layers.0.mlp.w1.weight_scale_inv", scale(256, 384, 0.002f)},
            {"layers.1.mlp.w2.weight", fp8_weight(129, 130, 4)},
            {"layers.1.mlp.w2.weight_scale_inv", scale(129, 130, 0.5f)},
            {"step", {StDtype::I64, {1}, Bytes(8, 1)}}}}};
}

Bytes read_out(const std::string& path, const std::string& name) {
  const SafetensorsFile f = read_safetensors(path);
  const TensorInfo* t = f.find(name);
  EXPECT_NE(t, nullptr) << name << " in " << path;
  Bytes b;
  if (t) read_tensor(f, *t, b);
  return b;
}

Bytes reference_bf16(const Tensor& w, const Tensor& s) {
  Bytes y(w.data.size() * 2);
  DequantizeArgs a;
  a.q = w.data.data();
  a.m = w.shape[0];
  a.k = w.shape[1];
  a.scales = reinterpret_cast<const float*>(s.data.data());
  a.granularity = Granularity::block128;
  a.y = y.data();
  reference::dequantize(a);
  return y;
}

TEST(CheckpointCast, ToBf16DequantizesEveryWeightWithItsScale) {
  test::TempDir dir("fp8jit_cast");
  const auto model = fp8_model();
  write_checkpoint(dir.path() + "/in", model,
                   {{"quantization_config", {{"quant_method", "fp8"}}}, {"x", 1}});
  auto conv = host_converter();
  const CastReport r = cast_checkpoint(dir.path() + "/in", dir.path() + "/out", {}, *conv);
  EXPECT_EQ(r.shards_written, 2u);
  EXPECT_EQ(r.converted, 3u);
  EXPECT_EQ(r.copied, 3u);
  EXPECT_EQ(r.dropped, 3u);
  const std::string s1 = dir.path() + "/out/model-00001-of-00002.safetensors";
  const std::string s2 = dir.path() + "/out/model-00002-of-00002.safetensors";
  const auto& in1 = model.at("model-00001-of-00002.safetensors");
  const auto& in2 = model.at("model-00002-of-00002.safetensors");
  EXPECT_EQ(read_out(s1, "layers.0.attn.wq.weight"),
            reference_bf16(in1.at("layers.0.attn.wq.weight"),
                           in1.at("layers.0.attn.wq.weight_scale_inv")));
  // Its scale lives in the other shard.
  EXPECT_EQ(
      read_out(s1, "layers.0.mlp.w1.weight"),
      reference_bf16(in1.at("layers.0.mlp.w1.weight"), in2.at("layers.0.mlp.w1.weight_scale_inv")));
  EXPECT_EQ(
      read_out(s2, "layers.1.mlp.w2.weight"),
      reference_bf16(in2.at("layers.1.mlp.w2.weight"), in2.at("layers.1.mlp.w2.weight_scale_inv")));
  EXPECT_EQ(read_out(s1, "layers.0.attn_norm.weight"), in1.at("layers.0.attn_norm.weight").data);
  EXPECT_EQ(read_out(s2, "step"), in2.at("step").data);
  const SafetensorsFile out2 = read_safetensors(s2);
  EXPECT_EQ(out2.find("layers.1.mlp.w2.weight_scale_inv"), nullptr);
  EXPECT_EQ(out2.find("layers.1.mlp.w2.weight")->dtype, StDtype::BF16);
  const json index = json::parse(read_text(dir.path() + "/out/" + kIndexName));
  EXPECT_EQ(index["weight_map"].size(), 6u);
  EXPECT_FALSE(index["weight_map"].contains("layers.0.mlp.w1.weight_scale_inv"));
  EXPECT_EQ(index["weight_map"]["step"], "model-00002-of-00002.safetensors");
  EXPECT_EQ(
      index["metadata"]["total_size"].get<std::uint64_t>(),
      fs::file_size(s1) + fs::file_size(s2) - read_safetensors(s1).data_offset - out2.data_offset);
  const json config = json::parse(read_text(dir.path() + "/out/config.json"));
  EXPECT_FALSE(config.contains("quantization_config"));
  EXPECT_EQ(config["x"], 1);
  EXPECT_EQ(read_text(dir.path() + "/out/tokenizer.json"), R"({"vocab": {}})");
  EXPECT_NE(r.converter.find("host reference"), std::string::npos);
}

TEST(CheckpointCast, ToFp8AndBackStaysWithinTheFp8Bound) {
  test::TempDir dir("fp8jit_cast");
  const std::int64_t n = 300, k = 260;
  const Bytes w = random_bf16(n * k, 11);
  write_checkpoint(
      dir.path() + "/bf16",
      {{"model-00001-of-00001.safetensors",
        {{"model.layers.0.self_attn.q_proj.weight", {StDtype::BF16, {n, k}, w}},
         {"model.layers.0.mlp.gate.weight", {StDtype::BF16, {8, k}, random_bf16(8 * k, 12)}},
         {"model.layers.0.mlp.down_proj.weight",
          {StDtype::BF16, {k, 128}, random_bf16(k * 128, 13)}},
         {"model.embed_tokens.weight", {StDtype::BF16, {16, k}, random_bf16(16 * k, 14)}},
         {"model.norm.weight", {StDtype::BF16, {k}, random_bf16(k, 15)}},
         {"lm_head.weight", {StDtype::BF16, {16, k}, random_bf16(16 * k, 16)}}}}});
  auto conv = host_converter();
  CastOptions o;
  o.to = CastTarget::fp8;
  o.skip = {"*.down_proj.*"};
  const CastReport r = cast_checkpoint(dir.path() + "/bf16", dir.path() + "/fp8", o, *conv);
  EXPECT_EQ(r.converted, 1u);  // q_proj only: the router, embeddings, norm, lm_head and --skip stay
  const std::string shard = dir.path() + "/fp8/model-00001-of-00001.safetensors";
  const SafetensorsFile f = read_safetensors(shard);
  EXPECT_EQ(f.find("model.layers.0.self_attn.q_proj.weight")->dtype, StDtype::F8_E4M3);
  EXPECT_EQ(f.find("model.layers.0.self_attn.q_proj.weight_scale_inv")->shape,
            (std::vector<std::int64_t>{3, 3}));
  for (const char* kept : {"model.layers.0.mlp.gate.weight", "model.layers.0.mlp.down_proj.weight",
                           "model.embed_tokens.weight", "model.norm.weight", "lm_head.weight"})
    EXPECT_EQ(f.find(kept)->dtype, StDtype::BF16) << kept;
  const json q = json::parse(read_text(dir.path() + "/fp8/config.json"))["quantization_config"];
  EXPECT_EQ(q["quant_method"], "fp8");
  EXPECT_EQ(q["fmt"], "e4m3");
  EXPECT_EQ(q["weight_block_size"], json({128, 128}));
  EXPECT_EQ(json::parse(read_text(dir.path() + "/fp8/" + kIndexName))["weight_map"].size(), 7u);
  // And back: each element within the E4M3 step of its block (relative error 2^-4 of the value,
  // or the subnormal step of the block's scale).
  cast_checkpoint(dir.path() + "/fp8", dir.path() + "/back", {}, *conv);
  const Bytes back = read_out(dir.path() + "/back/model-00001-of-00001.safetensors",
                              "model.layers.0.self_attn.q_proj.weight");
  ASSERT_EQ(back.size(), w.size());
  double err = 0, norm = 0;
  for (std::size_t i = 0; i < w.size() / 2; ++i) {
    std::uint16_t a, b;
    std::memcpy(&a, &w[i * 2], 2);
    std::memcpy(&b, &back[i * 2], 2);
    const double x = fp8::bf16_to_float(a), y = fp8::bf16_to_float(b);
    err += (x - y) * (x - y), norm += x * x;
  }
  EXPECT_LT(std::sqrt(err / norm), 0.04);
  EXPECT_GT(std::sqrt(err / norm), 0.0);  // it did go through FP8
}

TEST(CheckpointCast, RerunKeepsCompleteShardsAndRedoesDamagedOnes) {
  test::TempDir dir("fp8jit_cast");
  write_checkpoint(dir.path() + "/in", fp8_model());
  auto conv = host_converter();
  const std::string out = dir.path() + "/out", s2 = out + "/model-00002-of-00002.safetensors";
  cast_checkpoint(dir.path() + "/in", out, {}, *conv);
  const std::string good = read_text(s2);
  CastReport r = cast_checkpoint(dir.path() + "/in", out, {}, *conv);
  EXPECT_EQ(r.shards_kept, 2u);
  EXPECT_EQ(r.shards_written, 0u);
  fs::resize_file(s2, fs::file_size(s2) - 1);  // an interrupted copy of the shard
  r = cast_checkpoint(dir.path() + "/in", out, {}, *conv);
  EXPECT_EQ(r.shards_kept, 1u);
  EXPECT_EQ(r.shards_written, 1u);
  EXPECT_EQ(read_text(s2), good);
  // Other options: nothing kept (the same file names would hold other bytes).
  write_checkpoint(dir.path() + "/bf16",
                   {{"model-00001-of-00001.safetensors",
                     {{"a.weight", {StDtype::BF16, {128, 128}, random_bf16(128 * 128, 5)}}}}});
  CastOptions o;
  o.to = CastTarget::fp8;
  cast_checkpoint(dir.path() + "/bf16", dir.path() + "/q", o, *conv);
  o.ue8m0 = true;
  r = cast_checkpoint(dir.path() + "/bf16", dir.path() + "/q", o, *conv);
  EXPECT_EQ(r.shards_kept, 0u);
  EXPECT_EQ(
      json::parse(read_text(dir.path() + "/q/config.json"))["quantization_config"]["scale_fmt"],
      "ue8m0");
}

// A converter that fails on its second conversion: an interrupted cast.
class FailingConverter final : public Converter {
 public:
  void dequantize(const std::uint8_t*, Fp8Format, std::int64_t, std::int64_t, const float*,
                  std::uint16_t*) override {
    if (++calls == 2) throw Error(ErrorKind::driver, "simulated GPU failure");
  }
  void quantize(const void*, DType, std::int64_t, std::int64_t, Fp8Format, bool, std::uint8_t*,
                float*) override {}
  std::string name() const override { return "failing"; }
  int calls = 0;
};

TEST(CheckpointCast, AnInterruptedCastLeavesNoFinishedLookingFile) {
  test::TempDir dir("fp8jit_cast");
  write_checkpoint(dir.path() + "/in", fp8_model());
  FailingConverter conv;
  EXPECT_NE(test::error_message(
                ErrorKind::driver,
                [&] { cast_checkpoint(dir.path() + "/in", dir.path() + "/out", {}, conv); })
                .find("simulated"),
            std::string::npos);
  for (const auto& e : fs::directory_iterator(dir.path() + "/out")) {
    const std::string name = e.path().filename().string();
    EXPECT_TRUE(name == ".fp8jit-cast.json" || name == "model-00001-of-00002.safetensors") << name;
  }
  EXPECT_FALSE(fs::exists(dir.path() + "/out/" + kIndexName));
  EXPECT_FALSE(fs::exists(dir.path() + "/out/model-00002-of-00002.safetensors"));
}

struct BadInput {
  const char* what;
  void (*edit)(const std::string& in);
  const char* needle;
};

TEST(CheckpointCast, BadInputIsRefusedByNameAndNothingIsWritten) {
  const BadInput cases[] = {
      {"scale missing",
       [](const std::string& in) {
         write_checkpoint(in, {{"a.safetensors", {{"w.weight", fp8_weight(128, 128, 1)}}}});
       },
       "tensor \"w.weight\": F8_E4M3 weight without w.weight_scale_inv"},
      {"scale of the wrong shape",
       [](const std::string& in) {
         write_checkpoint(in, {{"a.safetensors",
                                {{"w.weight", fp8_weight(300, 128, 1)},
                                 {"w.weight_scale_inv", scale(128, 128, 1)}}}});
       },
       "F32 [1,1], expected F32 [3,1]"},
      {"truncated shard",
       [](const std::string& in) {
         write_checkpoint(in, fp8_model());
         const std::string s = in + "/model-00002-of-00002.safetensors";
         fs::resize_file(s, fs::file_size(s) - 100);
       },
       "model-00002-of-00002.safetensors: not a valid safetensors file"},
      {"index naming a missing shard",
       [](const std::string& in) {
         write_checkpoint(in, fp8_model());
         fs::remove(in + "/model-00002-of-00002.safetensors");
       },
       "names shard model-00002-of-00002.safetensors, which does not exist"},
      {"index naming a tensor the shard lacks",
       [](const std::string& in) {
         write_checkpoint(in, fp8_model());
         json index = json::parse(read_text(in + "/" + kIndexName));
         index["weight_map"]["ghost"] = "model-00001-of-00002.safetensors";
         write_text(in + "/" + kIndexName, index.dump());
       },
       "places tensor \"ghost\""},
      {"shard outside the folder",
       [](const std::string& in) {
         write_checkpoint(in, fp8_model());
         write_text(in + "/" + kIndexName, R"({"weight_map": {"x": "../x.safetensors"}})");
       },
       "is not a file name in the checkpoint's folder"},
      {"no checkpoint", [](const std::string& in) { fs::create_directories(in); },
       "not a Hugging Face safetensors"},
  };
  for (const BadInput& c : cases) {
    SCOPED_TRACE(c.what);
    test::TempDir dir("fp8jit_cast");
    c.edit(dir.path() + "/in");
    auto conv = host_converter();
    const std::string msg = test::invalid_message(
        [&] { cast_checkpoint(dir.path() + "/in", dir.path() + "/out", {}, *conv); });
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
    EXPECT_FALSE(fs::exists(dir.path() + "/out"));
  }
  test::TempDir dir("fp8jit_cast");
  write_checkpoint(dir.path() + "/in", fp8_model());
  auto conv = host_converter();
  const std::string before = read_text(dir.path() + "/in/" + kIndexName);
  EXPECT_NE(test::invalid_message([&] {
              cast_checkpoint(dir.path() + "/in", dir.path() + "/in/../in", {}, *conv);
            }).find("is the input folder"),
            std::string::npos);
  EXPECT_EQ(read_text(dir.path() + "/in/" + kIndexName), before);
}

}  // namespace
}  // namespace fp8jit::checkpoint
