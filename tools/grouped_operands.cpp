#include "tools/grouped_operands.hpp"

#include <algorithm>
#include <numeric>
#include <random>

#include "tools/operands.hpp"

namespace fp8jit::cli {
namespace {

// Which groups the routing leaves empty: each with probability 1/8, and one at least from 3
// groups on (a router that starves an expert is the common case the kernel must skip).
std::vector<bool> empty_groups(std::int64_t groups, std::mt19937& rng) {
  std::vector<bool> empty(static_cast<std::size_t>(groups), false);
  std::bernoulli_distribution eighth(0.125);
  for (std::size_t g = 0; g < empty.size(); ++g) empty[g] = groups > 1 && eighth(rng);
  if (groups >= 3) empty[rng() % empty.size()] = true;
  if (std::all_of(empty.begin(), empty.end(), [](bool e) { return e; })) empty[0] = false;
  return empty;
}

std::vector<int> contiguous_routing(const GroupedShape& s, std::mt19937& rng) {
  const std::vector<bool> empty = empty_groups(s.groups, rng);
  std::uniform_real_distribution<double> weight(0.25, 1.75);
  std::vector<double> w(empty.size());
  for (std::size_t g = 0; g < w.size(); ++g) w[g] = empty[g] ? 0.0 : weight(rng);
  const double total = std::accumulate(w.begin(), w.end(), 0.0);
  std::vector<std::int64_t> rows(w.size());
  std::int64_t given = 0;
  for (std::size_t g = 0; g < w.size(); ++g)
    given += rows[g] = static_cast<std::int64_t>(s.m * (w[g] / total));
  // The rows that rounding left over, one each to the non-empty groups from a random one on.
  for (std::size_t g = rng() % w.size(); given < s.m; g = (g + 1) % w.size())
    if (!empty[g]) ++rows[g], ++given;
  std::vector<int> table = {0};
  for (std::int64_t r : rows) table.push_back(static_cast<int>(table.back() + r));
  return table;
}

std::vector<int> masked_routing(const GroupedShape& s, std::mt19937& rng) {
  const std::vector<bool> empty = empty_groups(s.groups, rng);
  std::uniform_real_distribution<double> spread(0.5, 1.5);
  const auto expected = static_cast<double>(expected_rows(s));
  std::vector<int> table;
  for (bool e : empty)
    table.push_back(e ? 0
                      : static_cast<int>(std::clamp<std::int64_t>(
                            std::llround(expected * spread(rng)), 1, s.m)));
  if (s.groups >= 4) {  // one group with every row it has room for
    auto full = rng() % table.size();
    while (table[full] == 0) full = (full + 1) % table.size();
    table[full] = static_cast<int>(s.m);
  }
  return table;
}

// DeepGEMM's m_indices: contiguous group sizes over the rows the padding leaves (each group's
// rows start on a multiple of kGemmIndexedAlignment), -1 after each group and at the end.
std::vector<int> indexed_routing(const GroupedShape& s, std::mt19937& rng) {
  constexpr std::int64_t kAlign = kGemmIndexedAlignment;
  GroupedShape room = s;
  room.m = std::max<std::int64_t>(0, s.m - s.groups * (kAlign - 1));
  const std::vector<int> offsets = contiguous_routing(room, rng);
  std::vector<int> table;
  table.reserve(static_cast<std::size_t>(s.m));
  for (std::int64_t g = 0; g < s.groups; ++g) {
    table.insert(table.end(), static_cast<std::size_t>(offsets[g + 1] - offsets[g]),
                 static_cast<int>(g));
    while (table.size() % kAlign != 0 && static_cast<std::int64_t>(table.size()) < s.m)
      table.push_back(-1);
  }
  table.resize(static_cast<std::size_t>(s.m), -1);
  return table;
}

}  // namespace

std::vector<int> random_routing(const GroupedShape& s, unsigned seed) {
  std::mt19937 rng(seed);
  if (s.layout == GemmLayout::indexed) return indexed_routing(s, rng);
  return s.layout == GemmLayout::masked ? masked_routing(s, rng) : contiguous_routing(s, rng);
}

std::vector<int> uniform_masked_routing(const GroupedShape& s, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::int64_t> rows(0, 2 * expected_rows(s));
  std::vector<int> table(static_cast<std::size_t>(s.groups));
  for (int& r : table) r = static_cast<int>(std::min(rows(rng), s.m));
  return table;
}

GroupedGemmArgs grouped_gemm_args(const GemmProblem& p, const GroupedShape& s) {
  GroupedGemmArgs g;
  g.layout = s.layout;
  g.groups = s.groups;
  g.m = s.m, g.n = s.n, g.k = s.k;
  g.lda = s.k, g.ldb = s.k, g.ldd = s.n;
  g.expected_m = expected_rows(s);
  g.a_format = p.a_format, g.b_format = p.b_format;
  g.d_dtype = p.out;
  g.scale_mode = p.scale;
  g.fast_accum = p.fast_accum;
  g.scale_a_layout = ScaleLayout::col_major_tma;
  g.scale_b_layout = ScaleLayout::row_major;
  return g;
}

GroupedOperands make_grouped_operands(Runtime& rt, GroupedGemmArgs& g, unsigned seed) {
  const GroupedShape shape{g.layout, g.groups, g.m, g.n, g.k, g.expected_m};
  const Granularity ga = gemm_scale_granularity_a(g.scale_mode), gb = gemm_scale_granularity_b(g.scale_mode);
  const std::int64_t rows = g.layout == GemmLayout::masked ? g.groups * g.m : g.m;
  const std::int64_t b_floats = scale_count(gb, g.scale_b_layout, g.n, g.k);
  g.scale_a_size = scale_count(ga, g.scale_a_layout, rows, g.k);
  g.scale_b_size = b_floats * g.groups;
  GroupedOperands o;
  o.a = std::make_unique<DeviceBuffer>(rows * g.k);
  o.b = std::make_unique<DeviceBuffer>(g.groups * g.n * g.k);
  o.scale_a = std::make_unique<DeviceBuffer>(4 * g.scale_a_size);
  o.scale_b = std::make_unique<DeviceBuffer>(4 * g.scale_b_size);
  o.d = std::make_unique<DeviceBuffer>(rows * g.n * dtype_size(g.d_dtype));
  quantize_random(rt, rows, g.k, g.a_format, ga, g.scale_a_layout, o.a->get(), o.scale_a->f32(),
                  seed);
  for (std::int64_t e = 0; e < g.groups; ++e)  // each expert's weights with scales of their own
    quantize_random(rt, g.n, g.k, g.b_format, gb, g.scale_b_layout,
                    static_cast<unsigned char*>(o.b->get()) + e * g.n * g.k,
                    o.scale_b->f32() + e * b_floats, seed + 1000 + static_cast<unsigned>(e));
  o.table_host = random_routing(shape, seed);
  o.table = std::make_unique<DeviceBuffer>(4 * o.table_host.size());
  o.table->upload(o.table_host.data(), 4 * o.table_host.size());
  g.a = o.a->get();
  g.b = o.b->get();
  g.scale_a = o.scale_a->f32();
  g.scale_b = o.scale_b->f32();
  g.group_rows = static_cast<const int*>(o.table->get());
  g.d = o.d->get();
  return o;
}

}  // namespace fp8jit::cli
