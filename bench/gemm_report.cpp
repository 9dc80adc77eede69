// The GEMM results as a markdown table (stdout and <dir>/gemm.md) and a CSV (<dir>/gemm.csv).
#include <fmt/format.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "bench/bench_gemm.hpp"

namespace fp8jit::bench {

void write_gemm_report(const std::string& dir, const std::string& gpu) {
  const auto& rows = gemm_results();
  if (rows.empty()) return;
  std::string md = fmt::format("GEMM on {} (bf16 out; TFLOP/s from the median of 30 L2-flushed runs)\n\n", gpu);
  md += "| M | N | K | scale | fp8jit kernel | fp8jit µs | fp8jit TFLOP/s | cuBLASLt µs | cuBLASLt TFLOP/s | ratio | roofline | rel. diff |\n";
  md += "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n";
  std::string csv = "m,n,k,scale,provider,status,time_us,tflops,ratio_to_cublaslt,roofline_fraction,kernel\n";
  std::map<std::string, std::pair<double, int>> logsum;
  std::map<std::string, double> worst;
  for (const GemmRow& r : rows) {
    const double flop = 2.0 * r.shape.m * r.shape.n * r.shape.k;
    const double t = flop / (r.fp8jit_us * 1e-6) * 1e-12;
    const double tc = r.cublaslt_us > 0 ? flop / (r.cublaslt_us * 1e-6) * 1e-12 : 0;
    const double ratio = r.cublaslt_us > 0 ? r.cublaslt_us / r.fp8jit_us : 0;
    if (ratio > 0) {
      logsum[r.mode].first += std::log(ratio);
      logsum[r.mode].second += 1;
      worst[r.mode] = worst.count(r.mode) ? std::min(worst[r.mode], ratio) : ratio;
    }
    md += fmt::format("| {} | {} | {} | {} | {} | {:.1f} | {:.0f} | {} | {} | {} | {} | {} |\n", r.shape.m, r.shape.n,
                      r.shape.k, r.mode, r.kernel, r.fp8jit_us, t, r.cublaslt_us > 0 ? fmt::format("{:.1f}", r.cublaslt_us) : "-",
                      tc > 0 ? fmt::format("{:.0f}", tc) : r.peer_status, ratio > 0 ? fmt::format("{:.2f}x", ratio) : "-",
                      r.shape.m <= 128 ? fmt::format("{:.0f}%", 100 * r.roofline) : "",
                      r.cublaslt_us > 0 ? fmt::format("{:.1e}", r.rel_diff) : "-");
    csv += fmt::format("{},{},{},{},fp8jit,passed,{:.2f},{:.1f},{:.3f},{:.3f},{}\n", r.shape.m, r.shape.n, r.shape.k, r.mode,
                       r.fp8jit_us, t, ratio, r.roofline, r.kernel);
    csv += fmt::format("{},{},{},{},cublaslt,{},{:.2f},{:.1f},1,,\n", r.shape.m, r.shape.n, r.shape.k, r.mode,
                       r.peer_status.empty() ? "passed" : "not supported", r.cublaslt_us, tc);
  }
  md += "\n";
  for (const auto& [mode, ls] : logsum)
    md += fmt::format("- {}: geometric mean {:.3f}x cuBLASLt over {} shapes, worst {:.2f}x\n", mode,
                      std::exp(ls.first / ls.second), ls.second, worst[mode]);
  std::fputs(md.c_str(), stdout);
  if (!dir.empty()) {
    std::ofstream(dir + "/gemm.md") << md;
    std::ofstream(dir + "/gemm.csv") << csv;
  }
}

}  // namespace fp8jit::bench
