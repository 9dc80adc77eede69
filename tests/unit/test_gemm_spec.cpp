// The gemm family's specs: validation rules (formats, shared memory, registers, block-scale
// straddling, closed parameter sets), the shared-memory model, names and hashes, the heuristic
// default for real and awkward shapes, and the spread sample used to compile the family.
#include <fmt/format.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "fp8jit/error.hpp"
#include "fp8jit/kernel_spec.hpp"
#include "generator/family.hpp"

namespace fp8jit {
namespace {

constexpr int kSmemLimit = 232448;  // opt-in shared memory per block on H100/H200

// Runs fn, which must throw fp8jit::Error(invalid_argument); returns the message.
template <class F>
std::string invalid_message(F&& fn) {
  try {
    fn();
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::invalid_argument) << e.what();
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "threw a non-fp8jit exception: " << e.what();
    return {};
  }
  ADD_FAILURE() << "did not throw";
  return {};
}

// The spec as the JSON a file could hold, written without validating it.
std::string raw_json(const KernelSpec& s) {
  nlohmann::json problem = nlohmann::json::object(), config = nlohmann::json::object();
  for (const auto& [key, value] : s.params) {
    bool is_config = false;
    for (const ParamDef& d : gemm_family().params)
      if (d.name == key) is_config = d.is_config;
    nlohmann::json& section = is_config ? config : problem;
    if (const auto* i = std::get_if<std::int64_t>(&value))
      section[key] = *i;
    else
      section[key] = std::get<std::string>(value);
  }
  return nlohmann::json{{"family", s.family}, {"problem", problem}, {"config", config}}.dump();
}

// `spec` must fail validation, naming, hashing, JSON conversion (both ways) and rendering alike,
// with a message that contains each of `needles`.
void expect_rejected(const KernelSpec& spec, const std::vector<std::string>& needles) {
  const std::string msg = invalid_message([&] { validate_spec(spec); });
  for (const auto& n : needles)
    EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  invalid_message([&] { (void)spec_name(spec); });
  invalid_message([&] { (void)spec_hash(spec); });
  invalid_message([&] { (void)spec_to_json(spec); });
  invalid_message([&] { (void)render_source(spec); });
  invalid_message([&] { (void)spec_from_json(raw_json(spec)); });
}

void expect_valid(const KernelSpec& spec) {
  EXPECT_NO_THROW(validate_spec(spec)) << raw_json(spec);
  EXPECT_EQ(spec_from_json(raw_json(spec)), spec);
}

KernelSpec with(KernelSpec spec, const std::string& key, ParamValue v) {
  spec.params[key] = std::move(v);
  return spec;
}

// A gemm spec built without validation, so invalid combinations can be expressed.
KernelSpec raw(const std::string& a, const std::string& b, const std::string& out,
               const std::string& scale, int bias, int block_m, int block_n, int stages,
               int group_m, const std::string& accum = "precise", int cluster_m = 1, int cluster_n = 1) {
  return KernelSpec{"gemm",
                    {{"a_format", a},
                     {"b_format", b},
                     {"out", out},
                     {"scale", scale},
                     {"bias", std::int64_t{bias}},
                     {"accum", accum},
                     {"block_m", std::int64_t{block_m}},
                     {"block_n", std::int64_t{block_n}},
                     {"stages", std::int64_t{stages}},
                     {"group_m", std::int64_t{group_m}},
                     {"cluster_m", std::int64_t{cluster_m}},
                     {"cluster_n", std::int64_t{cluster_n}}}};
}
KernelSpec tile(const std::string& scale, int block_m, int block_n, int stages = 2,
                const std::string& accum = "precise") {
  return raw("e4m3", "e4m3", "bf16", scale, 0, block_m, block_n, stages, 8, accum);
}
KernelSpec fast(const std::string& scale, int block_m, int block_n, int stages = 2) {
  return tile(scale, block_m, block_n, stages, "fast");
}

const ParamDef& param(const std::string& name) {
  for (const ParamDef& d : gemm_family().params)
    if (d.name == name) return d;
  throw Error(ErrorKind::internal, "no gemm parameter " + name);
}

// The rules, restated independently of generator/families/gemm.cpp.
int out_bytes(const std::string& out) {
  return out == "fp32" ? 4 : 2;
}
// Floats of scales staged per stage: A's rows, then B's two 128x128 blocks (padded to 8) or
// its columns' 1x128 groups; none for tensor and rowwise scaling (applied in the epilogue).
int staged_scales(const std::string& scale, int block_m, int block_n) {
  const int floats = scale == "block" ? block_m + 8 : scale == "group" ? block_m + block_n : 0;
  return (floats + 31) / 32 * 32;  // each stage's scales start on 128 bytes (TMA destinations)
}
int smem_model(int block_m, int block_n, int stages, int out_bytes, int scales) {
  // Per stage a BLOCK_M x 128 byte tile of A and a BLOCK_N x 128 tile of B, the staged scales, a
  // full and an empty mbarrier (8 bytes each); the BLOCK_M x BLOCK_N tile of D staged for the TMA
  // store, 128-byte aligned; 1 KiB to align the ring to the 128-byte swizzle's 1024-byte period.
  return stages * (block_m * 128 + block_n * 128 + 4 * scales + 16) + 128 + block_m * block_n * out_bytes + 1024;
}
// Accumulator registers that fit a consumer thread (232 after setmaxnreg, less addresses, loop
// state and scale products), as measured with ptxas: group scaling keeps B's per-column scales
// too; fast accumulation spills earlier (the 128-operand wgmma of 256 columns, two m64 slabs).
int max_accumulators(const std::string& scale, const std::string& accum, int block_m) {
  if (accum == "fast") return block_m == 256 ? 144 : 120;
  if (scale == "group") return block_m == 256 ? 128 : 160;
  return 208;
}
// 2-CTA clusters: at most one axis; not with group scaling or 256-row block-scaled tiles (spills);
// along M B's tile is halved into whole 8-row swizzle atoms.
bool cluster_ok(const std::string& scale, int block_m, int block_n, int cluster_m, int cluster_n) {
  if (cluster_m * cluster_n > 2) return false;
  if (cluster_m * cluster_n == 1) return true;
  if (scale == "group" || (scale == "block" && block_m == 256)) return false;
  return cluster_m == 1 || block_n % 16 == 0;
}
int accumulators(const std::string& accum, int block_m, int block_n) {
  // A consumer warpgroup owns 64 (block_m 64, 128) or 128 (block_m 256) rows: N/2 fp32 registers
  // per m64 slab, doubled where precise accumulation promotes into a second register tile.
  const int slabs = block_m == 256 ? 2 : 1;
  return slabs * block_n / 2 * (accum == "precise" ? 2 : 1);
}
// Whether some tile of width block_n (at column tn * block_n) touches three 128-wide blocks.
bool straddles_three(int block_n) {
  for (int tn = 0; tn < 1024; ++tn) {
    const int first = tn * block_n / 128, last = (tn * block_n + block_n - 1) / 128;
    if (last - first + 1 > 2) return true;
  }
  return false;
}
bool valid_by_rules(const std::string& a, const std::string& b, const std::string& out,
                    const std::string& scale, const std::string& accum, int block_m, int block_n,
                    int stages, int cluster_m = 1, int cluster_n = 1) {
  if (a == "e5m2" && b == "e5m2") return false;
  if (!cluster_ok(scale, block_m, block_n, cluster_m, cluster_n)) return false;
  if (accum == "fast" && (scale == "block" || scale == "group")) return false;
  if (smem_model(block_m, block_n, stages, out_bytes(out), staged_scales(scale, block_m, block_n)) > kSmemLimit)
    return false;
  if (accumulators(accum, block_m, block_n) > max_accumulators(scale, accum, block_m)) return false;
  if (scale == "block" && straddles_three(block_n)) return false;
  return true;
}

// ---- cross-parameter rules -----------------------------------------------------------------

TEST(GemmSpecRules, BothOperandsE5m2Rejected) {
  expect_rejected(raw("e5m2", "e5m2", "bf16", "block", 0, 128, 128, 4, 8),
                  {"invalid gemm spec", "e5m2", "E4M3"});
  for (const char* scale : {"tensor", "rowwise", "block", "group"})
    expect_rejected(raw("e5m2", "e5m2", "fp32", scale, 1, 64, 64, 2, 1), {"e5m2"});
  expect_valid(raw("e5m2", "e4m3", "bf16", "block", 0, 128, 128, 4, 8));
  expect_valid(raw("e4m3", "e5m2", "fp16", "tensor", 1, 128, 128, 4, 8));
  expect_valid(raw("e4m3", "e4m3", "fp32", "group", 0, 128, 128, 4, 8));
  invalid_message([] { (void)make_gemm_spec({Fp8Format::e5m2, Fp8Format::e5m2}, {}); });
}

TEST(GemmSpecRules, SharedMemoryOverTheLimitRejectedWithTheBytes) {
  // 8 stages of 256x128 + 256x128 bytes and a 256x256 bf16 tile of D: 656640 bytes.
  expect_rejected(fast("tensor", 256, 256, 8),
                  {"invalid gemm spec", "stages = 8", "256x256", "656640 bytes", "232448"});
  // The boundary: 128x128 tiles with bf16 out fit 6 stages (230624 bytes), not 7 (263408)...
  expect_valid(tile("tensor", 128, 128, 6));
  expect_rejected(tile("tensor", 128, 128, 7), {"263408 bytes", "232448"});
  // ... and with fp32 out (a tile of D twice the size) 5 (230608), not 6 (263392), whatever the
  // scale mode.
  expect_valid(raw("e4m3", "e4m3", "fp32", "rowwise", 0, 128, 128, 5, 8));
  expect_rejected(raw("e4m3", "e4m3", "fp32", "rowwise", 0, 128, 128, 6, 8),
                  {"fp32 out", "263392 bytes"});
  // Block and group scaling also stage each K block's scales: (128 + 8, rounded to 160) and
  // (128 + 128) floats a stage push the fifth stage over (233808 and 235728 bytes).
  expect_valid(raw("e4m3", "e4m3", "fp32", "block", 1, 128, 128, 4, 8));
  expect_rejected(raw("e4m3", "e4m3", "fp32", "block", 1, 128, 128, 5, 8), {"233808 bytes"});
  expect_valid(raw("e4m3", "e4m3", "fp32", "group", 1, 128, 128, 4, 8));
  expect_rejected(raw("e4m3", "e4m3", "fp32", "group", 1, 128, 128, 5, 8), {"235728 bytes"});
  // 64x240 tiles: 5 stages fit (226512 bytes), 6 do not (265440).
  expect_valid(fast("tensor", 64, 240, 5));
  expect_rejected(fast("tensor", 64, 240, 6), {"265440 bytes"});
  const std::string msg = invalid_message([] {
    (void)make_gemm_spec(
        {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, false, true},
        {256, 256, 8, 8});
  });
  EXPECT_NE(msg.find("656640"), std::string::npos) << msg;
}

TEST(GemmSpecRules, FastAccumulationOnlyForTensorAndRowwiseScaling) {
  // Block and group scales differ along K: they can only be applied when promoting.
  for (const char* scale : {"block", "group"})
    expect_rejected(fast(scale, 128, 128), {"invalid gemm spec", "accum = fast", scale});
  expect_valid(fast("tensor", 128, 128));
  expect_valid(fast("rowwise", 128, 128));
  invalid_message([] {
    (void)make_gemm_spec(
        {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false, true}, {});
  });
  expect_rejected(with(tile("tensor", 128, 128), "accum", std::string("FAST")),
                  {"gemm.accum", "one of {precise, fast}"});
  expect_rejected(with(tile("tensor", 128, 128), "accum", std::int64_t{1}), {"gemm.accum = 1"});
}

TEST(GemmSpecRules, AccumulatorRegisterBudget) {
  // Precise accumulation (every scale mode) keeps two register tiles: the wgmma accumulators and
  // the promoted FP32 sums, N/2 each per m64 slab, within 232 registers per consumer thread less
  // what the mode needs besides: 208 fit (tensor, rowwise, block: scales come from shared
  // memory), 160 (group: a scale per column too; 128 with two m64 slabs).
  for (const char* scale : {"tensor", "rowwise", "block", "group"}) {
    SCOPED_TRACE(scale);
    expect_rejected(tile(scale, 128, 216),
                    {"invalid gemm spec", "128x216", "216 accumulator registers", scale});
    expect_rejected(tile(scale, 64, 256), {"invalid gemm spec", "256 accumulator registers"});
    expect_valid(tile(scale, 128, 128));
    expect_valid(tile(scale, 64, 64));
    expect_rejected(tile(scale, 256, 112), {"256x112", "224 accumulator registers"});
  }
  for (const char* scale : {"tensor", "rowwise"}) {  // 208
    SCOPED_TRACE(scale);
    expect_valid(tile(scale, 128, 208));
    expect_valid(tile(scale, 64, 208));
    expect_rejected(tile(scale, 128, 216), {"at most 208 fit"});
    expect_valid(tile(scale, 256, 104));
  }
  // Block: 192 (200 and 208 straddle three scale blocks; registers are checked first).
  expect_valid(tile("block", 128, 192));
  expect_rejected(tile("block", 128, 216), {"216 accumulator registers", "at most 208 fit"});
  expect_valid(tile("block", 256, 96));
  expect_rejected(tile("block", 256, 112), {"224 accumulator registers"});
  // Group: 160, and 128 with two m64 slabs (ptxas spilled 4 bytes at 128x168 and 256x80).
  expect_valid(tile("group", 128, 160));
  expect_rejected(tile("group", 128, 168), {"168 accumulator registers", "at most 160 fit"});
  expect_valid(tile("group", 256, 64));
  expect_rejected(tile("group", 256, 72), {"144 accumulator registers", "at most 128 fit"});
  // Fast accumulation (tensor and row-wise only) keeps one tile: 240 columns fit with one m64
  // slab per warpgroup (256, the 128-operand wgmma, spilled with bf16 out and bias)...
  for (const char* scale : {"tensor", "rowwise"}) {
    SCOPED_TRACE(scale);
    expect_valid(fast(scale, 128, 240, 3));
    expect_valid(fast(scale, 64, 240, 4));
    expect_rejected(fast(scale, 128, 248, 3),
                    {"128x248", "124 accumulator registers", "fast accumulation", "at most 120 fit"});
    expect_rejected(fast(scale, 64, 248, 3), {"64x248", "124 accumulator registers", "at most 120 fit"});
    expect_rejected(fast(scale, 128, 256, 3), {"128 accumulator registers", "at most 120 fit"});
    // ... but with two (block_m 256) ptxas spills past 2 x 72 registers.
    expect_valid(fast(scale, 256, 144, 2));
    expect_rejected(fast(scale, 256, 152, 2), {"152 accumulator registers", "fast accumulation", "at most 144"});
  }
  // Block scaling with 256-row tiles: 104 columns (2 x 208 registers) fit like tensor scaling's.
  expect_valid(tile("block", 256, 104));
  // Group scaling with one m64 slab (64- and 128-row tiles) alike.
  expect_valid(tile("group", 64, 160));
  expect_rejected(tile("group", 64, 168), {"64x168", "168 accumulator registers", "at most 160 fit"});
}

// Every tile width of every mode and tile height whose 2-stage pipeline fits shared memory (the
// check before this one): rejected for its registers exactly where the restated budget says, with
// the count and the limit in the message.
TEST(GemmSpecRules, AccumulatorBudgetOfEveryModeAndWidth) {
  int rejected = 0;
  std::set<std::string> widest;
  for (const char* scale : {"tensor", "rowwise", "block", "group"})
    for (const char* accum : {"precise", "fast"}) {
      const bool fast_ok = std::string(scale) == "tensor" || std::string(scale) == "rowwise";
      if (std::string(accum) == "fast" && !fast_ok) continue;
      for (int bm : {64, 128, 256}) {
        int max_valid = 0;
        for (const ParamValue& v : param("block_n").allowed) {
          const int bn = static_cast<int>(std::get<std::int64_t>(v));
          if (smem_model(bm, bn, 2, 2, staged_scales(scale, bm, bn)) > kSmemLimit) continue;
          SCOPED_TRACE(fmt::format("{} {} {}x{}", scale, accum, bm, bn));
          const int regs = accumulators(accum, bm, bn), limit = max_accumulators(scale, accum, bm);
          if (regs > limit) {
            ++rejected;
            expect_rejected(tile(scale, bm, bn, 2, accum),
                            {fmt::format("{}x{} tiles need {} accumulator registers", bm, bn, regs),
                             fmt::format("at most {} fit", limit)});
          } else if (!(std::string(scale) == "block" && straddles_three(bn))) {
            expect_valid(tile(scale, bm, bn, 2, accum));
            max_valid = std::max(max_valid, bn);
          }
        }
        widest.insert(fmt::format("{} {} {}: {}", scale, accum, bm, max_valid));
      }
    }
  EXPECT_GT(rejected, 0);
  // The widest valid tiles, as the register model has them (ptxas, sm_90a): 208 columns (104 with
  // two m64 slabs) for precise accumulation, 192 for block scaling (200 and 208 straddle three
  // scale blocks), 160 / 64 for group scaling, 240 / 144 for fast accumulation; none is 256 wide.
  const std::set<std::string> expected = {
      "tensor precise 64: 208",  "tensor precise 128: 208",  "tensor precise 256: 104",
      "tensor fast 64: 240",     "tensor fast 128: 240",     "tensor fast 256: 144",
      "rowwise precise 64: 208", "rowwise precise 128: 208", "rowwise precise 256: 104",
      "rowwise fast 64: 240",    "rowwise fast 128: 240",    "rowwise fast 256: 144",
      "block precise 64: 192",   "block precise 128: 192",   "block precise 256: 104",
      "group precise 64: 160",   "group precise 128: 160",   "group precise 256: 64"};
  EXPECT_EQ(widest, expected);
}

// A spec of `scale` scaling on block_m x block_n tiles (2 stages) in a cluster_m x cluster_n cluster.
KernelSpec clustered(const std::string& scale, int block_m, int block_n, int cluster_m, int cluster_n,
                     const std::string& accum = "precise") {
  return raw("e4m3", "e4m3", "bf16", scale, 0, block_m, block_n, 2, 8, accum, cluster_m, cluster_n);
}

TEST(GemmSpecRules, ClustersOfTwoAlongOneAxis) {
  expect_valid(raw("e4m3", "e4m3", "bf16", "block", 0, 128, 160, 4, 8, "precise", 1, 2));
  expect_valid(raw("e4m3", "e4m3", "bf16", "block", 0, 128, 128, 4, 8, "precise", 2, 1));
  expect_valid(raw("e4m3", "e4m3", "fp32", "tensor", 1, 256, 96, 2, 16, "precise", 1, 2));
  expect_valid(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 224, 3, 8, "fast", 1, 2));
  // Every scale mode but group, at every tile height but block scaling's 256, along either axis.
  for (const char* scale : {"tensor", "rowwise", "block"})
    for (int bm : {64, 128, 256}) {
      if (std::string(scale) == "block" && bm == 256) continue;
      SCOPED_TRACE(fmt::format("{} {}", scale, bm));
      expect_valid(clustered(scale, bm, 64, 2, 1));
      expect_valid(clustered(scale, bm, 64, 1, 2));
    }
  expect_valid(clustered("rowwise", 256, 144, 2, 1, "fast"));
  expect_valid(clustered("tensor", 64, 240, 1, 2, "fast"));
  // Two CTAs at most: not both axes.
  expect_rejected(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 128, 4, 8, "precise", 2, 2),
                  {"invalid gemm spec", "cluster_m = 2", "cluster_n = 2", "at most 2 CTAs"});
  expect_rejected(clustered("block", 64, 64, 2, 2), {"cluster_m = 2", "cluster_n = 2", "at most 2 CTAs"});
  // Sizes other than 1 and 2 are outside the parameters' sets.
  expect_rejected(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 128, 4, 8, "precise", 4, 1),
                  {"gemm.cluster_m = 4", "one of {1, 2}"});
  expect_rejected(clustered("tensor", 128, 128, 1, 4), {"gemm.cluster_n = 4", "one of {1, 2}"});
  expect_rejected(clustered("tensor", 128, 128, 0, 1), {"gemm.cluster_m = 0", "one of {1, 2}"});
  expect_rejected(clustered("tensor", 128, 128, 1, -2), {"gemm.cluster_n = -2"});
  expect_rejected(with(clustered("tensor", 128, 128, 1, 1), "cluster_n", std::string("2")),
                  {"gemm.cluster_n = \"2\""});
  // Halves of B's tile must be whole 8-row swizzle atoms.
  expect_rejected(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 88, 4, 8, "precise", 2, 1),
                  {"cluster_m = 2", "block_n = 88", "multiple of 16"});
  expect_valid(raw("e4m3", "e4m3", "bf16", "tensor", 0, 128, 88, 4, 8, "precise", 1, 2));
  expect_valid(clustered("tensor", 128, 80, 2, 1));
  expect_valid(clustered("tensor", 128, 96, 2, 1));
  // Register spills (ptxas): group scaling (any tile, either axis), and block scaling with 256-row
  // tiles; the message names the scale mode, the tile height and the way out.
  for (int bm : {64, 128, 256})
    for (const auto& [cm, cn] : {std::pair{2, 1}, std::pair{1, 2}}) {
      SCOPED_TRACE(fmt::format("group {} rows, cluster {}x{}", bm, cm, cn));
      expect_valid(clustered("group", bm, 64, 1, 1));
      expect_rejected(clustered("group", bm, 64, cm, cn),
                      {"invalid gemm spec", "2-CTA clusters", "group scaling", fmt::format("{}-row tiles", bm),
                       "use cluster_m = cluster_n = 1"});
    }
  expect_rejected(raw("e4m3", "e4m3", "bf16", "group", 0, 128, 128, 4, 8, "precise", 1, 2),
                  {"clusters", "group scaling", "cluster_m = cluster_n = 1"});
  for (const auto& [cm, cn] : {std::pair{2, 1}, std::pair{1, 2}}) {
    SCOPED_TRACE(fmt::format("block 256 rows, cluster {}x{}", cm, cn));
    expect_valid(clustered("block", 256, 96, 1, 1));
    expect_rejected(clustered("block", 256, 96, cm, cn),
                    {"invalid gemm spec", "2-CTA clusters", "block scaling", "256-row tiles",
                     "use cluster_m = cluster_n = 1"});
  }
  expect_rejected(raw("e4m3", "e4m3", "bf16", "block", 0, 256, 96, 3, 8, "precise", 1, 2),
                  {"clusters", "block scaling", "256-row"});
  // The typed front door rejects the same.
  invalid_message([] {
    (void)make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::group}, {128, 128, 4, 8, 1, 2});
  });
  invalid_message([] { (void)make_gemm_spec({}, {128, 128, 4, 8, 2, 2}); });
  invalid_message([] { (void)make_gemm_spec({}, {128, 88, 4, 8, 2, 1}); });
  EXPECT_EQ(spec_cluster_size(raw("e4m3", "e4m3", "bf16", "block", 0, 128, 128, 4, 8, "precise", 2, 1)), 2);
  EXPECT_EQ(spec_cluster_size(clustered("tensor", 128, 128, 1, 2)), 2);
  EXPECT_EQ(spec_cluster_size(tile("block", 128, 128)), 1);
  invalid_message([] { (void)spec_cluster_size(clustered("group", 128, 128, 1, 2)); });
}

