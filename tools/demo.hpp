// `fp8jit demo` on a machine without a GPU: what fp8jit does there, in seconds.
#pragma once

namespace fp8jit::cli {

// Generates and NVRTC-compiles (into the disk cache: a second run takes well under a second) the
// kernels the GPU demo runs and the block-scaled GEMMs the heuristic picks for DeepSeek-V3's
// shapes on an H100, with progress, then shows one generated source and a table of what was
// built. Returns the exit status.
int demo_without_gpu(int jobs);

}  // namespace fp8jit::cli
