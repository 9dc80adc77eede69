// Shared by the gemm spec tests: an independent restatement of the family's rules (shared
// memory, registers, clusters, block-scale straddling) and spec builders that skip validation,
// so invalid combinations can be expressed.
#pragma once

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
#include "tests/common/deepseek_shapes.hpp"
#include "tests/common/expect_error.hpp"


namespace fp8jit {
namespace gemm_spec_test {

using test::deepseek_shapes;
using test::invalid_message;
using test::Shape;

constexpr int kSmemLimit = 232448;  // opt-in shared memory per block on H100/H200


// The spec as the JSON a file could hold, written without validating it.
inline std::string raw_json(const KernelSpec& s) {
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
inline void expect_rejected(const KernelSpec& spec, const std::vector<std::string>& needles) {
  const std::string msg = invalid_message([&] { validate_spec(spec); });
  for (const auto& n : needles)
    EXPECT_NE(msg.find(n), std::string::npos) << "'" << n << "' not in: " << msg;
  invalid_message([&] { (void)spec_name(spec); });
  invalid_message([&] { (void)spec_hash(spec); });
  invalid_message([&] { (void)spec_to_json(spec); });
  invalid_message([&] { (void)render_source(spec); });
  invalid_message([&] { (void)spec_from_json(raw_json(spec)); });
}

inline void expect_valid(const KernelSpec& spec) {
  EXPECT_NO_THROW(validate_spec(spec)) << raw_json(spec);
  EXPECT_EQ(spec_from_json(raw_json(spec)), spec);
}

inline KernelSpec with(KernelSpec spec, const std::string& key, ParamValue v) {
  spec.params[key] = std::move(v);
  return spec;
}

// A gemm spec built without validation, so invalid combinations can be expressed.
inline KernelSpec raw(const std::string& a, const std::string& b, const std::string& out,
               const std::string& scale, int bias, int block_m, int block_n, int stages,
               int group_m, const std::string& accum = "precise", int cluster_m = 1, int cluster_n = 1,
               const std::string& layout = "dense") {
  return KernelSpec{"gemm",
                    {{"a_format", a},
                     {"b_format", b},
                     {"out", out},
                     {"scale", scale},
                     {"bias", std::int64_t{bias}},
                     {"accum", accum},
                     {"layout", layout},
                     {"block_m", std::int64_t{block_m}},
                     {"block_n", std::int64_t{block_n}},
                     {"stages", std::int64_t{stages}},
                     {"group_m", std::int64_t{group_m}},
                     {"cluster_m", std::int64_t{cluster_m}},
                     {"cluster_n", std::int64_t{cluster_n}}}};
}
inline KernelSpec tile(const std::string& scale, int block_m, int block_n, int stages = 2,
                const std::string& accum = "precise") {
  return raw("e4m3", "e4m3", "bf16", scale, 0, block_m, block_n, stages, 8, accum);
}
inline KernelSpec fast(const std::string& scale, int block_m, int block_n, int stages = 2) {
  return tile(scale, block_m, block_n, stages, "fast");
}

inline const ParamDef& param(const std::string& name) {
  for (const ParamDef& d : gemm_family().params)
    if (d.name == name) return d;
  throw Error(ErrorKind::internal, "no gemm parameter " + name);
}

// The rules, restated independently of generator/families/gemm.cpp.
inline int out_bytes(const std::string& out) {
  return out == "fp32" ? 4 : 2;
}
// Floats of scales staged per stage: A's rows, then B's two 128x128 blocks (padded to 8) or
// its columns' 1x128 groups; none for tensor and rowwise scaling (applied in the epilogue).
// Swapped block scaling ("swapped": swap_ab with block scaling) stages its A's one block scale,
// padded to 128 bytes (a TMA destination follows), and its B's per-column scales.
inline int staged_scales(const std::string& scale, int block_m, int block_n) {
  const int floats = scale == "block"     ? block_m + 8
                     : scale == "group"   ? block_m + block_n
                     : scale == "swapped" ? 32 + block_n
                                          : 0;
  return (floats + 31) / 32 * 32;  // each stage's scales start on 128 bytes (TMA destinations)
}
inline int smem_model(int block_m, int block_n, int stages, int out_bytes, int scales) {
  // Per stage a BLOCK_M x 128 byte tile of A and a BLOCK_N x 128 tile of B, the staged scales, a
  // full and an empty mbarrier (8 bytes each); the BLOCK_M x BLOCK_N tile of D staged for the TMA
  // store, 128-byte aligned; 1 KiB to align the ring to the 128-byte swizzle's 1024-byte period.
  return stages * (block_m * 128 + block_n * 128 + 4 * scales + 16) + 128 + block_m * block_n * out_bytes + 1024;
}
// Accumulator registers that fit a consumer thread (232 after setmaxnreg, less addresses, loop
// state and scale products), as measured with ptxas: group scaling keeps B's per-column scales
// too; fast accumulation spills earlier (the 128-operand wgmma of 256 columns, two m64 slabs).
// Grouped layouts keep 8 registers for their scheduler.
inline int max_accumulators(const std::string& scale, const std::string& accum, int block_m, bool grouped = false) {
  const int keep = grouped ? 8 : 0;
  if (accum == "fast") return (block_m == 256 ? 144 : 120) - keep;
  if (scale == "group" || scale == "swapped") return (block_m == 256 ? 128 : 160) - keep;
  return 208 - keep;
}
// 2-CTA clusters: at most one axis; not with group scaling or 256-row block-scaled tiles (spills);
// along M B's tile is halved into whole 8-row swizzle atoms.
inline bool cluster_ok(const std::string& scale, int block_m, int block_n, int cluster_m, int cluster_n) {
  if (cluster_m * cluster_n > 2) return false;
  if (cluster_m * cluster_n == 1) return true;
  if (scale == "group" || (scale == "block" && block_m == 256)) return false;
  return cluster_m == 1 || block_n % 16 == 0;
}
// Precise tiles over 208 columns with one m64 slab per warpgroup (not group scaling) run their
// wgmmas on two column halves, each promoted before the next.
inline int chunks(const std::string& scale, const std::string& accum, int block_m, int block_n) {
  return accum == "precise" && scale != "group" && block_m <= 128 && block_n > 208 ? 2 : 1;
}
inline int accumulators(const std::string& scale, const std::string& accum, int block_m, int block_n,
                        int cluster = 1, bool grouped = false) {
  // A consumer warpgroup owns 64 (block_m 64, 128) or 128 (block_m 256) rows: N/2 fp32 registers
  // per m64 slab, plus with precise accumulation the wgmma temporaries of one column chunk; or of
  // one slab, where a 256-row tile of at most 128 columns without a cluster (not group scaling)
  // would not fit the temporaries of both: its slabs are promoted in turn.
  const int slabs = block_m == 256 ? 2 : 1;
  const int acc = slabs * block_n / 2;
  if (accum != "precise") return acc;
  const bool slab_passes = slabs == 2 && scale != "group" && block_n <= 128 && cluster == 1 &&
                           2 * acc > max_accumulators(scale, accum, block_m, grouped);
  return acc + (slab_passes ? acc / 2 : acc / chunks(scale, accum, block_m, block_n));
}
// Chunked tiles: halves of whole wgmma widths (block_n a multiple of 16); with bias at most 224
// columns (ptxas spilled the bias epilogue of 240 and 256).
inline bool chunks_ok(const std::string& scale, const std::string& accum, int block_m, int block_n, int bias) {
  if (chunks(scale, accum, block_m, block_n) == 1) return true;
  return block_n % 16 == 0 && !(bias && block_n > 224);
}
// Whether some tile of width block_n (at column tn * block_n) touches three 128-wide blocks.
inline bool straddles_three(int block_n) {
  for (int tn = 0; tn < 1024; ++tn) {
    const int first = tn * block_n / 128, last = (tn * block_n + block_n - 1) / 128;
    if (last - first + 1 > 2) return true;
  }
  return false;
}
inline bool valid_by_rules(const std::string& a, const std::string& b, const std::string& out,
                           const std::string& scale, const std::string& accum, int block_m,
                           int block_n, int stages, int cluster_m = 1, int cluster_n = 1,
                           int bias = 0, const std::string& layout = "dense", int swap = 0) {
  if (a == "e5m2" && b == "e5m2") return false;
  // Swapped operands: dense, single CTAs, tiles up to 128x128; block scaling then stages its
  // scales per column of the tile, as group scaling does, and has no three-block straddle.
  if (swap) {
    if (layout != "dense" || cluster_m * cluster_n != 1 || block_m > 128 || block_n > 128)
      return false;
    if (accum == "fast" && (scale == "block" || scale == "group")) return false;
    const std::string kernel_scale = scale == "block" ? "swapped" : scale;
    if (smem_model(block_m, block_n, stages, out_bytes(out),
                   staged_scales(kernel_scale, block_m, block_n)) > kSmemLimit)
      return false;
    return accumulators(kernel_scale, accum, block_m, block_n) <=
           max_accumulators(kernel_scale, accum, block_m);
  }
  // Grouped layouts: tensor, rowwise or block scaling, no bias; pairs along M in contiguous and
  // masked layouts only (two tile-rows of one group), not on the indexed layout's grid.
  if (layout != "dense" && (scale == "group" || bias != 0)) return false;
  if (layout == "indexed" && cluster_m != 1) return false;
  // Indexed layouts: a tile lies in one group's 128-row chunk.
  if (layout == "indexed" && 128 % block_m != 0) return false;
  if (!cluster_ok(scale, block_m, block_n, cluster_m, cluster_n)) return false;
  if (accum == "fast" && (scale == "block" || scale == "group")) return false;
  if (smem_model(block_m, block_n, stages, out_bytes(out), staged_scales(scale, block_m, block_n)) > kSmemLimit)
    return false;
  const bool grouped = layout != "dense";
  if (grouped && (scale == "tensor" || scale == "rowwise") && chunks(scale, accum, block_m, block_n) == 2) return false;
  if (accumulators(scale, accum, block_m, block_n, cluster_m * cluster_n, grouped) >
      max_accumulators(scale, accum, block_m, grouped))
    return false;
  if (scale == "block" && straddles_three(block_n)) return false;
  return chunks_ok(scale, accum, block_m, block_n, bias);
}

}  // namespace gemm_spec_test
}  // namespace fp8jit
