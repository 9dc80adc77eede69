// fp8jit GEMM against cuBLASLt on the same inputs, per scale mode, over a shape suite (and,
// with --providers=...,cublaslt_bf16, against a BF16 cuBLASLt GEMM on bf16 copies of the same
// values). Each benchmark times the providers (CUDA events, L2 flushed, warm-up, median) and reports
// TFLOP/s, the ratio to cuBLASLt, the fraction of the memory roofline, and how far the two
// outputs differ (a sanity check that the peer computes the same product).
#include <benchmark/benchmark.h>
#include <cuda_runtime.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <exception>
#include <functional>
#include <optional>
#include <random>
#include <sstream>
#include <utility>

#include "bench/bench_gemm.hpp"
#include "bench/bench_timing.hpp"
#include "bench/gemm_peer.hpp"
#include "fp8jit/fp8.hpp"
#include "fp8jit/runtime.hpp"
#include "common/file_io.hpp"

namespace fp8jit::bench {
namespace {

std::vector<GemmRow>& rows() {
  static std::vector<GemmRow> r;
  return r;
}

using Dev = DeviceScratch;

double copy_gbps() {
  static double v = 0;
  if (v == 0) {
    const std::size_t n = 1u << 30;
    Dev a(n), b(n);
    cudaMemset(a.p, 1, n);
    v = 2.0 * n / (median_ms([&] { cudaMemcpyAsync(b.p, a.p, n, cudaMemcpyDeviceToDevice); }, 20) * 1e-3) * 1e-9;
  }
  return v;
}

void quantize_operand(std::int64_t rows, std::int64_t k, Granularity g, ScaleLayout layout, void* q, float* s,
                      unsigned seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0, 1);
  std::vector<unsigned char> h(rows * k * 2);
  for (std::int64_t i = 0; i < rows * k; ++i) fp8::store_from_float(h.data(), i, DType::bf16, d(rng));
  Dev x(h.size());
  cudaMemcpy(x.p, h.data(), h.size(), cudaMemcpyHostToDevice);
  QuantizeArgs a;
  a.x = x.p;
  a.m = rows;
  a.k = k;
  a.q = q;
  a.scales = s;
  a.granularity = g;
  a.scale_layout = layout;
  quantize(a, nullptr);
  cudaDeviceSynchronize();
}

// The bf16 copy of an FP8 operand: fp8jit's dequantize with the scales the GEMM reads.
void dequantize_operand(const void* q, std::int64_t rows, std::int64_t k, Granularity g, ScaleLayout layout,
                        const float* s, void* y) {
  DequantizeArgs a;
  a.q = q;
  a.m = rows;
  a.k = k;
  a.scales = s;
  a.granularity = g;
  a.scale_layout = layout;
  a.y = y;
  a.output = DType::bf16;
  dequantize(a, nullptr);
  cudaDeviceSynchronize();
}

double relative_difference(const std::vector<unsigned char>& x, const std::vector<unsigned char>& y, DType t, std::size_t n) {
  double diff = 0, norm = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const double a = fp8::load_as_float(x.data(), i, t), b = fp8::load_as_float(y.data(), i, t);
    diff += (a - b) * (a - b);
    norm += b * b;
  }
  return norm > 0 ? std::sqrt(diff / norm) : INFINITY;
}

