// The GEMM results as a markdown table (stdout and <dir>/gemm.md), a CSV (<dir>/gemm.csv: one row
// per shape, mode and provider, read by bench/plot.sh) and a JSON of the rows (<dir>/gemm_rows.json).
// BF16 cuBLASLt (--providers=...,cublaslt_bf16) adds two markdown columns and cublaslt_bf16 CSV
// rows (ratio_to_cublaslt: cuBLASLt FP8 time over BF16 time), only when it was asked for.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>

#include "bench/bench_gemm.hpp"

namespace fp8jit::bench {
namespace {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') out += '\\', out += c;
    else if (static_cast<unsigned char>(c) < 0x20) out += fmt::format("\\u{:04x}", static_cast<unsigned>(c));
    else out += c;
  }
  return out + "\"";
}

// A finite number with up to 6 significant digits, or null.
std::string json_number(double v, bool present = true) {
  return present && std::isfinite(v) ? fmt::format("{:.6g}", v) : "null";
}

}  // namespace

void write_gemm_report(const std::string& dir, const std::string& gpu) {
  const auto& rows = gemm_results();
  if (rows.empty()) return;
  const bool bf16_cols =
      std::any_of(rows.begin(), rows.end(), [](const GemmRow& r) { return r.bf16_status != "skipped"; });
  std::string md = fmt::format("GEMM on {} (bf16 out; TFLOP/s from the median of 30 L2-flushed runs)\n\n", gpu);
  md += "| M | N | K | scale | fp8jit kernel | fp8jit µs | fp8jit TFLOP/s | cuBLASLt µs | cuBLASLt TFLOP/s |";
  md += bf16_cols ? " bf16 µs | bf16 TFLOP/s |" : "";
  md += " ratio | roofline | rel. diff |\n";
  md += std::string("| --- | --- | --- | --- | --- | --- | --- | --- | --- |") + (bf16_cols ? " --- | --- |" : "") +
        " --- | --- | --- |\n";
  std::string csv = "m,n,k,scale,provider,status,time_us,tflops,ratio_to_cublaslt,roofline_fraction,kernel\n";
  std::string json = fmt::format("{{\n  \"gpu\": {},\n  \"rows\": [", json_string(gpu));
  std::map<std::string, std::pair<double, int>> logsum;
  std::map<std::string, double> worst;
  std::map<std::string, std::pair<double, int>> bf16_logsum;  // fp8jit's speedup over BF16
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const GemmRow& r = rows[i];
    const bool ran = r.fp8jit_status == "passed" && r.fp8jit_us > 0;
    const bool peer_ran = r.peer_status.empty() && r.cublaslt_us > 0;
    const double flop = 2.0 * r.shape.m * r.shape.n * r.shape.k;
    const double t = ran ? flop / (r.fp8jit_us * 1e-6) * 1e-12 : 0;
    const double tc = peer_ran ? flop / (r.cublaslt_us * 1e-6) * 1e-12 : 0;
    const double ratio = ran && peer_ran ? r.cublaslt_us / r.fp8jit_us : 0;
    const bool bf16_ran = r.bf16_status == "passed" && r.bf16_us > 0;
    const double tb = bf16_ran ? flop / (r.bf16_us * 1e-6) * 1e-12 : 0;
    if (ran && bf16_ran) {
      bf16_logsum[r.mode].first += std::log(r.bf16_us / r.fp8jit_us);
      bf16_logsum[r.mode].second += 1;
    }
    if (ratio > 0) {
      logsum[r.mode].first += std::log(ratio);
      logsum[r.mode].second += 1;
      worst[r.mode] = worst.count(r.mode) ? std::min(worst[r.mode], ratio) : ratio;
    }
    const std::string bf16_md =
        !bf16_cols ? ""
                   : fmt::format(" {} | {} |", bf16_ran ? fmt::format("{:.1f}", r.bf16_us) : "-",
                                 bf16_ran ? fmt::format("{:.0f}", tb) : r.bf16_status);
    md += fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |{} {} | {} | {} |\n", r.shape.m, r.shape.n, r.shape.k,
                      r.mode, ran ? r.kernel : r.fp8jit_status, ran ? fmt::format("{:.1f}", r.fp8jit_us) : "-",
                      ran ? fmt::format("{:.0f}", t) : "-", peer_ran ? fmt::format("{:.1f}", r.cublaslt_us) : "-",
                      peer_ran ? fmt::format("{:.0f}", tc) : r.peer_status, bf16_md,
                      ratio > 0 ? fmt::format("{:.2f}x", ratio) : "-",
                      ran && r.shape.m <= 128 ? fmt::format("{:.0f}%", 100 * r.roofline) : "",
                      ratio > 0 ? fmt::format("{:.1e}", r.rel_diff) : "-");
    if (ran)
      csv += fmt::format("{},{},{},{},fp8jit,passed,{:.2f},{:.1f},{},{:.3f},{}\n", r.shape.m, r.shape.n, r.shape.k, r.mode,
                         r.fp8jit_us, t, ratio > 0 ? fmt::format("{:.3f}", ratio) : "", r.roofline, r.kernel);
    else
      csv += fmt::format("{},{},{},{},fp8jit,{},,,,,\n", r.shape.m, r.shape.n, r.shape.k, r.mode, r.fp8jit_status);
    if (peer_ran)
      csv += fmt::format("{},{},{},{},cublaslt,passed,{:.2f},{:.1f},1,,\n", r.shape.m, r.shape.n, r.shape.k, r.mode,
                         r.cublaslt_us, tc);
    else
      csv += fmt::format("{},{},{},{},cublaslt,{},,,,,\n", r.shape.m, r.shape.n, r.shape.k, r.mode,
                         r.peer_status == "skipped" ? "skipped" : "not supported");
    if (bf16_ran)
      csv += fmt::format("{},{},{},{},cublaslt_bf16,passed,{:.2f},{:.1f},{},,\n", r.shape.m, r.shape.n, r.shape.k, r.mode,
                         r.bf16_us, tb, peer_ran ? fmt::format("{:.3f}", r.cublaslt_us / r.bf16_us) : "");
    else if (r.bf16_status != "skipped")
      csv += fmt::format("{},{},{},{},cublaslt_bf16,not supported,,,,,\n", r.shape.m, r.shape.n, r.shape.k, r.mode);
    json += fmt::format(
        "{}\n    {{\"m\": {}, \"n\": {}, \"k\": {}, \"scale\": {}, \"fp8jit_status\": {}, \"kernel\": {}, "
        "\"fp8jit_us\": {}, \"fp8jit_tflops\": {}, \"cublaslt_status\": {}, \"cublaslt_us\": {}, \"cublaslt_tflops\": {}, "
        "\"ratio_to_cublaslt\": {}, \"roofline_fraction\": {}, \"rel_diff\": {}, \"cublaslt_bf16_status\": {}, "
        "\"cublaslt_bf16_us\": {}, \"cublaslt_bf16_tflops\": {}, \"bf16_rel_diff\": {}}}",
        i ? "," : "", r.shape.m, r.shape.n, r.shape.k, json_string(r.mode), json_string(r.fp8jit_status),
        ran ? json_string(r.kernel) : "null", json_number(r.fp8jit_us, ran), json_number(t, ran),
        json_string(peer_ran ? "passed" : r.peer_status), json_number(r.cublaslt_us, peer_ran), json_number(tc, peer_ran),
        json_number(ratio, ratio > 0), json_number(r.roofline, ran), json_number(r.rel_diff, ratio > 0),
        json_string(r.bf16_status), json_number(r.bf16_us, bf16_ran), json_number(tb, bf16_ran),
        json_number(r.bf16_rel_diff, ran && bf16_ran));
  }
  json += "\n  ],\n  \"geomean_ratio_to_cublaslt\": {";
  md += "\n";
  bool first = true;
  for (const auto& [mode, ls] : logsum) {
    const double gm = std::exp(ls.first / ls.second);
    md += fmt::format("- {}: geometric mean {:.3f}x cuBLASLt over {} shapes, worst {:.2f}x\n", mode, gm, ls.second, worst[mode]);
    json += fmt::format("{}\n    {}: {{\"geomean\": {}, \"shapes\": {}, \"worst\": {}}}", first ? "" : ",", json_string(mode),
                        json_number(gm), ls.second, json_number(worst[mode]));
    first = false;
  }
  for (const auto& [mode, ls] : bf16_logsum)
    md += fmt::format("- {}: fp8jit geometric mean {:.3f}x BF16 cuBLASLt over {} shapes\n", mode,
                      std::exp(ls.first / ls.second), ls.second);
  json += first ? "}\n}\n" : "\n  }\n}\n";
  std::fputs(md.c_str(), stdout);
  if (!dir.empty()) {
    std::ofstream(dir + "/gemm.md") << md;
    std::ofstream(dir + "/gemm.csv") << csv;
    std::ofstream(dir + "/gemm_rows.json") << json;
  }
}

}  // namespace fp8jit::bench