// Along M a cluster halves B's tile between its two CTAs: every width within the register and
// shared-memory budgets is valid with cluster_m = 2 exactly where it is a multiple of 16; along N
// (A's 64..256 rows halve into whole swizzle atoms) every such width is.
TEST(GemmSpecRules, ClusterAlongMNeedsBlockNMultipleOf16) {
  int odd = 0;
  for (const ParamValue& v : param("block_n").allowed) {
    const int bn = static_cast<int>(std::get<std::int64_t>(v));
    if (accumulators("precise", 128, bn) > max_accumulators("tensor", "precise", 128)) continue;
    SCOPED_TRACE(bn);
    expect_valid(clustered("tensor", 128, bn, 1, 2));
    if (bn % 16 == 0) {
      expect_valid(clustered("tensor", 128, bn, 2, 1));
    } else {
      ++odd;
      expect_rejected(clustered("tensor", 128, bn, 2, 1),
                      {"cluster_m = 2", fmt::format("block_n = {}", bn), "multiple of 16"});
    }
  }
  EXPECT_GT(odd, 0);
}

TEST(GemmSpecRules, BlockScalingTileStraddlingThreeScaleBlocksRejected) {
  // 152-wide tiles at column 152 * 5 = 760 cover 760..911: blocks 5, 6 and 7; 176-wide ones at
  // 880..1055 (blocks 6, 7, 8).
  EXPECT_TRUE(straddles_three(152));
  EXPECT_TRUE(straddles_three(176));
  EXPECT_FALSE(straddles_three(160));
  expect_rejected(tile("block", 128, 152),
                  {"invalid gemm spec", "block_n = 152", "three 128x128 scale blocks"});
  expect_rejected(tile("block", 64, 152), {"block_n = 152", "three"});
  expect_rejected(tile("block", 128, 176), {"invalid gemm spec", "block_n = 176", "three"});
  expect_valid(tile("block", 128, 160));
  expect_valid(tile("block", 128, 192));
  expect_valid(tile("block", 128, 144));
  expect_valid(tile("block", 128, 136));
  // Group scaling reads a scale per column: no such rule.
  expect_valid(tile("group", 64, 120));
  // Every width within the register budget: block scaling is valid exactly where no tile spans
  // three 128-wide blocks.
  int straddling = 0;
  for (const ParamValue& v : param("block_n").allowed) {
    const int bn = static_cast<int>(std::get<std::int64_t>(v));
    SCOPED_TRACE(bn);
    const KernelSpec s = tile("block", 64, bn);
    if (accumulators("precise", 64, bn) > max_accumulators("block", "precise", 64)) continue;
    if (straddles_three(bn)) {
      ++straddling;
      expect_rejected(s, {fmt::format("block_n = {}", bn), "three"});
    } else {
      expect_valid(s);
    }
  }
  EXPECT_GT(straddling, 0);
}

