#include "runtime/ops/scale_columns.hpp"

#include <fmt/format.h>

#include "fp8jit/error.hpp"
#include "fp8jit/gemm/geometry.cuh"
#include "generator/families/gemm_geometry.hpp"
#include "runtime/jit/module.hpp"
#include "runtime/ops/gemm_common.hpp"

namespace fp8jit::ops {

namespace {

// Where the copy pays for its launch (~2.5 µs on an H200, measured as the gain's floor): from 512
// rows, where the producer's one 32-byte sector a row and stage costs more than the copy
// (4096x7168x2048 122.8 -> 98.4 µs, 777x3072x4096 27.3 -> 26.6), or from 48 K blocks, where a
// decode tile's long K loop does (64x2112x7168 21.5 -> 15.7, 128x4096x7168 24.1 -> 20.0). Below
// both the warp's cp.async costs less than a second launch (64x7168x2048 11.4 against 13.3 with
// the copy, 37x3072x4096 13.0 against 14.9). Never at swapped operands' rows (M <= 16): their
// kernel reads the problem's A scales as one column of at most 16 floats a stage, which the copy
// cannot beat (1x6144x4096 16.0 against 17.2, 16x7168x6144 21.0 against 23.6). A second list
// (lab/configs/row_major_scales_2.txt) gained at 256x7168x7168, 512x4096x4096 and 32x4096x6144
// (38.2 -> 35.8, 24.8 -> 21.8, 20.1 -> 19.2) and lost at 2048x2112x1536 (22.3 -> 23.6): rows
// alone do not say how many rows each CTA's producer copies; docs/performance.md has the model.
constexpr std::int64_t kCopyFromRows = 512;
constexpr std::int64_t kCopyFromKBlocks = 48;

}  // namespace

std::size_t scale_columns_bytes(const LoadedKernel& k, ScaleMode mode, ScaleLayout layout,
                                std::int64_t rows, std::int64_t k_dim) {
  if (layout != ScaleLayout::row_major || rows <= 0) return 0;
  if (mode != ScaleMode::block && mode != ScaleMode::group) return 0;
  const std::int64_t kb = ceil_div(k_dim, dev::kGemmBlockK);
  if (rows <= kGemmSwapMaxM || (rows < kCopyFromRows && kb < kCopyFromKBlocks)) return 0;
  if (!k.scale_columns)
    throw Error(ErrorKind::internal,
                fmt::format("{}: block-scaled module without fp8jit_gemm_scale_columns",
                            spec_name(k.spec)));
  const std::int64_t floats = scale_floats_a(mode, ScaleLayout::col_major_tma, rows, k_dim);
  return static_cast<std::size_t>((floats * 4 + 255) / 256 * 256);
}

void launch_scale_columns(const LoadedKernel& k, const float* src, std::int64_t rows,
                          std::int64_t k_dim, float* dst, CUstream stream, bool pdl) {
  const std::int64_t kb = ceil_div(k_dim, dev::kGemmBlockK);
  long long rs, cs, unit, ld;
  scale_strides(ScaleLayout::row_major, rows, kb, rs, cs);
  scale_strides(ScaleLayout::col_major_tma, rows, kb, unit, ld);
  int r = static_cast<int>(rows), c = static_cast<int>(kb);
  void* args[] = {&src, &rs, &cs, &r, &c, &dst, &ld};
  LaunchConfig l;
  constexpr int kTile = dev::kScaleColumnsTile;
  l.grid[0] = static_cast<unsigned>(ceil_div(rows, kTile));
  l.grid[1] = static_cast<unsigned>(ceil_div(kb, kTile));
  l.block[0] = kTile;
  l.block[1] = dev::kScaleColumnsRowsPerPass;
  l.smem_bytes = dev::kScaleColumnsSmemBytes;
  l.stream = stream;
  l.pdl = pdl && k.pdl;
  launch(k.scale_columns, l, args);
}

}  // namespace fp8jit::ops
