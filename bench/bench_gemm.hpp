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
  std::string peer_status;
};

std::vector<GemmShape> read_shapes(const std::string& csv_path);
void register_gemm_benchmarks(const std::vector<GemmShape>& shapes, const std::vector<std::string>& modes);
const std::vector<GemmRow>& gemm_results();
// Markdown table and CSV of the results; geometric-mean ratio per mode.
void write_gemm_report(const std::string& dir, const std::string& gpu);

}  // namespace fp8jit::bench
