// Kernel parameter block of the gemm family, shared by device code and the host launcher.
#pragma once

#include "fp8jit/common/tensor_map.cuh"
#include "fp8jit/gemm/dense_schedule.cuh"

namespace fp8jit {
namespace dev {

// Scale modes; values match fp8jit::ScaleMode on the host.
enum GemmScale {
  kPerTensor = 0,   // one scale per operand
  kPerRow = 1,      // a scale per row of A and per row of B
  kBlockScale = 2,  // A 1x128 groups along K x B 128x128 blocks (DeepSeek-V3)
  kGroupScale = 3,  // A 1x128 x B 1x128 (weight gradients)
  // Block scaling with the operands swapped (config swap_ab, decode-sized M): the kernel's A is
  // the problem's B, with one 128x128 block scale per tile and K block, and its B is the
  // problem's A, with a 1x128 scale per column. Kernel-internal: the host's problem says block.
  kSwappedBlockScale = 4,
};

// Scales the promotion applies per column of the tile, staged with each K block.
constexpr bool gemm_scales_per_column(int scale) {
  return scale == kGroupScale || scale == kSwappedBlockScale;
}

// Block scaling's map of the 128x128 scales (GemmParams::sb_map): which of its two dimensions is
// contiguous in memory, the map's inner one.
enum GemmScaleMap {
  kScaleMapNone = 0,
  kScaleMapKInner = 1,      // [blocks][K blocks]: box 4 K blocks x 2 blocks (swapped: 1)
  kScaleMapBlockInner = 2,  // [K blocks][blocks]: box 8 blocks (swapped: 4) x 1 K block
};

// How the rows of A and D are cut into groups (mixture-of-experts layouts), each group with its
// own B [N, K] (B is [G * N, K]); values match fp8jit::GemmLayout on the host.
enum GemmLayout {
  kDenseLayout = 0,       // one GEMM
  kContiguousLayout = 1,  // group g: rows [offsets[g], offsets[g + 1]) of A [M, K] and D [M, N]
  kMaskedLayout = 2,      // group g: rows [g * M_max, g * M_max + masked_m[g]) of A [G * M_max, K]
  kIndexedLayout = 3,     // row r of A [M, K] and D [M, N] is group m_indices[r]'s, -1: padding
};

// Bits the grouped kernels OR into GemmParams::status when the group table was out of range and
// they clamped it (nothing outside [0, M) or a group's M_max is read or written).
enum GemmStatusBits {
  kGroupOffsetsClamped = 1,  // contiguous: an offset below 0, past M, or below the one before
  kMaskedRowsClamped = 2,    // masked: masked_m[g] below 0 or above M_max
  kRowIndicesInvalid = 4,    // indexed: an index out of [-1, G), or a group's rows not starting a
                           // kGemmIndexedAlignment-row chunk (rows after another group's in a tile)
};

// Indexed layouts: each group's run of rows starts at a multiple of this many rows (the
// padding rows after it, index -1, fill the chunk), so a tile of up to this many rows holds one
// group's rows and then padding (DeepGEMM's m_indices alignment).
constexpr int kGemmIndexedAlignment = 128;

// Scale (i, j) of an operand sits at i * rs + j * cs: i indexes rows (or 128-row blocks of B in
// block mode), j indexes 128-wide K blocks. The host derives rs/cs from the scale layout.
struct GemmParams {
  TensorMap tma_a;  // A [M, K] FP8, K-major, box 128 x BLOCK_M, 128-byte swizzle
  TensorMap tma_b;  // B [N, K] FP8, K-major, box 128 x BLOCK_N
  // D [M, N], box BLOCK_N x (BLOCK_M / consumer warpgroups), or with swizzled slabs
  // (GemmGeometry::panel_bytes) a panel's bytes x that and the swizzle of that width; used when
  // tma_store.
  TensorMap tma_d;
  // Block and group scaling, where the scale layouts allow it (scale_tma): A's column-major
  // scales come in by TMA with the stage (box BLOCK_M x 1), and so do group scaling's column-major
  // scales of B (box BLOCK_N x 1) and, where sb_map says so, block scaling's 128x128 scales of B
  // (swapped block scaling: of its A, in tma_sa); without a map the producer loads B's two block
  // scales itself (ld.global or cp.async), and every scale otherwise the producer warp copies
  // with cp.async.
  TensorMap tma_sa, tma_sb;
  void* d;  // D [M, N], row stride ldd elements
  long long ldd;
  const float* scale_a;
  long long sa_rs, sa_cs;
  const float* scale_b;
  long long sb_rs, sb_cs;
  const void* bias;  // [N] in D's element type, or null
  int M, N, K;
  int tiles_m, tiles_n, k_blocks;
  int pair_stores;  // D rows allow aligned 2-element stores
  int tma_store;    // D goes out through shared memory and TMA stores (16-byte aligned rows)
  // Split-K: each tile's K blocks are cut into `splits` ranges of kb_per_split. With
  // split_cluster, the ranges of a tile run on the CTAs of one cluster and are summed in shared
  // memory (split_sum.cuh); otherwise each range's FP32 partial tile goes to
  // workspace[split][M][N], and a reduction kernel writes D.
  int splits, kb_per_split;
  int split_cluster;
  // Dense launches: the schedule's divisors (dense_schedule.cuh), from tiles, splits and config.
  DenseSchedule schedule;
  float* workspace;
  int scale_tma;  // 1: scales by TMA (tma_sa, tma_sb); 0: by cp.async
  int scale_tx;  // bytes the scale boxes (A's, group scaling's B, sb_map's) deliver per stage
  int sb_hi;  // block scaling: index of the tile's second 128-block scale among B's staged scales
  // Block scaling's 128x128 scales of B (swapped block scaling: of its A) by TMA with the stage
  // (tma_sb, swapped tma_sa), where their layout allows a map and scale_tma: kScaleMapKInner (K
  // blocks contiguous, the second block's scale 4 floats on: sb_hi = 4) or kScaleMapBlockInner
  // (sb_hi = 1), boxes as GemmScaleMap says; 0: by the producer's loads
  // (Sm90GemmTraits::kScalesBByLane0, cp.async). One elected producer thread then issues nothing
  // but TMA loads per stage, which is what keeps narrow decode tiles fed (Sm90GemmProducer).
  int sb_map;
  // Grouped layouts: `groups` groups whose rows `group_rows` gives on the device (contiguous: G+1
  // row offsets into A and D; masked: G row counts, group g's rows starting at g * group_m_max;
  // indexed: M group indices, one per row);
  // B's scales of group g start sb_gs floats after group g - 1's; `status` (optional, device)
  // collects GemmStatusBits.
  int groups;
  int group_m_max;
  const int* group_rows;
  long long sb_gs;
  int* status;
};

}  // namespace dev
}  // namespace fp8jit