TEST(GemmSpecValidation, OutOfSetAndHostileValuesRejected) {
  const KernelSpec good = tile("block", 128, 128, 4);
  expect_valid(good);
  expect_rejected(with(good, "block_n", std::int64_t{20}),
                  {"gemm.block_n = 20", "one of {16, 24, 32"});
  expect_rejected(with(good, "block_n", std::int64_t{264}), {"gemm.block_n = 264"});
  expect_rejected(with(good, "block_n", std::int64_t{8}), {"gemm.block_n = 8"});
  expect_rejected(with(good, "block_n", std::int64_t{0}), {"gemm.block_n = 0"});
  expect_rejected(with(good, "block_n", std::int64_t{-128}), {"gemm.block_n = -128"});
  expect_rejected(with(good, "stages", std::int64_t{1}),
                  {"gemm.stages = 1", "one of {2, 3, 4, 5, 6, 7, 8}"});
  expect_rejected(with(good, "stages", std::int64_t{9}), {"gemm.stages = 9"});
  expect_rejected(with(good, "block_m", std::int64_t{32}),
                  {"gemm.block_m = 32", "one of {64, 128, 256}"});
  expect_rejected(with(good, "block_m", std::int64_t{192}), {"gemm.block_m = 192"});
  expect_rejected(with(good, "block_m", std::int64_t{1} << 40), {"gemm.block_m = 1099511627776"});
  expect_rejected(with(good, "group_m", std::int64_t{2}),
                  {"gemm.group_m = 2", "one of {1, 4, 8, 16}"});
  expect_rejected(with(good, "bias", std::int64_t{2}), {"gemm.bias = 2", "one of {0, 1}"});
  expect_rejected(with(good, "accum", std::string("fast\"; //")), {"gemm.accum"});
  expect_rejected(with(good, "block_n", std::string("128")), {"gemm.block_n = \"128\""});
  expect_rejected(with(good, "scale", std::string("blockwise")), {"gemm.scale = \"blockwise\""});
  expect_rejected(with(good, "scale", std::int64_t{2}), {"gemm.scale = 2"});
  expect_rejected(with(good, "out", std::string("e4m3")),
                  {"gemm.out", "one of {bf16, fp16, fp32}"});
  expect_rejected(with(good, "a_format", std::string("e4m3fn")),
                  {"gemm.a_format", "one of {e4m3, e5m2}"});
  for (const std::string& h :
       {std::string("e4m3\"; asm(\"trap;\"); //"), std::string("e4m3\n#include <x>"),
        std::string(""), std::string("E4M3")}) {
    expect_rejected(with(good, "a_format", h), {"gemm.a_format"});
    expect_rejected(with(good, "b_format", h), {"gemm.b_format"});
  }
  expect_rejected(with(good, "swizzle", std::int64_t{128}), {"gemm.swizzle", "unknown parameter"});
  KernelSpec missing = good;
  missing.params.erase("stages");
  expect_rejected(missing, {"gemm.stages", "<missing>"});
  invalid_message([] { (void)make_gemm_spec({}, {128, 20, 4, 8}); });
  invalid_message([] { (void)make_gemm_spec({}, {128, 128, 1, 8}); });
  invalid_message([] { (void)make_gemm_spec({}, {32, 128, 4, 8}); });
  invalid_message([] { (void)gemm_problem_of(make_quantize_spec({}, {})); });
}

