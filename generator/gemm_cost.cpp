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

}  // namespace

double gemm_cost(const GemmConfig& c, std::int64_t m, std::int64_t n, std::int64_t k, int sm_count,
                 int splits) {
  const std::int64_t tiles = gemm_tile_count(c, m, n);
  const std::int64_t waves = ceil_div(tiles * splits, sm_count);
  const std::int64_t range_blocks = ceil_div(ceil_div(k, 128), splits);
  return static_cast<double>(waves) *
         (static_cast<double>(range_blocks * tile_block_cost(c)) * pipeline_factor(c.stages));
}

}  // namespace fp8jit
