// Quantize / dequantize bandwidth benchmarks (bench_quant.cpp).
#pragma once

#include <string>

namespace fp8jit {
class OutputFiles;  // common/file_io.hpp
}

namespace fp8jit::bench {

// Registers SweepQuantize/* and SweepDequantize/*: every config of one problem each at a fixed
// size, the data behind the heuristic defaults (run with --benchmark_filter=Sweep).
void register_quant_sweeps();
// Stages <dir>/quant.csv (problem,m,k,status,time_us,gbps,copy_gbps,pct_of_copy,kernel; read by
// bench/plot.sh) in `files`: nothing when dir is empty or no quantize benchmark ran.
void stage_quant_csv(const std::string& dir, OutputFiles& files);

}  // namespace fp8jit::bench