// ---- resources, names ----------------------------------------------------------------------

TEST(GemmSpecSmem, FormulaPinned) {
  const GemmProblem block{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block};
  const GemmProblem rowwise{Fp8Format::e5m2, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise,
                            true};
  // 4 x ((128 + 128) x 128 bytes of A and B + (128 + 8 -> 160) x 4 bytes of staged scales + 16 bytes
  // of barriers) + 128 + 128 x 128 x 2 bytes of D + 1024 bytes of alignment.
  EXPECT_EQ(gemm_smem_bytes(block, {128, 128, 4, 8}), 167616);
  EXPECT_EQ(gemm_smem_bytes(rowwise, {64, 16, 2, 1}), 25760);
  EXPECT_EQ(gemm_smem_bytes(block, {256, 256, 8, 8}), 665856);
  EXPECT_EQ(spec_dynamic_smem(tile("block", 128, 128, 4)), 167616);
  EXPECT_EQ(spec_dynamic_smem(raw("e5m2", "e4m3", "fp32", "rowwise", 1, 64, 16, 2, 1)), 25760);
  // Only the output type and the scale mode enter from the problem; group_m does not enter.
  EXPECT_EQ(gemm_smem_bytes(block, {128, 128, 4, 1}), gemm_smem_bytes(block, {128, 128, 4, 16}));
  const GemmProblem tensor{Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor};
  EXPECT_EQ(gemm_smem_bytes(tensor, {128, 128, 4, 8}),
            gemm_smem_bytes(
                {Fp8Format::e5m2, Fp8Format::e4m3, DType::fp16, ScaleMode::rowwise, true, true},
                {128, 128, 4, 8}));
  EXPECT_EQ(gemm_smem_bytes(block, {128, 128, 4, 8}) - gemm_smem_bytes(tensor, {128, 128, 4, 8}), 4 * 160 * 4);
  EXPECT_EQ(gemm_smem_bytes({Fp8Format::e4m3, Fp8Format::e4m3, DType::fp32, ScaleMode::block}, {128, 128, 4, 8}) -
                gemm_smem_bytes(block, {128, 128, 4, 8}),
            128 * 128 * 2);
  for (const char* scale : {"tensor", "rowwise", "block", "group"})
    for (DType out : {DType::bf16, DType::fp16, DType::fp32})
      for (int bm : {64, 128, 256})
        for (int bn : {16, 136, 256})
          for (int st = 2; st <= 8; ++st)
            ASSERT_EQ(
                gemm_smem_bytes({Fp8Format::e4m3, Fp8Format::e4m3, out, *parse_scale_mode(scale)},
                                {bm, bn, st, 8}),
                smem_model(bm, bn, st, static_cast<int>(dtype_size(out)), staged_scales(scale, bm, bn)))
                << scale << " " << bm << "x" << bn << " s" << st;
}

