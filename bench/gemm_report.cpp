// The GEMM results as a markdown table (stdout and <dir>/gemm.md), a CSV (<dir>/gemm.csv: one row
// per shape, mode and provider, read by bench/plot.sh) and a JSON of the rows
// (<dir>/gemm_rows.json). BF16 cuBLASLt (--providers=...,cublaslt_bf16) adds two markdown columns
// and cublaslt_bf16 CSV rows (ratio_to_cublaslt: cuBLASLt FP8 time over BF16 time), only when it
// was asked for.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/bench_gemm.hpp"
#include "common/file_io.hpp"

namespace fp8jit::bench {
namespace {

using Json = nlohmann::ordered_json;

// What one row ran and the rates derived from its times (0 where it did not run).
struct Figures {
  bool ran, peer_ran, bf16_ran;
  double t, tc, tb;  // TFLOP/s: fp8jit, cuBLASLt FP8, cuBLASLt BF16
  double ratio;      // cuBLASLt FP8 time over fp8jit's; 0 unless both ran
};

Figures figures(const GemmRow& r) {
  Figures f{};
  f.ran = r.fp8jit_status == "passed" && r.fp8jit_us > 0;
  f.peer_ran = r.peer_status.empty() && r.cublaslt_us > 0;
  f.bf16_ran = r.bf16_status == "passed" && r.bf16_us > 0;
  const double flop = 2.0 * r.shape.m * r.shape.n * r.shape.k;
  f.t = f.ran ? flop / (r.fp8jit_us * 1e-6) * 1e-12 : 0;
  f.tc = f.peer_ran ? flop / (r.cublaslt_us * 1e-6) * 1e-12 : 0;
  f.tb = f.bf16_ran ? flop / (r.bf16_us * 1e-6) * 1e-12 : 0;
  f.ratio = f.ran && f.peer_ran ? r.cublaslt_us / r.fp8jit_us : 0;
  return f;
}

// A finite value with 6 significant digits, else null: JSON has no NaN or infinity, and the
// digits beyond 6 are below what CUDA-event timing resolves.
Json number(double v, bool present = true) {
  if (!present || !std::isfinite(v)) return nullptr;
  return std::strtod(fmt::format("{:.6g}", v).c_str(), nullptr);
}

std::string md_row(const GemmRow& r, const Figures& f, bool bf16_cols) {
  const std::string bf16_md =
      !bf16_cols ? ""
                 : fmt::format(" {} | {} |", f.bf16_ran ? fmt::format("{:.1f}", r.bf16_us) : "-",
                               f.bf16_ran ? fmt::format("{:.0f}", f.tb) : r.bf16_status);
  return fmt::format("| {} | {} | {} | {} | {} | {} | {} | {} | {} |{} {} | {} | {} |\n", r.shape.m,
                     r.shape.n, r.shape.k, r.mode, f.ran ? r.kernel : r.fp8jit_status,
                     f.ran ? fmt::format("{:.1f}", r.fp8jit_us) : "-",
                     f.ran ? fmt::format("{:.0f}", f.t) : "-",
                     f.peer_ran ? fmt::format("{:.1f}", r.cublaslt_us) : "-",
                     f.peer_ran ? fmt::format("{:.0f}", f.tc) : r.peer_status, bf16_md,
                     f.ratio > 0 ? fmt::format("{:.2f}x", f.ratio) : "-",
                     f.ran && r.shape.m <= 128 ? fmt::format("{:.0f}%", 100 * r.roofline) : "",
                     f.ratio > 0 ? fmt::format("{:.1e}", r.rel_diff) : "-");
}

std::string csv_rows(const GemmRow& r, const Figures& f) {
  const std::string shape = fmt::format("{},{},{},{}", r.shape.m, r.shape.n, r.shape.k, r.mode);
  std::string csv;
  if (f.ran)
    csv += fmt::format("{},fp8jit,passed,{:.2f},{:.1f},{},{:.3f},{}\n", shape, r.fp8jit_us, f.t,
                       f.ratio > 0 ? fmt::format("{:.3f}", f.ratio) : "", r.roofline, r.kernel);
  else
    csv += fmt::format("{},fp8jit,{},,,,,\n", shape, r.fp8jit_status);
  if (f.peer_ran)
    csv += fmt::format("{},cublaslt,passed,{:.2f},{:.1f},1,,\n", shape, r.cublaslt_us, f.tc);
  else
    csv += fmt::format("{},cublaslt,{},,,,,\n", shape,
                       r.peer_status == "skipped" ? "skipped" : "not supported");
  if (f.bf16_ran)
    csv += fmt::format("{},cublaslt_bf16,passed,{:.2f},{:.1f},{},,\n", shape, r.bf16_us, f.tb,
                       f.peer_ran ? fmt::format("{:.3f}", r.cublaslt_us / r.bf16_us) : "");
  else if (r.bf16_status != "skipped")
    csv += fmt::format("{},cublaslt_bf16,not supported,,,,,\n", shape);
  return csv;
}

Json json_row(const GemmRow& r, const Figures& f) {
  Json j;
  j["m"] = r.shape.m;
  j["n"] = r.shape.n;
  j["k"] = r.shape.k;
  j["scale"] = r.mode;
  j["fp8jit_status"] = r.fp8jit_status;
  j["kernel"] = f.ran ? Json(r.kernel) : Json(nullptr);
  j["fp8jit_us"] = number(r.fp8jit_us, f.ran);
  j["fp8jit_tflops"] = number(f.t, f.ran);
  j["cublaslt_status"] = f.peer_ran ? "passed" : r.peer_status;
  j["cublaslt_us"] = number(r.cublaslt_us, f.peer_ran);
  j["cublaslt_tflops"] = number(f.tc, f.peer_ran);
  j["ratio_to_cublaslt"] = number(f.ratio, f.ratio > 0);
  j["roofline_fraction"] = number(r.roofline, f.ran);
  j["rel_diff"] = number(r.rel_diff, f.ratio > 0);
  j["cublaslt_bf16_status"] = r.bf16_status;
  j["cublaslt_bf16_us"] = number(r.bf16_us, f.bf16_ran);
  j["cublaslt_bf16_tflops"] = number(f.tb, f.bf16_ran);
  j["bf16_rel_diff"] = number(r.bf16_rel_diff, f.ran && f.bf16_ran);
  return j;
}

std::string md_header(const std::string& gpu, bool bf16_cols) {
  std::string md =
      fmt::format("GEMM on {} (bf16 out; TFLOP/s from the median of 30 L2-flushed runs)\n\n", gpu);
  md +=
      "| M | N | K | scale | fp8jit kernel | fp8jit µs | fp8jit TFLOP/s | cuBLASLt µs | cuBLASLt "
      "TFLOP/s |";
  md += bf16_cols ? " bf16 µs | bf16 TFLOP/s |" : "";
  md += " ratio | roofline | rel. diff |\n";
  md += std::string("| --- | --- | --- | --- | --- | --- | --- | --- | --- |") +
        (bf16_cols ? " --- | --- |" : "") + " --- | --- | --- |\n";
  return md;
}

// Sums of logs per mode, for geometric means.
struct LogSum {
  double sum = 0;
  int count = 0;
  void add(double x) { sum += std::log(x), count += 1; }
  double geomean() const { return std::exp(sum / count); }
};

}  // namespace

GemmReport format_gemm_report(const std::vector<GemmRow>& rows, const std::string& gpu) {
  const bool bf16_cols = std::any_of(rows.begin(), rows.end(),
                                     [](const GemmRow& r) { return r.bf16_status != "skipped"; });
  GemmReport out;
  out.md = md_header(gpu, bf16_cols);
  out.csv =
      "m,n,k,scale,provider,status,time_us,tflops,ratio_to_cublaslt,roofline_fraction,kernel\n";
  Json json;
  json["gpu"] = gpu;
  json["rows"] = Json::array();
  std::map<std::string, LogSum> ratio_logs, bf16_logs;  // bf16: fp8jit's speedup over BF16
  std::map<std::string, double> worst;
  for (const GemmRow& r : rows) {
    const Figures f = figures(r);
    if (f.ran && f.bf16_ran) bf16_logs[r.mode].add(r.bf16_us / r.fp8jit_us);
    if (f.ratio > 0) {
      ratio_logs[r.mode].add(f.ratio);
      worst[r.mode] = worst.count(r.mode) ? std::min(worst[r.mode], f.ratio) : f.ratio;
    }
    out.md += md_row(r, f, bf16_cols);
    out.csv += csv_rows(r, f);
    json["rows"].push_back(json_row(r, f));
  }
  out.md += "\n";
  Json& geomeans = json["geomean_ratio_to_cublaslt"] = Json::object();
  for (const auto& [mode, ls] : ratio_logs) {
    out.md += fmt::format("- {}: geometric mean {:.3f}x cuBLASLt over {} shapes, worst {:.2f}x\n",
                          mode, ls.geomean(), ls.count, worst[mode]);
    geomeans[mode] = {
        {"geomean", number(ls.geomean())}, {"shapes", ls.count}, {"worst", number(worst[mode])}};
  }
  for (const auto& [mode, ls] : bf16_logs)
    out.md += fmt::format("- {}: fp8jit geometric mean {:.3f}x BF16 cuBLASLt over {} shapes\n",
                          mode, ls.geomean(), ls.count);
  // Replace, not throw: a GPU name or a cuBLASLt message is not guaranteed to be UTF-8.
  out.json = json.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  return out;
}

void stage_gemm_report(const std::vector<GemmRow>& rows, const std::string& gpu,
                       const std::string& dir, OutputFiles& files) {
  if (rows.empty()) return;
  const GemmReport report = format_gemm_report(rows, gpu);
  std::fputs(report.md.c_str(), stdout);
  if (dir.empty()) return;
  files.add(dir + "/gemm.md", report.md);
  files.add(dir + "/gemm.csv", report.csv);
  files.add(dir + "/gemm_rows.json", report.json);
}

}  // namespace fp8jit::bench
