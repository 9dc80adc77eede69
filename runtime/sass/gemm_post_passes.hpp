// The gemm family's cubin post-passes, registered where a KernelCache is configured: the facade
// (runtime/runtime.cpp) passes gemm_post_passes(...) in KernelCacheOptions::post_passes, and
// `fp8jit compile` runs the same list (run_post_passes) so that it writes the bytes the runtime
// loads. The cache itself applies each pass to the family it names and adds the pass's key line
// to that family's cubin keys only: quantize and dequantize cubins are NVRTC's bytes, keyed
// without any pass.
#pragma once

#include <vector>

#include "runtime/jit/kernel_cache.hpp"

namespace fp8jit {

// ffma_reuse (runtime/sass/ffma_reuse.hpp, FP8JIT_FFMA_REUSE): promotion's scale factor held in
// the operand reuse cache, 4-7 % faster on block scaling's 128x256 tiles. Key line
// "ffma_reuse 1"; off, the list is empty and gemm cubins are NVRTC's bytes.
std::vector<CubinPostPass> gemm_post_passes(bool ffma_reuse);

}  // namespace fp8jit