TEST(GemmSpecName, PinnedNameJsonAndHash) {
  // Pinned: a change invalidates every cache entry and tuning record keyed by this spec.
  const KernelSpec s = make_gemm_spec(
      {Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false}, {128, 128, 5, 8});
  EXPECT_EQ(spec_name(s), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8");
  EXPECT_EQ(
      spec_to_json(s),
      R"({"config":{"block_m":128,"block_n":128,"cluster_m":1,"cluster_n":1,"group_m":8,"stages":5},"family":"gemm",)"
      R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})");
  EXPECT_EQ(spec_hash(s), 0xe9277cddf1874ab5ull);
  const KernelSpec t = make_gemm_spec(
      {Fp8Format::e5m2, Fp8Format::e4m3, DType::fp32, ScaleMode::rowwise, true}, {64, 24, 3, 16});
  EXPECT_EQ(spec_name(t), "gemm_sm90_e5m2e4m3_fp32_rowwise_bias_64x24x128_s3_g16");
  EXPECT_NE(spec_hash(t), spec_hash(s));
  // Fast accumulation shows in the name.
  const KernelSpec f =
      make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, true, true},
                     {128, 240, 3, 8});
  EXPECT_EQ(spec_name(f), "gemm_sm90_e4m3e4m3_bf16_tensor_fast_bias_128x240x128_s3_g8");
  // Clusters show in the name (only when there is one) and the hash.
  const KernelSpec cm = make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                                       {128, 128, 5, 8, 2, 1});
  const KernelSpec cn = make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block, false},
                                       {128, 128, 5, 8, 1, 2});
  EXPECT_EQ(spec_name(cm), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8_c2m");
  EXPECT_EQ(spec_name(cn), "gemm_sm90_e4m3e4m3_bf16_block_128x128x128_s5_g8_c2n");
  EXPECT_EQ(
      spec_to_json(cm),
      R"({"config":{"block_m":128,"block_n":128,"cluster_m":2,"cluster_n":1,"group_m":8,"stages":5},"family":"gemm",)"
      R"("problem":{"a_format":"e4m3","accum":"precise","b_format":"e4m3","bias":0,"out":"bf16","scale":"block"}})");
  EXPECT_EQ(spec_hash(cm), 0xdeaf4a6306101fc2ull);
  EXPECT_EQ(spec_hash(cn), 0x803341f730afda5aull);
  EXPECT_EQ(spec_from_json(spec_to_json(cm)), cm);
  EXPECT_EQ(spec_from_json(spec_to_json(cn)), cn);
  // Unclustered names carry no suffix, whatever the tile.
  EXPECT_EQ(spec_name(t).find("_c2"), std::string::npos);
  EXPECT_EQ(spec_name(f).find("_c2"), std::string::npos);
  EXPECT_NE(spec_hash(f), spec_hash(make_gemm_spec({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16,
                                                    ScaleMode::tensor, true, true},
                                                   {128, 128, 4, 8})));
}

