// GEMM benchmark registration and results (see bench_gemm.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fp8jit/runtime.hpp"

namespace fp8jit {
class OutputFiles;  // common/file_io.hpp
}

namespace fp8jit::bench {

using fp8jit::GemmShape;  // m, n, k

struct GemmRow {
  GemmShape shape;
  std::string mode;
  std::string kernel;
  double fp8jit_us = 0, cublaslt_us = 0, rel_diff = 0, roofline = 0;
  std::string fp8jit_status = "passed";  // or "skipped" (not in --providers)
  std::string peer_status;               // empty: cuBLASLt ran; else why not ("skipped", "no cuBLASLt algorithm ...")
  // BF16 cuBLASLt on bf16 copies of the same operands (dequantized with the same scales):
  // "passed", "skipped" (not in --providers) or why it did not run. rel diff: against fp8jit.
  double bf16_us = 0, bf16_rel_diff = 0;
  std::string bf16_status = "skipped";
};

// Which providers the GEMM benchmarks time (--providers=fp8jit,cublaslt,cublaslt_bf16; the first
// two by default).
struct GemmProviders {
  bool fp8jit = true, cublaslt = true, cublaslt_bf16 = false;
};

// The m,n,k rows of a shape CSV (header and # comment lines skipped). Throws Error(io) naming
// the file when it cannot be read.
std::vector<GemmShape> read_shapes(const std::string& csv_path);
// Modes: tensor, rowwise, block, group, each optionally with "_fast" (fast accumulation).
bool is_gemm_mode(const std::string& mode);
// Returns the modes it does not know (nothing registered for those).
std::vector<std::string> register_gemm_benchmarks(const std::vector<GemmShape>& shapes, const std::vector<std::string>& modes,
                                                  GemmProviders providers = {});
const std::vector<GemmRow>& gemm_results();

// The report's three files as text: markdown table, CSV and JSON of the rows, with the
// geometric-mean ratio to cuBLASLt per mode.
struct GemmReport {
  std::string md, csv, json;
};
GemmReport format_gemm_report(const std::vector<GemmRow>& rows, const std::string& gpu);
// Prints the markdown table and stages <dir>/gemm.md, gemm.csv and gemm_rows.json in `files`
// (committed by the caller with the run's other outputs). Nothing when there are no rows; no
// files when dir is empty.
void stage_gemm_report(const std::vector<GemmRow>& rows, const std::string& gpu,
                       const std::string& dir, OutputFiles& files);

}  // namespace fp8jit::bench