// main() has checked for a usable GPU and the shapes before any benchmark runs.
void time_case(benchmark::State& state, GemmShape s, ScaleMode mode, bool fast, GemmProviders providers) {
  GemmArgs g;
  g.m = s.m; g.n = s.n; g.k = s.k;
  g.scale_mode = mode;
  g.fast_accum = fast;
  const Granularity ga = mode == ScaleMode::tensor ? Granularity::tensor : mode == ScaleMode::rowwise ? Granularity::row : Granularity::group128;
  const Granularity gb = mode == ScaleMode::tensor ? Granularity::tensor : mode == ScaleMode::rowwise ? Granularity::row
                         : mode == ScaleMode::block ? Granularity::block128 : Granularity::group128;
  g.scale_a_layout = ScaleLayout::col_major_tma;  // cuBLASLt VEC128: token-contiguous
  g.scale_b_layout = mode == ScaleMode::group ? ScaleLayout::col_major_tma : ScaleLayout::row_major;
  g.scale_a_size = scale_count(ga, g.scale_a_layout, s.m, s.k);
  g.scale_b_size = scale_count(gb, g.scale_b_layout, s.n, s.k);
  Dev a(s.m * s.k), b(s.n * s.k), sa(4 * g.scale_a_size), sb(4 * g.scale_b_size), d(s.m * s.n * 2), dp(s.m * s.n * 2);
  quantize_operand(s.m, s.k, ga, g.scale_a_layout, a.p, static_cast<float*>(sa.p), 1);
  quantize_operand(s.n, s.k, gb, g.scale_b_layout, b.p, static_cast<float*>(sb.p), 2);
  g.a = a.p; g.b = b.p; g.scale_a = static_cast<float*>(sa.p); g.scale_b = static_cast<float*>(sb.p); g.d = d.p;
  GemmRow row;
  row.shape = s;
  row.mode = std::string(to_string(mode)) + (fast ? "_fast" : "");
  if (providers.fp8jit) row.kernel = spec_name(default_runtime().select(g));
  else row.fp8jit_status = "skipped";
  GemmArgs peer_args = g;
  peer_args.d = dp.p;
  CublasLtGemm peer;
  std::string why = "skipped";
  bool peer_ok = false;
  // BF16 baseline: the FP8 operands dequantized with their scales into bf16 A [M, K], B [N, K].
  const bool bf16 = providers.cublaslt_bf16;
  Dev abf(bf16 ? s.m * s.k * 2 : 0), bbf(bf16 ? s.n * s.k * 2 : 0), dbf(bf16 ? s.m * s.n * 2 : 0);
  CublasLtBf16Gemm bf16_peer;
  std::string bf16_why = "skipped";
  bool bf16_ready = false, bf16_ok = false;
  if (bf16) {
    try {
      dequantize_operand(a.p, s.m, s.k, ga, g.scale_a_layout, g.scale_a, abf.p);
      dequantize_operand(b.p, s.n, s.k, gb, g.scale_b_layout, g.scale_b, bbf.p);
      bf16_ready = true;
    } catch (const std::exception& e) {
      bf16_why = std::string("dequantize failed: ") + e.what();
    }
  }
  // One iteration (the median of 30 runs inside it): fp8jit's time, else cuBLASLt's, else BF16's.
  // The cuBLASLt peers are planned (their candidate algorithms timed) after fp8jit has been timed.
  for (auto _ : state) {
    if (providers.fp8jit) row.fp8jit_us = median_ms([&] { gemm(g, nullptr); }, 30) * 1e3;
    peer_ok = providers.cublaslt && peer.plan(peer_args, why);
    if (peer_ok) row.cublaslt_us = median_ms([&] { peer.run(nullptr); }, 30) * 1e3;
    bf16_ok = bf16_ready && bf16_peer.plan(abf.p, bbf.p, dbf.p, s.m, s.n, s.k, bf16_why);
    if (bf16_ok) row.bf16_us = median_ms([&] { bf16_peer.run(nullptr); }, 30) * 1e3;
    state.SetIterationTime((providers.fp8jit ? row.fp8jit_us : peer_ok ? row.cublaslt_us : row.bf16_us) * 1e-6);
  }
  if (!peer_ok) row.peer_status = why;
  row.bf16_status = bf16_ok ? "passed" : bf16_why;
  if (providers.fp8jit && (peer_ok || bf16_ok)) {
    std::vector<unsigned char> x(s.m * s.n * 2), y(x.size());
    cudaMemcpy(x.data(), d.p, x.size(), cudaMemcpyDeviceToHost);
    if (peer_ok) {
      cudaMemcpy(y.data(), dp.p, y.size(), cudaMemcpyDeviceToHost);
      row.rel_diff = relative_difference(x, y, DType::bf16, s.m * s.n);
    }
    if (bf16_ok) {
      cudaMemcpy(y.data(), dbf.p, y.size(), cudaMemcpyDeviceToHost);
      row.bf16_rel_diff = relative_difference(x, y, DType::bf16, s.m * s.n);
    }
  }
  const double flop = 2.0 * s.m * s.n * s.k;
  const double bytes = double(s.m) * s.k + double(s.n) * s.k + 2.0 * s.m * s.n;
  if (providers.fp8jit) {
    row.roofline = (bytes / (copy_gbps() * 1e9)) / (row.fp8jit_us * 1e-6);
    state.counters["TFLOPs"] = flop / (row.fp8jit_us * 1e-6) * 1e-12;
    state.counters["roofline"] = row.roofline;
  }
  if (row.cublaslt_us > 0) {
    state.counters["cublaslt_TFLOPs"] = flop / (row.cublaslt_us * 1e-6) * 1e-12;
    if (providers.fp8jit) {
      state.counters["ratio"] = row.cublaslt_us / row.fp8jit_us;
      state.counters["rel_diff"] = row.rel_diff;
    }
  }
  if (bf16_ok) {
    state.counters["bf16_TFLOPs"] = flop / (row.bf16_us * 1e-6) * 1e-12;
    if (providers.fp8jit) {
      state.counters["speedup_vs_bf16"] = row.bf16_us / row.fp8jit_us;
      state.counters["bf16_rel_diff"] = row.bf16_rel_diff;
    }
  }
  std::string label = providers.fp8jit ? row.kernel : "fp8jit skipped";
  if (!row.peer_status.empty()) label += " [peer: " + row.peer_status + "]";
  if (bf16 && !bf16_ok) label += " [bf16: " + row.bf16_status + "]";
  state.SetLabel(label);
  rows().push_back(row);
  if (!providers.fp8jit && !peer_ok && !bf16_ok)
    state.SkipWithError(("nothing timed: fp8jit skipped, cuBLASLt " + why + ", BF16 cuBLASLt " + bf16_why).c_str());
}