TEST(GemmSpecTyped, MakeAndOfRoundTripAndStructDefaults) {
  std::set<std::pair<int, int>> clusters;
  for (const KernelSpec& s : spread_sample(gemm_family(), 200)) {
    const GemmProblem p = gemm_problem_of(s);
    const GemmConfig c = gemm_config_of(s);
    ASSERT_EQ(make_gemm_spec(p, c), s) << spec_name(s);
    EXPECT_EQ(to_string(p.a_format), s.s("a_format"));
    EXPECT_EQ(to_string(p.b_format), s.s("b_format"));
    EXPECT_EQ(to_string(p.out), s.s("out"));
    EXPECT_EQ(to_string(p.scale), s.s("scale"));
    EXPECT_EQ(p.bias, s.i("bias") == 1);
    EXPECT_EQ(p.fast_accum, s.s("accum") == "fast");
    EXPECT_EQ(c.block_m, s.i("block_m"));
    EXPECT_EQ(c.block_n, s.i("block_n"));
    EXPECT_EQ(c.stages, s.i("stages"));
    EXPECT_EQ(c.group_m, s.i("group_m"));
    EXPECT_EQ(c.cluster_m, s.i("cluster_m"));
    EXPECT_EQ(c.cluster_n, s.i("cluster_n"));
    EXPECT_EQ(spec_cluster_size(s), c.cluster_m * c.cluster_n);
    clusters.insert({c.cluster_m, c.cluster_n});
  }
  EXPECT_EQ(clusters, (std::set<std::pair<int, int>>{{1, 1}, {1, 2}, {2, 1}}));
  // The struct defaults: DeepSeek-V3's problem on 128x128 tiles, 4 stages, no cluster.
  EXPECT_EQ(make_gemm_spec({}, {}), tile("block", 128, 128, 4));
  EXPECT_EQ(GemmConfig{}.cluster_m, 1);
  EXPECT_EQ(GemmConfig{}.cluster_n, 1);
  EXPECT_EQ(make_gemm_spec({}, {128, 128, 4, 8, 1, 2}), raw("e4m3", "e4m3", "bf16", "block", 0, 128, 128, 4, 8, "precise", 1, 2));
}

// ---- the config space ----------------------------------------------------------------------

TEST(GemmSpecEnumeration, ExactlyTheSpecsTheRulesAllow) {
  std::size_t expected = 0;
  std::map<std::pair<int, int>, std::size_t> expected_by_cluster;
  auto str = [](const ParamValue& v) { return std::get<std::string>(v); };
  auto num = [](const ParamValue& v) { return static_cast<int>(std::get<std::int64_t>(v)); };
  for (const ParamValue& a : param("a_format").allowed)
    for (const ParamValue& b : param("b_format").allowed)
      for (const ParamValue& out : param("out").allowed)
        for (const ParamValue& scale : param("scale").allowed)
          for (const ParamValue& accum : param("accum").allowed)
            for (const ParamValue& bm : param("block_m").allowed)
              for (const ParamValue& bn : param("block_n").allowed)
                for (const ParamValue& st : param("stages").allowed)
                  for (const ParamValue& cm : param("cluster_m").allowed)
                    for (const ParamValue& cn : param("cluster_n").allowed)
                      if (valid_by_rules(str(a), str(b), str(out), str(scale), str(accum), num(bm),
                                         num(bn), num(st), num(cm), num(cn))) {
                        ++expected;
                        ++expected_by_cluster[{num(cm), num(cn)}];
                      }
  // bias and group_m never make a spec invalid.
  const std::size_t free = param("bias").allowed.size() * param("group_m").allowed.size();
  expected *= free;
  for (auto& [cluster, n] : expected_by_cluster) n *= free;
  const std::vector<KernelSpec> all = enumerate_specs(gemm_family());
  EXPECT_EQ(all.size(), expected);
  // The space this suite was written against: 134112 single CTAs, and clusters wherever the scale
  // mode and tile allow them (not group scaling, not block scaling with 256 rows): 112872 along N,
  // 59304 along M (block_n a multiple of 16).
  EXPECT_EQ(all.size(), 306288u);
  const std::map<std::pair<int, int>, std::size_t> pinned = {{{1, 1}, 134112u}, {{1, 2}, 112872u}, {{2, 1}, 59304u}};
  EXPECT_EQ(expected_by_cluster, pinned);
  std::map<std::pair<int, int>, std::size_t> by_cluster;
  for (const KernelSpec& s : all) {
    ASSERT_TRUE(valid_by_rules(s.s("a_format"), s.s("b_format"), s.s("out"), s.s("scale"),
                               s.s("accum"), static_cast<int>(s.i("block_m")),
                               static_cast<int>(s.i("block_n")), static_cast<int>(s.i("stages")),
                               static_cast<int>(s.i("cluster_m")), static_cast<int>(s.i("cluster_n"))))
        << spec_name(s);
    ++by_cluster[{static_cast<int>(s.i("cluster_m")), static_cast<int>(s.i("cluster_n"))}];
  }
  EXPECT_EQ(by_cluster, pinned);
}

