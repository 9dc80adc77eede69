// Times grouped block-scaled GEMMs (masked or contiguous) with several kernel configs in one
// process, interleaved: each round times every config (median of 15 calls, L2 flushed before
// each), and the report is each config's median over the rounds, so clock and L2 drift between
// configs cancel. The masked routing draws rows per group as the benchmark does
// (bench/peers/grouped_peers.py: uniform in [0, 2 x expected], clamped to M_max) from its own
// generator, or takes them from TABLE (space-separated counts); contiguous: `rows` rows per
// group. The
// operands are constant (FP8 1.0, scales 1.0): speed only, nothing is checked.
// Build (GPU machine, after building build-peers/libfp8jit.so):
// lab/probes/grouped_configs.sh (which also runs the MoE suite's masked cases).
// Run: /tmp/grouped_configs masked G M_MAX EXPECTED N K CONFIG_JSON...
//      /tmp/grouped_configs contiguous G ROWS ROWS N K CONFIG_JSON...
// CONFIG_JSON: gemm config fields, e.g. '"block_m":128,"block_n":192,"stages":4,"cluster_m":2';
// "heuristic" for the runtime's own choice.
#include <cuda.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "cuda_probe.hpp"
#include "fp8jit/runtime.hpp"

using probe::alloc;
using probe::alloc_ones;
using probe::median_us;

int main(int argc, char** argv) {
  if (argc < 8) {
    std::fprintf(stderr, "usage: %s masked|contiguous G M_MAX|ROWS EXPECTED N K CONFIG_JSON...\n",
                 argv[0]);
    return 2;
  }
  const bool masked = std::string(argv[1]) == "masked";
  const std::int64_t groups = std::atoll(argv[2]), m = std::atoll(argv[3]),
                     expected = std::atoll(argv[4]), n = std::atoll(argv[5]),
                     k = std::atoll(argv[6]);
  if (groups < 1 || m < 1 || expected < 0 || n < 1 || k < 1 ||
      (!masked && std::string(argv[1]) != "contiguous")) {
    std::fprintf(stderr, "bad arguments: layout masked|contiguous, G, M, N and K at least 1\n");
    return 2;
  }
  std::vector<int> table;
  if (const char* given = std::getenv("TABLE"); masked && given && *given) {  // counts as given
    for (const char* c = given; *c;) {
      char* end = nullptr;
      table.push_back(static_cast<int>(std::min<long long>(std::strtoll(c, &end, 10), m)));
      if (end == c) break;
      c = end;
    }
    table.resize(groups, 0);
  } else if (masked) {
    std::mt19937 rng(static_cast<unsigned>(groups * 1000 + expected));
    std::uniform_real_distribution<double> u(0.0, 2.0 * static_cast<double>(expected));
    for (std::int64_t g = 0; g < groups; ++g)
      table.push_back(static_cast<int>(std::min<std::int64_t>(std::llround(u(rng)), m)));
  } else {
    for (std::int64_t g = 0; g <= groups; ++g) table.push_back(static_cast<int>(g * m));
  }
  const std::int64_t rows = groups * m, kb = (k + 127) / 128, nb = (n + 127) / 128;
  probe::init_device0();
  const CUdeviceptr a = alloc(rows * k, 0x38), b = alloc(groups * n * k, 0x38),
                    d = alloc(rows * n * 2, 0);
  const std::int64_t sa_count = kb * ((rows + 3) / 4 * 4);
  const CUdeviceptr sa = alloc_ones(sa_count), sb = alloc_ones(groups * nb * kb);
  const CUdeviceptr flush = alloc(256u << 20, 0);
  CUdeviceptr tbl = 0;
  CHECK(cuMemAlloc(&tbl, table.size() * 4));
  CHECK(cuMemcpyHtoD(tbl, table.data(), table.size() * 4));

  fp8jit::Runtime rt;
  fp8jit::GroupedGemmArgs g;
  g.layout = masked ? fp8jit::GemmLayout::masked : fp8jit::GemmLayout::contiguous;
  g.groups = groups;
  g.group_rows = reinterpret_cast<const int*>(tbl);
  g.a = reinterpret_cast<const void*>(a);
  g.b = reinterpret_cast<const void*>(b);
  g.d = reinterpret_cast<void*>(d);
  g.m = masked ? m : rows;
  g.n = n, g.k = k, g.expected_m = expected;
  g.scale_a = reinterpret_cast<const float*>(sa);
  g.scale_a_size = sa_count;
  g.scale_b = reinterpret_cast<const float*>(sb);
  g.scale_b_size = groups * nb * kb;

  const fp8jit::KernelSpec chosen = rt.select(g);
  std::vector<fp8jit::KernelSpec> specs;
  for (int i = 7; i < argc; ++i) {
    if (std::string(argv[i]) == "heuristic") {
      specs.push_back(chosen);
      continue;
    }
    // The chosen spec with these config fields replaced.
    fp8jit::GemmConfig c = fp8jit::gemm_config_of(chosen);
    const std::string f = argv[i];
    try {
      const nlohmann::json fields = nlohmann::json::parse("{" + f + "}");
      for (auto [name, field] : {std::pair{"block_m", &c.block_m},
                                 {"block_n", &c.block_n},
                                 {"stages", &c.stages},
                                 {"group_m", &c.group_m},
                                 {"cluster_m", &c.cluster_m},
                                 {"cluster_n", &c.cluster_n}})
        if (fields.contains(name)) *field = fields.at(name).get<int>();
    } catch (const std::exception& e) {
      std::printf("  %s: not config fields (%s)\n", f.c_str(), e.what());
      continue;
    }
    try {
      specs.push_back(fp8jit::make_gemm_spec(fp8jit::gemm_problem_of(chosen), c));
    } catch (const std::exception& e) {
      std::printf("  %s: %s\n", f.c_str(), e.what());
    }
  }
  std::vector<std::thread> compiles;  // NVRTC in parallel, then each spec's first launch
  for (const auto& s : specs) compiles.emplace_back([&rt, s] { rt.compile(s); });
  for (auto& t : compiles) t.join();
  for (const auto& s : specs) rt.grouped_gemm(g, s, nullptr);
  std::vector<std::vector<double>> t(specs.size());
  for (int round = 0; round < 5; ++round)
    for (std::size_t i = 0; i < specs.size(); ++i)
      t[i].push_back(median_us([&] { rt.grouped_gemm(g, specs[i], nullptr); }, flush));
  std::printf("%s G=%lld m=%lld expected=%lld %lldx%lld:", argv[1], static_cast<long long>(groups),
              static_cast<long long>(m), static_cast<long long>(expected),
              static_cast<long long>(n), static_cast<long long>(k));
  for (int v : table) std::printf(" %d", v);
  std::printf("\n");
  for (std::size_t i = 0; i < specs.size(); ++i) {
    std::sort(t[i].begin(), t[i].end());
    std::printf("  %-70s %8.1f us (rounds %.1f-%.1f)%s\n", fp8jit::spec_name(specs[i]).c_str(),
                t[i][2], t[i].front(), t[i].back(),
                specs[i] == chosen ? "  <- runtime's choice" : "");
  }
  CHECK(cuCtxSynchronize());
  return 0;
}
