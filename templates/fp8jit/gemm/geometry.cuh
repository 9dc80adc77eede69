// The gemm kernel's geometry, computed from its config by constexpr functions that g++ and NVRTC
// both build: the kernel (Sm90Fp8Gemm) takes its warpgroups, column chunks, shared-memory layout
// and split-K summing from here, and so do the family's rules, the heuristic and the launch code
// on the host, so the two sides cannot disagree. NVRTC-safe: no system header.
#pragma once

#include "fp8jit/gemm/params.cuh"

namespace fp8jit {
namespace dev {

constexpr int kGemmBlockK = 128;          // K per stage: one 128-byte swizzle atom of FP8
constexpr int kGemmSmemLimit = 232448;    // opt-in shared memory per block on H100/H200
constexpr int kGemmUnchunkedMaxN = 208;   // precise tiles wider than this run in two column halves
constexpr int kGemmChunkedBiasMaxN = 224; // ptxas spills the bias epilogue of wider ones
constexpr int kGemmWarpgroupThreads = 128;
constexpr int kGemmMaxScaleBox = 256;  // rows a TMA box holds at most (cuTensorMapEncodeTiled)
// fp8jit_gemm_scale_columns (scale_columns.cuh): a CTA of 32 x 8 threads copies a 32 x 32 tile
// of A's row-major scales, so that its reads and its column-major writes are whole 128-byte lines.
constexpr int kScaleColumnsTile = 32;
constexpr int kScaleColumnsRowsPerPass = 8;
constexpr int kScaleColumnsSmemBytes = kScaleColumnsTile * (kScaleColumnsTile + 1) * 4;
// Registers a grouped layout's scheduler keeps (its group and row bounds) that the register
// budgets leave out: ptxas spilt 128x208 per tensor, 128x240 fast, 256x104 block and 128x168
// rowwise (deferred) by 4-32 bytes at the dense budgets.
constexpr int kGemmGroupedRegisters = 8;

// What a gemm kernel's geometry depends on: its tile config and the problem parameters that
// enter (the scale mode, D's element size, accumulation, bias).
struct GemmTile {
  int block_m, block_n, stages;
  int scale;        // GemmScale
  int out_bytes;    // bytes per element of D
  bool fast_accum;  // the whole K sum in the tensor cores (no promotion)
  bool bias;
  int cluster_m, cluster_n;
  bool grouped;  // a grouped layout: its scheduler keeps a group and row bounds in registers
  bool tma_epilogue;  // the build holds only the TMA-store epilogue (GemmEpilogue::tma)
};

struct GemmGeometry {
  int math_wgs;     // consumer warpgroups: 2 for 128- and 256-row tiles, 1 for 64
  int rows_per_wg;  // rows of the tile each consumer warpgroup owns
  int mma_m;        // m64 wgmmas per warpgroup and k-step (its m64 row slabs)
  int threads;      // the consumers and one producer warpgroup
  // Column chunks a K block's wgmmas cover in turn: precise tiles wider than 208 columns with one
  // m64 slab per warpgroup accumulate their two column halves in turn, each promoted before the
  // next, so the wgmma temporaries cost half a tile (128x256: 128 + 64 registers instead of 256).
  int chunks;
  int chunk_n;      // the wgmma's N
  // Two m64 slabs per warpgroup whose sums and wgmma temporaries together exceed the registers
  // (precise 256-row tiles wider than 104 columns) take their slabs in turn instead: each K
  // block's wgmmas of slab 0 are promoted before slab 1's are issued, so the temporaries cover
  // one slab (256x128: 128 + 64 registers instead of 256), as DeepGEMM's 256-row tiles do.
  // In raster groups of 8 tile-rows and with the swizzled slab below, the heuristic takes 256x128
  // at large M and long K (generator/heuristics.cpp, takes_tall_tile: 1-8 % faster than the
  // 128-row tiles it replaces on an H100).
  bool slab_passes;
  int passes;       // wgmma batches per K block, each promoted before the next: chunks or slabs
  // Promotion of K block kb - 1 under kb's wgmmas, from a second set of temporaries (fast
  // accumulation: a second set of sums, on 64-row tiles, see gemm_geometry): tiles of one
  // pass (one m64 slab per warpgroup, one column chunk) up to 128 columns, where that set (64
  // registers at most) still fits beside the sums. A block-scaled 64-row tile straddling two blocks
  // of B (a width not dividing 128) needs the split between them inside the loop: chosen there by a
  // branch, ptxas inserted a wgmma wait (C7517 at 64x56). Widths of at most three splits (24, 48,
  // 96) get one copy of the loop per split (the kernel's dispatch_split); the rest one loop whose
  // promotion selects each column group's factor (split_as_data), since copies of it cost compile
  // time (NVRTC on a 2-core CPU, serial -> copies: 64x48 0.75 -> 1.19 s, 64x96 1.19 -> 2.63, 64x56
  // 0.60 -> 3.01, 64x112 1.21 -> 5.41; as data: 64x56 1.23, 64x112 1.21; 64x120 spills either way,
  // so stays serial). H200, serial -> copies: 64x5120x8192 at 64x48 22.8 -> 21.4 µs; serial -> as
  // data: 128x7168x16384 at 64x56 72.7 -> 59.9, 64x5120x8192 at 64x40 23.1 -> 21.3, 37x28672x4096
  // at 64x112 42.5 -> 41.4; at 64x48 as data took 22.1 against the copies' 21.8. Straddling 128-row
  // tiles stay serial: with copies 4096x2048x7168 at 128x96 went 138.0 -> 123.6 but 128x24576x1536
  // lost 2.4-3.4 % (12 K blocks, where the heuristic takes it); as data both lost (138.4 -> 139.8,
  // 20.6 -> 21.2).
  bool pipelined;
  bool split_as_data;  // pipelined, block-scaled and straddling with more than three splits
  int cluster;      // CTAs per thread-block cluster of the config (1 or 2)
  // Rows of A's and B's tiles each CTA loads: a 2-CTA cluster loads half of the operand it
  // shares (A along N, B along M) and multicasts it to both.
  int box_rows_a, box_rows_b;
  int stage_a, stage_b;  // bytes of A's and B's tiles per stage
  // Floats of scales staged per stage: A's for the tile's rows (swapped block scaling: its one
  // block); B's 128x128 blocks (the one or two the tile touches, padded to 8) or 1x128 groups
  // (one per column), from scales_a on,
  // rounded so that each stage's scales start on 128 bytes, as TMA destinations must. Grouped
  // tiles start on any row, but a TMA box's first element must sit on 16 bytes: their A scales
  // start at the row rounded down to 4 and cover 4 rows more.
  int scales_a, scales_b, stage_scales;
  // Rows of A's scale box. A box holds at most 256 rows, so 256-row grouped tiles load their 260
  // in two boxes of 132, the second 128 rows after the first (4 rows land twice, the same
  // values); by cp.async instead, their consumers waited on the stages' loads (H100, one group of
  // 32768 rows, 4096x7168: 1.35x the dense kernel's time with the same tile; in two boxes 0.99x).
  int scale_box_a;
  // Bytes the scale boxes deliver per stage where scales come by TMA: A's (block and group
  // scaling) and the per-column ones of B (block scaling's two of B, and swapped block scaling's
  // one of A, come by the producer's loads).
  int scale_tma_bytes;
  // Block scaling reads the scales of at most two 128-wide blocks of B per tile; some tile of
  // this width would touch three.
  bool straddles_three_b_blocks;
  int epi_slab;     // bytes of D each consumer warpgroup stages for the TMA store
  // The slab in swizzled panels instead of row-major rows: each panel_bytes of a row wide (128,
  // 64 or 32: the widest that tiles the row, TMA's swizzle modes), D's map with a box that wide
  // and that swizzle, each panel out by its own TMA store. panel_bytes 0: row-major.
  bool swizzled_slab;
  int panel_bytes;
  // Dynamic shared memory: the stage ring (tiles and scales), a full and an empty barrier per
  // stage, the epilogue slabs and slack to align the ring to 1024 bytes.
  int smem_bytes;
  // Split-K ranges of a tile can be summed inside a cluster: its drained stages hold one FP32
  // tile, and the config has no cluster of its own.
  bool sums_splits_in_cluster;
  // Registers: accumulators a consumer thread holds, how many fit (ptxas, see
  // gemm_max_accumulators), and the spills that the count alone does not show.
  int accumulators, max_accumulators;
  bool bias_spills, cluster_spills, grouped_spills;
  bool fits_registers;
};

constexpr int gemm_gcd(int a, int b) { return b == 0 ? a : gemm_gcd(b, a % b); }

constexpr bool gemm_sums_splits_in_cluster(int block_m, int block_n, int stages, int cluster) {
  return cluster == 1 && stages * (block_m + block_n) * kGemmBlockK >= block_m * block_n * 4;
}

// Accumulator registers a consumer thread may hold: the largest tiles ptxas fits without
// spilling (sm_90a, CUDA 13.0, bias and fp32 out included) of 232 registers, the rest going to
// addresses, loop state and scale products. With the scales in shared memory: 128x208 and
// 256x104 (tensor, rowwise, block); 128x160 and 256x64 (group, which also holds B's per-column
// scales); fast accumulation spills past 256x144 and, with one m64 slab, at 128x256 (bf16 out
// with bias: the 128-operand wgmma), so it stops at 240 columns.
// Grouped layouts keep kGemmGroupedRegisters fewer.
// Fast accumulation pipelines its K loop (GemmGeometry::pipelined) on 64-row tiles up to 128
// columns only: there the one warpgroup drained the tensor cores between K blocks (H200, same
// tile: 128x2112x7168 at 64x32 s16 14.6 -> 12.5 µs, 64x4096x14336 27.6 -> 25.6, 64x2112x7168 at
// 64x16 13.3 -> 12.3; no line slower); 128-row tiles' two warpgroups taking turns already keep
// them busy, and without turns ran slower (4096x32768x512 at 128x128 146.2 -> 153.6,
// 128x7168x16384 44.7 -> 45.2). Such tiles hold two sets of sums, 128 registers at most.
constexpr bool gemm_fast_pipelines(const GemmTile& t) {
  return t.fast_accum && t.block_m == 64 && t.block_n <= 128;
}

constexpr int gemm_max_accumulators(const GemmTile& t) {
  const int grouped = t.grouped ? kGemmGroupedRegisters : 0;
  if (gemm_fast_pipelines(t)) return 128;
  if (t.fast_accum) return (t.block_m == 256 ? 144 : 120) - grouped;
  if (gemm_scales_per_column(t.scale)) return (t.block_m == 256 ? 128 : 160) - grouped;
  return 208 - grouped;
}

constexpr GemmGeometry gemm_geometry(const GemmTile& t) {
  GemmGeometry g{};
  g.math_wgs = t.block_m >= 128 ? 2 : 1;
  g.rows_per_wg = t.block_m / g.math_wgs;
  g.mma_m = g.rows_per_wg / 64;
  g.threads = kGemmWarpgroupThreads * (g.math_wgs + 1);
  const bool promote = !t.fast_accum;
  g.chunks =
      promote && !gemm_scales_per_column(t.scale) && g.mma_m == 1 && t.block_n > kGemmUnchunkedMaxN
          ? 2
          : 1;
  g.chunk_n = t.block_n / g.chunks;
  g.cluster = t.cluster_m * t.cluster_n;
  g.box_rows_a = t.cluster_n == 2 ? t.block_m / 2 : t.block_m;
  g.box_rows_b = t.cluster_m == 2 ? t.block_n / 2 : t.block_n;
  g.stage_a = t.block_m * kGemmBlockK;
  g.stage_b = t.block_n * kGemmBlockK;
  const bool staged = t.scale == kBlockScale || gemm_scales_per_column(t.scale);
  // Swapped block scaling: the tile's one block scale of its A, padded to 128 bytes (the TMA box
  // of B's scales after it must start on them), copied by the producer's lane 0 (cp.async).
  g.scales_a = t.scale == kSwappedBlockScale ? 32 : staged ? t.block_m + (t.grouped ? 4 : 0) : 0;
  // Two boxes: half the rows and 2 more each, so the second starts at block_m / 2 (16 bytes).
  const int boxes_a = g.scales_a > kGemmMaxScaleBox ? 2 : 1;
  g.scale_box_a = boxes_a == 2 ? g.scales_a / 2 + 2 : g.scales_a;
  g.scales_b = t.scale == kBlockScale ? 8 : gemm_scales_per_column(t.scale) ? t.block_n : 0;
  g.stage_scales = (g.scales_a + g.scales_b + 31) / 32 * 32;
  g.scale_tma_bytes = 4 * ((t.scale == kSwappedBlockScale ? 0 : boxes_a * g.scale_box_a) +
                           (gemm_scales_per_column(t.scale) ? t.block_n : 0));
  // The tiles' starts step through the 128-blocks by gcd(block_n, 128): the worst one starts
  // 128 - gcd columns into a block.
  g.straddles_three_b_blocks = t.scale == kBlockScale && 128 - gemm_gcd(t.block_n, 128) > 256 - t.block_n;
  g.epi_slab = g.rows_per_wg * t.block_n * t.out_bytes;
  // A warp's 32-bit stores into the slab cover 8 rows; rows a multiple of 128 bytes apart put all
  // 8 on the same banks (8-way conflicts), the swizzle on 8 different ones. Measured on an H100
  // (block scaling, 128x256): 4096x24576x768 186.8 -> 155.9 µs, 4096x7168x2048 112.8 ->
  // 102.7. Only where the tile is whole panels wide; not for 64-row tiles in column halves (one
  // warpgroup, 256 columns), which ptxas then spills (8 bytes), nor precise 256-row tiles per row
  // with a bias (CUDA 13.0 ptxas: 56 bytes at 256x96, 152 at 256x128 bf16, 60 at 256x128 fp32),
  // nor, in builds with every epilogue, per row or per tensor with a bias (8 bytes at 256x128),
  // nor grouped 256-row tiles other than block-scaled ones (theirs compile without spills but
  // have not run on a GPU in panels). The TMA-only builds of per row without a bias and per
  // tensor with one fit (256 x 64-128, bf16, fp16 and fp32 out), where a row-major slab took D
  // by generic stores (ST.E) onto the same banks. Other 256-row tiles take it: their two warpgroups take turns, so a warpgroup's epilogue holds the
  // other's next wgmmas back, and the row-major slab's conflicts cost 4600 cycles a tile against
  // 1250 swizzled (256x128 block at 4096x4096x7168 193.5 -> 184.9 µs, 4096x24576x1536 306.6 ->
  // 257.0, per tensor 187.0 -> 175.4; grouped, 8 groups of 4096 rows, N 7168, K 2048: 997.1 ->
  // 859.6; H100).
  const bool tall_row_major =
      t.block_m == 256 &&
      ((t.grouped && t.scale != kBlockScale) ||
       (!t.fast_accum && ((t.scale == kPerRow && t.bias) ||
                          (!t.tma_epilogue && (t.scale == kPerRow || (t.scale == kPerTensor && t.bias))))));
  // Rows of 64- or 32-byte multiples (bf16 widths of 32 or 16 columns: 96, 176, ...) in panels
  // of 64 or 32 bytes, as DeepGEMM stores its 128x96 tiles: a 64-byte panel's 8 rows of a warp's
  // stores fill 4 x 128 bytes, their chunks XORed with row bits 1-2 onto 8 distinct 16-byte bank
  // groups (a 32-byte panel's with row bit 2), where a row-major 192-byte row put 4 rows on the
  // same banks. At most 11 narrow panels a row (128x176 bf16): fast accumulation's 128x240 in 15
  // spilt 8 bytes around its deferred epilogue.
  const int row_bytes = t.block_n * t.out_bytes;
  const bool may_swizzle = !(g.math_wgs == 1 && g.chunks == 2) && !tall_row_major;
  const int narrow = row_bytes % 64 == 0 ? 64 : row_bytes % 32 == 0 ? 32 : 0;
  g.panel_bytes = !may_swizzle                              ? 0
                  : row_bytes % 128 == 0                    ? 128
                  : narrow != 0 && row_bytes / narrow <= 11 ? narrow
                                                            : 0;
  g.swizzled_slab = g.panel_bytes != 0;
  g.smem_bytes = t.stages * (g.stage_a + g.stage_b + 4 * g.stage_scales) + 2 * t.stages * 8 + 128 +
                 g.math_wgs * g.epi_slab + 1024;
  g.sums_splits_in_cluster = gemm_sums_splits_in_cluster(t.block_m, t.block_n, t.stages, g.cluster);
  // BLOCK_N/2 per m64 row slab, plus with promotion the wgmma temporaries of one column chunk
  // (or one slab).
  const int sums = g.mma_m * t.block_n / 2;
  g.max_accumulators = gemm_max_accumulators(t);
  // Up to 128 columns and without a cluster: ptxas spills 256x136 per tensor with bias (8 bytes)
  // and 256x128 block scaling in a 2-CTA cluster (12-20 bytes).
  g.slab_passes = promote && g.chunks == 1 && g.mma_m == 2 && !gemm_scales_per_column(t.scale) &&
                  t.block_n <= 128 && t.cluster_m * t.cluster_n == 1 &&
                  2 * sums > g.max_accumulators;
  g.passes = g.slab_passes ? g.mma_m : g.chunks;
  const bool straddles = t.scale == kBlockScale && 128 % t.block_n != 0;
  g.pipelined = promote ? g.passes == 1 && g.mma_m == 1 && t.block_n <= 128 &&
                              !(straddles && (t.block_m != 64 || t.block_n > 112))
                        : gemm_fast_pipelines(t);
  g.split_as_data = g.pipelined && straddles && t.block_n / gemm_gcd(t.block_n, 128) > 3;
  g.accumulators = sums + (promote       ? (g.slab_passes ? sums / g.mma_m : sums / g.chunks)
                           : g.pipelined ? sums
                                         : 0);
  // ptxas: the bias epilogue of 240- and 256-wide precise tiles spills (4-72 bytes).
  g.bias_spills = g.chunks == 2 && t.bias && t.block_n > kGemmChunkedBiasMaxN;
  // The registers a cluster's rank and multicast addressing take spill group scaling (any tile)
  // and block scaling with two m64 slabs per warpgroup (12-64 bytes).
  g.cluster_spills = g.cluster > 1 &&
                     (gemm_scales_per_column(t.scale) || (t.scale == kBlockScale && g.mma_m == 2));
  // ptxas: grouped per-tensor or rowwise tiles in column halves spill (8 bytes at 128x256 per
  // tensor, contiguous layout), their per-group scales of B live beside the halves' sums.
  g.grouped_spills = t.grouped && g.chunks == 2 && (t.scale == kPerTensor || t.scale == kPerRow);
  g.fits_registers = g.accumulators <= g.max_accumulators && !g.bias_spills && !g.cluster_spills && !g.grouped_spills;
  return g;
}

// The widest tile (a multiple of 8 columns, in at most max_chunks column chunks) whose registers
// fit with t's rows, scale mode, accumulation, bias and cluster; t.block_n is ignored.
constexpr bool gemm_width_fits(const GemmTile& t, int max_chunks) {
  const GemmGeometry g = gemm_geometry(t);
  return g.fits_registers && g.chunks <= max_chunks;
}
constexpr int gemm_widest_block_n(GemmTile t, int max_chunks = 2) {
  for (t.block_n = 256; t.block_n > 8 && !gemm_width_fits(t, max_chunks); t.block_n -= 8) {
  }
  return t.block_n;
}

// The geometry of a kernel with these template arguments, for device code. A function, not a
// constexpr variable: NVRTC emits a variable of class type into the cubin as an initialised
// global, even where only its members are read at compile time.
template <int BLOCK_M, int BLOCK_N, int STAGES, int SCALE, int OUT_BYTES, bool FAST_ACCUM, bool BIAS, int CLUSTER_M,
          int CLUSTER_N, bool GROUPED, bool TMA_EPILOGUE>
struct GemmGeometryOf {
  static constexpr GemmGeometry get() {
    return gemm_geometry(GemmTile{BLOCK_M, BLOCK_N, STAGES, SCALE, OUT_BYTES, FAST_ACCUM, BIAS, CLUSTER_M,
                                  CLUSTER_N, GROUPED, TMA_EPILOGUE});
  }
};

}  // namespace dev
}  // namespace fp8jit
