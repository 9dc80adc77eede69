// A post-pass over compiled sm_90a cubins: keeps promotion's shared scale operand in the operand
// reuse cache for every FFMA of a run, not every other one.
//
// Why: block scaling's promotion is one FFMA per accumulator, `sum = acc * factor + sum`, 58-64
// in a row per thread with the same factor register in operand slot b. ptxas sets the reuse hint
// only where it avoids a register-bank conflict (every other FFMA), so half of them read the
// factor from the register file again: three register reads per FFMA there, while the other
// consumer warpgroup's wgmmas use the same register file. Measured on an H100 (G28, G29):
// the same kernels with the factor in a uniform register (two register reads per FFMA) run
// 5-8 % faster. With the hint on every FFMA whose successor reads the same factor, every FFMA
// but a run's first reads two registers. A hinted operand is only read back by the next
// instruction, which this pass checks reads the same register in the same slot, and the hint's
// no-yield flag keeps the warp from switching in between (as ptxas does for its own hints).
#pragma once

#include <string>

namespace fp8jit {

// Promotion's runs are 58-64 FFMAs long; shorter runs are other arithmetic, left alone.
constexpr int kMinFfmaRun = 16;

struct FfmaReuseStats {
  int runs = 0;     // runs of kMinFfmaRun or more register-form FFMAs
  int held = 0;     // instructions given the slot-b reuse hint (and no-yield flag) they lacked
  int skipped = 0;  // runs left alone: a branch may enter them after their first instruction
};

// Sets, in every run of kMinFfmaRun or more consecutive register-form FFMAs of `cubin`'s
// executable sections, the slot-b reuse hint and the no-yield flag of each FFMA whose successor
// in the run reads the same slot-b register (not RZ) and that does not write it, both
// unpredicated; a run that a branch may enter other than at its first instruction (a branch
// target inside it) is left alone. Nothing else changes (not even the size). Throws fp8jit::Error (internal) for
// a cubin that is not a well-formed ELF64, leaving it unmodified.
FfmaReuseStats hold_ffma_factors(std::string& cubin);

}  // namespace fp8jit
