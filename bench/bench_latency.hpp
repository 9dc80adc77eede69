// JIT latency benchmarks (bench_latency.cpp): cold NVRTC compile per family, disk-cache load,
// host time per call of a cached kernel against a raw launch and against cuBLASLt.
#pragma once

namespace fp8jit::bench {

// Registers BM_ColdCompile*, BM_DiskCacheLoad*, BM_Dispatch*, BM_GemmDispatch* (called from main
// so that they run after the quantize/dequantize bandwidth benchmarks, as before).
void register_latency_benchmarks();

}  // namespace fp8jit::bench
