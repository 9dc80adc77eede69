// A post-pass over compiled sm_90a cubins: lets the warp scheduler switch warps inside long runs of
// FFMA instructions (block scaling's promotion).
//
// Why: promotion multiplies each K block's wgmma sums by a scale and adds them to the FP32 tile,
// one FFMA per accumulator, 58-64 in a row per thread and column half. ptxas marks every other
// one to keep the shared scale in the operand reuse cache, and an instruction that fills the
// reuse cache also carries the "stay on this warp" flag (a switch would invalidate the cache), so
// the scheduler may switch warps only after every second FFMA; per tensor's promotion (FADDs, no
// reuse) may switch after each one. More switch points let the other consumer warpgroup's warp on
// the same scheduler issue its wgmmas sooner, overlapping promotion with MMA. Dropping the reuse
// hint (the operand is then read from the register file: same result) frees the flag. DeepGEMM
// reported this ("FFMA SASS interleaving") as a gain of up to 10 % for its block-scaled kernels;
// the encoding (runtime/sass/cubin_code.hpp) was checked against nvdisasm on this project's kernels
// (bench/NOTES.md, G25). Measured on an H100 (CUDA 13.0): 1-3 % slower at 9/16 and 16/16 on
// this project's block-scaled kernels, whose two consumer warpgroups already take turns on the
// tensor cores (G28), hence off by default.
#pragma once

#include <string>

namespace fp8jit {

struct FfmaYieldStats {
  int runs = 0;      // runs of kMinFfmaRun or more register-form FFMAs
  int released = 0;  // instructions whose reuse hint and no-yield flag were dropped
};

constexpr int kMinFfmaRun = 16;

// Rewrites, in every executable section of `cubin`, the leading `sixteenths`/16 of each run of
// kMinFfmaRun or more consecutive register-form FFMAs: where an instruction carries a reuse hint
// and the no-yield flag, both are cleared. Nothing else changes (not even the size). 0 leaves the
// cubin as it is. Throws fp8jit::Error (internal) for a cubin that is not a well-formed ELF64,
// leaving it unmodified.
FfmaYieldStats release_ffma_runs(std::string& cubin, int sixteenths);

}  // namespace fp8jit