TEST(GemmSpecSample, SpreadSampleCoversTheExtremes) {
  const std::vector<KernelSpec> sample = spread_sample(gemm_family(), 60);
  EXPECT_GE(sample.size(), 60u);
  std::size_t extras = 0;  // two extremes per config parameter, each value of a problem parameter
  for (const ParamDef& def : gemm_family().params) extras += def.is_config ? 2 : def.allowed.size();
  EXPECT_LE(sample.size(), 60u + extras);
  EXPECT_EQ(sample, spread_sample(gemm_family(), 60));  // fixed
  std::set<std::string> names;
  std::set<std::int64_t> block_m, block_n, stages, group_m;
  std::map<std::string, std::set<ParamValue>> seen;  // every parameter's values in the sample
  std::set<std::string> c2m_scales, c2n_scales;
  for (const KernelSpec& s : sample) {
    ASSERT_NO_THROW(validate_spec(s));
    names.insert(spec_name(s));
    block_m.insert(s.i("block_m"));
    block_n.insert(s.i("block_n"));
    stages.insert(s.i("stages"));
    group_m.insert(s.i("group_m"));
    for (const auto& [key, value] : s.params) seen[key].insert(value);
    // A cluster only where the restated rules allow one, and the name says so.
    const int cm = static_cast<int>(s.i("cluster_m")), cn = static_cast<int>(s.i("cluster_n"));
    EXPECT_TRUE(cluster_ok(s.s("scale"), static_cast<int>(s.i("block_m")), static_cast<int>(s.i("block_n")), cm, cn))
        << spec_name(s);
    EXPECT_EQ(spec_name(s).ends_with("_c2m"), cm == 2) << spec_name(s);
    EXPECT_EQ(spec_name(s).ends_with("_c2n"), cn == 2) << spec_name(s);
    if (cm == 2) c2m_scales.insert(s.s("scale"));
    if (cn == 2) c2n_scales.insert(s.s("scale"));
  }
  EXPECT_EQ(names.size(), sample.size()) << "duplicates in the sample";
  for (std::int64_t v : {64, 256}) EXPECT_TRUE(block_m.count(v)) << "block_m " << v;
  // 256 columns spill registers in every mode (fast accumulation stops at 240).
  for (std::int64_t v : {16, 240}) EXPECT_TRUE(block_n.count(v)) << "block_n " << v;
  EXPECT_FALSE(block_n.count(256));
  for (std::int64_t v : {2, 8}) EXPECT_TRUE(stages.count(v)) << "stages " << v;
  for (std::int64_t v : {1, 16}) EXPECT_TRUE(group_m.count(v)) << "group_m " << v;
  // Every value of every problem parameter (scale modes, output types, formats, bias, accumulation)
  // and both values of each cluster parameter: single CTAs and 2-CTA clusters along M and along N.
  for (const ParamDef& def : gemm_family().params) {
    if (def.is_config && def.name.rfind("cluster_", 0) != 0) continue;
    EXPECT_EQ(seen[def.name], std::set<ParamValue>(def.allowed.begin(), def.allowed.end())) << def.name;
  }
  EXPECT_EQ(seen["scale"].size(), 4u);
  EXPECT_EQ(seen["out"].size(), 3u);
  EXPECT_EQ(seen["accum"].size(), 2u);
  EXPECT_EQ(seen["cluster_m"], (std::set<ParamValue>{std::int64_t{1}, std::int64_t{2}}));
  EXPECT_EQ(seen["cluster_n"], (std::set<ParamValue>{std::int64_t{1}, std::int64_t{2}}));
  EXPECT_FALSE(c2m_scales.empty());
  EXPECT_FALSE(c2n_scales.empty());
  EXPECT_FALSE(c2m_scales.count("group") || c2n_scales.count("group"));
}

// ---- the heuristic default -----------------------------------------------------------------

struct Shape {
  std::int64_t m, n, k;
};

// DeepSeek-V3's GEMM shapes, from the shared shape list (empty where the file is absent).
std::vector<Shape> deepseek_shapes() {
  std::ifstream in(std::string(FP8JIT_SOURCE_DIR) + "/../shared/shapes/deepseek_v3.csv");
  std::vector<Shape> out;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#' || line.rfind("m,", 0) == 0) continue;
    std::istringstream fields(line);
    Shape s{};
    char c1 = 0, c2 = 0;
    if (fields >> s.m >> c1 >> s.n >> c2 >> s.k && c1 == ',' && c2 == ',')
      out.push_back(s);
    else
      ADD_FAILURE() << "bad line in deepseek_v3.csv: " << line;
  }
  return out;
}

std::vector<GemmProblem> gemm_problems() {
  std::vector<GemmProblem> out;
  for (const ParamValue& a : param("a_format").allowed)
    for (const ParamValue& b : param("b_format").allowed)
      for (const ParamValue& o : param("out").allowed)
        for (const ParamValue& sc : param("scale").allowed)
          for (const ParamValue& bias : param("bias").allowed)
            for (const ParamValue& accum : param("accum").allowed) {
              const std::string scale = std::get<std::string>(sc);
              if (a == b && std::get<std::string>(a) == "e5m2") continue;
              if (std::get<std::string>(accum) == "fast" && (scale == "block" || scale == "group"))
                continue;
              out.push_back({*parse_fp8_format(std::get<std::string>(a)),
                             *parse_fp8_format(std::get<std::string>(b)),
                             *parse_dtype(std::get<std::string>(o)), *parse_scale_mode(scale),
                             std::get<std::int64_t>(bias) == 1,
                             std::get<std::string>(accum) == "fast"});
            }
  return out;
}

// DeepSeek-V3's shapes plus decode-sized and narrow ones.
std::vector<Shape> default_shapes() {
  std::vector<Shape> shapes = deepseek_shapes();
  if (shapes.empty()) return shapes;
  EXPECT_EQ(shapes.size(), 19u);
  for (std::int64_t m : {1, 7, 65})
    for (std::int64_t n : {16, 24}) shapes.push_back({m, n, 7168});
  return shapes;
}

int heuristic_cap(const GemmProblem& p) {
  const std::string scale(to_string(p.scale)), accum = p.fast_accum ? "fast" : "precise";
  int cap = 0;
  for (int bn = 16; bn <= 256; bn += 8)
    if (accumulators(accum, 128, bn) <= max_accumulators(scale, accum, 128) &&
        accumulators(accum, 64, bn) <= max_accumulators(scale, accum, 64))
      cap = bn;
  return cap;
}

