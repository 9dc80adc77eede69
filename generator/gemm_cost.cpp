#include "generator/gemm_cost.hpp"

#include "generator/families/gemm_geometry.hpp"

namespace fp8jit {
namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// A tile's time per K block, (3 block_m + 256) x (block_n + 48): its tensor-core work
// (3 block_m block_n), a cost per column worth 85 rows (B's loads) and one per row worth 48
// columns (A's loads, promotion, the barrier round trip, wgmma issue and drain). The 48 columns
// are the H100 sweeps' (G7: 4096x2112x7168 block-scaled took 189 µs on 128x64 tiles, 131 on
// 128x192 ones); the 256 weigh 64-, 128- and 256-row tiles 7 : 10 : 16, as 24 bytes of operand
// loads per 2048 MACs do (256 per row or column of a tile). A 2-CTA cluster loads half of the
// operand it shares (multicast): 128 less per row of A (cluster_n = 2) or column of B
// (cluster_m = 2). Integers, so that equal costs compare equal (the heuristic's ties go to the
// wider tile).
std::int64_t tile_block_cost(const GemmConfig& c) {
  std::int64_t cost = (3 * std::int64_t{c.block_m} + 256) * (c.block_n + 48);
  if (c.cluster_n == 2) cost -= 128 * std::int64_t{c.block_m};
  if (c.cluster_m == 2) cost -= 128 * std::int64_t{c.block_n};
  return cost;
}

// Fewer than 4 stages expose the loads' latency.
double pipeline_factor(int stages) { return stages >= 4 ? 1.0 : 1.0 + 0.15 * (4 - stages); }

// Tiles that promote each K block under the next one's wgmmas (GemmGeometry::pipelined) and
// stage D in whole swizzled panels take 0.88 of the time per K block the model gives other tiles
// where K runs 16-31 blocks. There pipelined 128x128 beat the 128x160 tiles that defer their
// epilogue (H100, peers benchmark, same run: 4096x7168x2048 per tensor 104.5 -> 98.5 µs,
// 8192x5120x2048 148.2 -> 138.8; H200: 102.5 -> 96.6, 145.4 -> 135.0). Under 16 blocks the
// deferring tiles won (H200: 4096x24576x1536 238.4 against 246.5 µs). From 32 blocks on the
// H200 and the H100 disagree: on the H200 128x128 was 0.84-0.94 of the model's time on 11 of 14
// shapes, on the H100 it ran 2-29 % slower than the wider tiles on 13 of 17 (4096x4096x7168 per
// tensor 180.1 -> 188.4 µs, 8192^3 867.2 -> 968.7, 6000x8192x28672 2222 -> 2862; block 128x256
// -> 128x128 at 8192x10240x8192 1082 -> 1223), so the model keeps them at full cost there.
// Dense launches only: grouped kernels' pipelined 128x128 tiles are untimed; and promoted tiles
// only: fast accumulation pipelines 64-row tiles, which this rule was not timed on.
constexpr std::int64_t kPipelinedMinKBlocks = 16, kPipelinedMaxKBlocks = 31;
constexpr std::int64_t kPipelinedNum = 22, kPipelinedDen = 25;

}  // namespace

double gemm_cost(const GemmProblem& p, const GemmConfig& c, std::int64_t m, std::int64_t n,
                 std::int64_t k, int sm_count, int splits) {
  const std::int64_t tiles = gemm_tile_count(c, m, n);
  const std::int64_t waves = ceil_div(tiles * splits, sm_count);
  const std::int64_t range_blocks = ceil_div(ceil_div(k, 128), splits);
  std::int64_t block_cost = tile_block_cost(c);
  if (p.layout == GemmLayout::dense && range_blocks >= kPipelinedMinKBlocks &&
      range_blocks <= kPipelinedMaxKBlocks) {
    const GemmGeometry g = gemm_geometry(p, c);
    if (g.pipelined && g.panel_bytes == 128 && !p.fast_accum)
      block_cost = block_cost * kPipelinedNum / kPipelinedDen;
  }
  return static_cast<double>(waves) *
         (static_cast<double>(range_blocks * block_cost) * pipeline_factor(c.stages));
}

std::int64_t grouped_short_tile_max_rows(GemmLayout layout) {
  return layout == GemmLayout::masked ? 16 : 64;
}

}  // namespace fp8jit
