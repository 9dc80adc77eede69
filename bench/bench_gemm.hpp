// GEMM benchmark registration and results (see bench_gemm.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fp8jit::bench {

struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
};

struct GemmRow {
  GemmShape shape;
  std::string mode;
  std::string kernel;
  double fp8jit_us = 0, cublaslt_us = 0, rel_diff = 0, roofline = 0;
  std::string fp8jit_status = "passed";  // or "skipped" (not in --providers)
  std::string peer_status;               // empty: cuBLASLt ran; else why not ("skipped", "no cuBLASLt algorithm ...")
};

// Which providers the GEMM benchmarks time (--providers=fp8jit,cublaslt; both by default).
struct GemmProviders {
  bool fp8jit = true, cublaslt = true;
};

std::vector<GemmShape> read_shapes(const std::string& csv_path);
// Modes: tensor, rowwise, block, group, each optionally with "_fast" (fast accumulation). Returns
// the modes it does not know (nothing registered for those).
std::vector<std::string> register_gemm_benchmarks(const std::vector<GemmShape>& shapes, const std::vector<std::string>& modes,
                                                  GemmProviders providers = {});
const std::vector<GemmRow>& gemm_results();
// Markdown table (stdout, <dir>/gemm.md), CSV (<dir>/gemm.csv) and JSON (<dir>/gemm_rows.json)
// of the results; geometric-mean ratio per mode. No files when dir is empty.
void write_gemm_report(const std::string& dir, const std::string& gpu);

}  // namespace fp8jit::bench