// The default for problem p on shape sh must be valid, solve p, use 64-row tiles for M <= 64, fit
// `smem` bytes, and take as many stages as fit (up to 6). Returns its config.
GemmConfig check_default(const GemmProblem& p, const Shape& sh, int sms, int smem) {
  SCOPED_TRACE(fmt::format("{}x{}x{} on {} SMs with {} bytes, problem {}{} {} {}{}{}", sh.m, sh.n,
                           sh.k, sms, smem, to_string(p.a_format), to_string(p.b_format),
                           to_string(p.out), to_string(p.scale), p.bias ? " bias" : "",
                           p.fast_accum ? " fast" : ""));
  KernelSpec s;
  try {
    s = default_gemm_spec(p, sh.m, sh.n, sh.k, sms, smem);
  } catch (const std::exception& e) {
    ADD_FAILURE() << "default_gemm_spec threw: " << e.what();
    return {};
  }
  EXPECT_NO_THROW(validate_spec(s));
  const GemmProblem back = gemm_problem_of(s);
  EXPECT_TRUE(back.a_format == p.a_format && back.b_format == p.b_format && back.out == p.out &&
              back.scale == p.scale && back.bias == p.bias && back.fast_accum == p.fast_accum);
  const GemmConfig c = gemm_config_of(s);
  if (sh.m <= 64) EXPECT_EQ(c.block_m, 64);
  // The widest tile the registers of a 64- or 128-row tile allow (240 columns with fast
  // accumulation, 160 with group scaling, 208 otherwise), and at most 160 where K has 4 or fewer
  // blocks of 128 (the epilogue dominates).
  EXPECT_LE(c.block_n, heuristic_cap(p)) << spec_name(s);
  if ((sh.k + 127) / 128 <= 4) EXPECT_LE(c.block_n, 160) << spec_name(s);
  EXPECT_LE(gemm_smem_bytes(p, c), smem) << spec_name(s);
  GemmConfig more = c;
  ++more.stages;
  EXPECT_TRUE(c.stages == 6 || gemm_smem_bytes(p, more) > smem)
      << spec_name(s) << ": a stage more would fit";
  return c;
}

TEST(GemmSpecDefault, ValidFittingAndSmallTilesForSmallM) {
  const std::vector<GemmProblem> problems = gemm_problems();
  // 3 format pairs x 3 outputs x bias x (4 scale modes precise + tensor and rowwise fast).
  ASSERT_EQ(problems.size(), 108u);
  const std::vector<Shape> shapes = default_shapes();
  if (shapes.empty()) GTEST_SKIP() << "no " FP8JIT_SOURCE_DIR "/../shared/shapes/deepseek_v3.csv";
  std::map<std::string, int> widest;  // by scale mode and accumulation
  for (const GemmProblem& p : problems)
    for (const Shape& sh : shapes)
      for (int sms : {132, 114}) {
        const GemmConfig c = check_default(p, sh, sms, kSmemLimit);
        if (::testing::Test::HasFailure()) return;
        // The struct default's limit is H100/H200's.
        EXPECT_EQ(default_gemm_spec(p, sh.m, sh.n, sh.k, sms), make_gemm_spec(p, c));
        int& w = widest[fmt::format("{} {}", to_string(p.scale), p.fast_accum ? "fast" : "precise")];
        w = std::max(w, c.block_n);
      }
  // The caps are reached on DeepSeek-V3's shapes: 240 columns (fast accumulation), 160 (group
  // scaling), 208 (tensor and row-wise scaling), 192 (block scaling: 200 and 208 straddle three
  // scale blocks).
  EXPECT_EQ(heuristic_cap({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::tensor, false, true}), 240);
  EXPECT_EQ(heuristic_cap({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::group}), 160);
  EXPECT_EQ(heuristic_cap({Fp8Format::e4m3, Fp8Format::e4m3, DType::bf16, ScaleMode::block}), 208);
  const std::map<std::string, int> expected = {{"tensor precise", 208}, {"tensor fast", 240},
                                               {"rowwise precise", 208}, {"rowwise fast", 240},
                                               {"block precise", 192}, {"group precise", 160}};
  EXPECT_EQ(widest, expected);
  // e5m2 x e5m2 has no kernel.
  invalid_message([] {
    (void)default_gemm_spec({Fp8Format::e5m2, Fp8Format::e5m2}, 4096, 4096, 4096);
  });
}

// With less shared memory (100000 bytes) the default must still fit: fewer stages, or smaller tiles
// where even two stages of the usual ones (plus the staged tile of D) do not fit.
TEST(GemmSpecDefault, FitsASmallerSharedMemoryLimit) {
  const std::vector<Shape> shapes = default_shapes();
  if (shapes.empty()) GTEST_SKIP() << "no " FP8JIT_SOURCE_DIR "/../shared/shapes/deepseek_v3.csv";
  int shrunk = 0;
  for (const GemmProblem& p : gemm_problems())
    for (const Shape& sh : shapes) {
      const GemmConfig c = check_default(p, sh, 132, 100000);
      if (::testing::Test::HasFailure()) return;
      const GemmConfig roomy =
          gemm_config_of(default_gemm_spec(p, sh.m, sh.n, sh.k, 132, kSmemLimit));
      if (roomy.block_n == c.block_n && roomy.block_m == c.block_m && roomy.stages > c.stages)
        ++shrunk;
    }
  EXPECT_GT(shrunk, 0) << "a 100000-byte limit never cut the stage count";
}

// Split-K (decode-sized M): enough K ranges to occupy the SMs, none empty, each at least 4 K blocks
// long where K is cut at all; large problems and short K are never split.
TEST(GemmSpecSplitK, RangesCoverKAndFillTheMachine) {
  const GemmConfig c64{64, 128, 4, 8}, c128{128, 128, 4, 8};
  EXPECT_EQ(gemm_split_k(4096, 7168, 7168, c128, 132), 1);  // 1792 tiles
  EXPECT_EQ(gemm_split_k(64, 7168, 1024, c64, 132), 2);     // 56 tiles, 8 K blocks: two ranges of 4
  EXPECT_EQ(gemm_split_k(64, 7168, 16384, c64, 132), 2);    // 56 tiles on 132 SMs
  EXPECT_EQ(gemm_split_k(1, 16, 7168, c64, 132), 14);       // one tile, 56 K blocks of at least 4
  EXPECT_EQ(gemm_split_k(1, 16, 896, c64, 132), 1);         // 7 K blocks: too short to split
  EXPECT_EQ(gemm_split_k(1, 16, 1 << 20, c64, 132), 16);    // at most 16 ranges
  for (std::int64_t m : {1, 16, 64, 65, 128, 300, 4096})
    for (std::int64_t n : {16, 128, 1000, 2112, 7168})
      for (std::int64_t k : {128, 1024, 1040, 2048, 7168, 16384, 100000})
        for (const GemmConfig& c : {c64, c128, GemmConfig{256, 40, 2, 1}})
          for (int sms : {1, 114, 132}) {
            SCOPED_TRACE(
                fmt::format("{}x{}x{}, {}x{} tiles, {} SMs", m, n, k, c.block_m, c.block_n, sms));
            const int splits = gemm_split_k(m, n, k, c, sms);
            ASSERT_GE(splits, 1);
            ASSERT_LE(splits, 16);
            const std::int64_t tiles =
                ((m + c.block_m - 1) / c.block_m) * ((n + c.block_n - 1) / c.block_n);
            const std::int64_t kb = (k + 127) / 128, per = (kb + splits - 1) / splits;
            if (splits == 1) continue;
            EXPECT_LE(tiles * splits, sms);     // one wave
            EXPECT_GE(per, 4);                  // each range fills the pipeline
            EXPECT_LT((splits - 1) * per, kb);  // the last range is not empty
            EXPECT_LE(tiles * 2, sms);          // only when tiles leave most SMs idle
          }
}

}  // namespace
}  // namespace fp8jit