// An exception escaping a benchmark would end the whole run (std::terminate): it becomes this
// benchmark's error instead, and the run goes on to the next shape.
void run_case(benchmark::State& state, GemmShape s, ScaleMode mode, bool fast, GemmProviders providers) {
  try {
    time_case(state, s, mode, fast, providers);
  } catch (const std::exception& e) {
    state.SkipWithError(e.what());
  }
}

// "m" or "m_fast": the scale mode and whether it accumulates fast; nullopt for an unknown mode.
std::optional<std::pair<ScaleMode, bool>> parse_gemm_mode(const std::string& m) {
  const bool fast = m.size() > 5 && m.substr(m.size() - 5) == "_fast";
  const auto mode = parse_scale_mode(fast ? m.substr(0, m.size() - 5) : m);
  if (!mode) return std::nullopt;
  return std::pair{*mode, fast};
}

}  // namespace

std::vector<GemmShape> read_shapes(const std::string& path) {
  // read_regular_file: a FIFO or directory given as --shapes fails at once with its name.
  std::istringstream f(read_regular_file(path, "--shapes"));
  std::vector<GemmShape> out;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#' || !std::isdigit(static_cast<unsigned char>(line[0]))) continue;
    std::replace(line.begin(), line.end(), ',', ' ');
    std::istringstream ss(line);
    GemmShape s;
    if (ss >> s.m >> s.n >> s.k) out.push_back(s);
  }
  return out;
}

std::vector<std::string> register_gemm_benchmarks(const std::vector<GemmShape>& shapes, const std::vector<std::string>& modes,
                                                  GemmProviders providers) {
  std::vector<std::string> unknown;
  for (const std::string& m : modes) {
    const auto parsed = parse_gemm_mode(m);
    if (!parsed) {
      unknown.push_back(m);
      continue;
    }
    const ScaleMode mode = parsed->first;
    const bool fast = parsed->second;
    for (const GemmShape& s : shapes)
      benchmark::RegisterBenchmark(fmt::format("Gemm/{}/{}x{}x{}", m, s.m, s.n, s.k).c_str(),
                                   [s, mode, fast, providers](benchmark::State& st) { run_case(st, s, mode, fast, providers); })
          ->UseManualTime()->Iterations(1)->Unit(benchmark::kMicrosecond);
  }
  return unknown;
}

bool is_gemm_mode(const std::string& mode) { return parse_gemm_mode(mode).has_value(); }

const std::vector<GemmRow>& gemm_results() { return rows(); }

}  // namespace fp8jit::bench
