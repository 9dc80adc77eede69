#include "autotune/grouped_reference.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "autotune/timer.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/reference.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit {
namespace {

const unsigned char* bytes_at(const void* base, std::int64_t offset) {
  return static_cast<const unsigned char*>(base) + offset;
}

std::int64_t scale_floats_b(const GroupedGemmArgs& a) {
  return scale_count(gemm_scale_granularity_b(a.scale_mode), a.scale_b_layout, a.n, a.k);
}

std::vector<int> download_table(const GroupedGemmArgs& a) {
  const std::int64_t entries = a.layout == GemmLayout::indexed      ? a.m
                               : a.layout == GemmLayout::contiguous ? a.groups + 1
                                                                    : a.groups;
  std::vector<int> table(static_cast<std::size_t>(entries));
  driver::check(
      driver::api().cuMemcpyDtoH(table.data(), reinterpret_cast<CUdeviceptr>(a.group_rows),
                                 table.size() * sizeof(int)),
      "download the group table");
  return table;
}

// A's block scales of rows [first, last) as a tensor of their own: in the col_major_tma layout a
// column's stride is the padded row count of the whole A, so a slice is no pointer offset.
std::vector<float> slice_col_major(const std::vector<float>& all, std::int64_t rows,
                                   std::int64_t k_blocks, std::int64_t first, std::int64_t last) {
  const std::int64_t m = last - first, stride = (m + 3) / 4 * 4, all_stride = (rows + 3) / 4 * 4;
  std::vector<float> out(static_cast<std::size_t>(stride * k_blocks), 0.0f);
  for (std::int64_t j = 0; j < k_blocks; ++j)
    std::copy_n(all.begin() + j * all_stride + first, m, out.begin() + j * stride);
  return out;
}

// The dense GEMM of (some of) one group's rows: those rows of A (and their scales) times its B.
// `sliced_a_scales` holds A's scales of these rows where they are no pointer offset (col_major_tma
// block scales).
GemmArgs group_gemm(const GroupedGemmArgs& a, const GroupRows& g, const float* sliced_a_scales) {
  const std::int64_t m = g.last - g.first, k_blocks = (a.k + 127) / 128;
  GemmArgs r;
  r.a = bytes_at(a.a, g.first * a.lda);
  r.a_format = a.a_format;
  r.lda = a.lda;
  r.b = bytes_at(a.b, g.group * a.n * a.ldb);
  r.b_format = a.b_format;
  r.ldb = a.ldb;
  r.d = a.d;  // checked by the reference's argument checks, never written
  r.d_dtype = a.d_dtype;
  r.m = m, r.n = a.n, r.k = a.k;
  r.scale_mode = a.scale_mode;
  r.fast_accum = a.fast_accum;
  r.scale_a_layout = a.scale_a_layout;
  switch (a.scale_mode) {
    case ScaleMode::tensor:
      r.scale_a = a.scale_a, r.scale_a_size = 1;
      break;
    case ScaleMode::rowwise:
      r.scale_a = a.scale_a + g.first, r.scale_a_size = m;
      break;
    default:
      r.scale_a = sliced_a_scales ? sliced_a_scales : a.scale_a + g.first * k_blocks;
      r.scale_a_size = scale_count(Granularity::group128, a.scale_a_layout, m, a.k);
  }
  r.scale_b_size = scale_floats_b(a);
  r.scale_b = a.scale_b + g.group * r.scale_b_size;
  r.scale_b_layout = a.scale_b_layout;
  return r;
}

}  // namespace

// An indexed table's groups: each one run of rows starting on a multiple of
// kGemmIndexedAlignment, -1 elsewhere (GroupedGemmArgs).
std::vector<GroupRows> indexed_rows_of(const GroupedGemmArgs& a, const std::vector<int>& table) {
  auto bad = [&](std::size_t i, const std::string& rule) {
    throw_invalid(fmt::format("group_rows[{}]", i), std::to_string(table[i]),
                  rule + "; checking a grouped GEMM needs a table the kernel uses as it is");
  };
  std::vector<GroupRows> out;
  std::vector<bool> seen(static_cast<std::size_t>(a.groups), false);
  for (std::size_t r = 0; r < table.size();) {
    const int g = table[r];
    if (g < -1 || g >= a.groups) bad(r, fmt::format("must be in [-1, {})", a.groups));
    if (g == -1) {
      ++r;
      continue;
    }
    if (r % kGemmIndexedAlignment != 0 || seen[static_cast<std::size_t>(g)])
      bad(r, fmt::format("a group's rows are one run starting on a multiple of {} rows",
                         kGemmIndexedAlignment));
    seen[static_cast<std::size_t>(g)] = true;
    std::size_t end = r;
    while (end < table.size() && table[end] == g) ++end;
    out.push_back({g, static_cast<std::int64_t>(r), static_cast<std::int64_t>(end)});
    r = end;
  }
  std::sort(out.begin(), out.end(),
            [](const GroupRows& x, const GroupRows& y) { return x.group < y.group; });
  return out;
}

std::vector<GroupRows> group_rows_of(const GroupedGemmArgs& a, const std::vector<int>& table) {
  if (a.layout == GemmLayout::indexed) return indexed_rows_of(a, table);
  std::vector<GroupRows> out;
  auto bad = [&](std::size_t i, const std::string& rule) {
    throw_invalid(fmt::format("group_rows[{}]", i), std::to_string(table[i]),
                  rule + "; checking a grouped GEMM needs a table the kernel uses as it is");
  };
  for (std::int64_t g = 0; g < a.groups; ++g) {
    const auto i = static_cast<std::size_t>(g);
    GroupRows r{g, 0, 0};
    if (a.layout == GemmLayout::contiguous) {
      if (g == 0 && (table[0] < 0 || table[0] > a.m))
        bad(0, fmt::format("must be in [0, {}]", a.m));
      if (table[i + 1] < table[i] || table[i + 1] > a.m)
        bad(i + 1, fmt::format("must be in [{}, {}] (offsets ascend up to m)", table[i], a.m));
      r.first = table[i], r.last = table[i + 1];
    } else {
      if (table[i] < 0 || table[i] > a.m)
        bad(i, fmt::format("must be in [0, {}] (masked_m up to m)", a.m));
      r.first = g * a.m, r.last = g * a.m + table[i];
    }
    if (r.last > r.first) out.push_back(r);
  }
  return out;
}

std::string GroupedCheck::failure(double tolerance) const {
  if (stray_rows > 0)
    return fmt::format("{} rows outside every group were written (the first: row {})", stray_rows,
                       first_stray);
  if (worst_error <= tolerance) return "";
  return fmt::format("group {}: relative error {:.3e} above {:.0e}", worst_group, worst_error,
                     tolerance);
}

GroupedReference::GroupedReference(const GroupedGemmArgs& a)
    : a_(a), groups_(group_rows_of(a, download_table(a))) {
  // The reference kernel runs a block per row in the grid's y dimension (at most 65535), so a
  // group's rows go through it in parts.
  constexpr std::int64_t kPartRows = 32768;
  std::int64_t most = 0;
  for (const GroupRows& g : groups_) {
    valid_rows_ += g.last - g.first;
    most = std::max(most, std::min(kPartRows, g.last - g.first));
  }
  ref_.resize(static_cast<std::size_t>(valid_rows_ * a.n));
  if (groups_.empty()) return;
  const bool slice =
      a.scale_mode == ScaleMode::block && a.scale_a_layout == ScaleLayout::col_major_tma;
  const std::int64_t k_blocks = (a.k + 127) / 128;
  std::vector<float> a_scales(slice ? static_cast<std::size_t>(a.scale_a_size) : 0);
  if (slice)
    driver::check(
        driver::api().cuMemcpyDtoH(a_scales.data(), reinterpret_cast<CUdeviceptr>(a.scale_a),
                                   a_scales.size() * sizeof(float)),
        "download A's scales");
  DeviceBuffer out(static_cast<std::size_t>(most * a.n) * sizeof(double));
  DeviceBuffer sliced(
      slice ? static_cast<std::size_t>((most + 3) / 4 * 4 * k_blocks) * sizeof(float) : 16);
  double* at = ref_.data();
  for (const GroupRows& g : groups_)
    for (std::int64_t first = g.first; first < g.last; first += kPartRows) {
      const GroupRows part{g.group, first, std::min(first + kPartRows, g.last)};
      if (slice) {
        const std::vector<float> s =
            slice_col_major(a_scales, total_rows(), k_blocks, part.first, part.last);
        sliced.upload(s.data(), s.size() * sizeof(float));
      }
      reference::gemm_on_device(group_gemm(a, part, slice ? sliced.f32() : nullptr),
                                static_cast<double*>(out.get()), nullptr);
      const auto count = static_cast<std::size_t>((part.last - part.first) * a.n);
      out.download(at, count * sizeof(double));
      at += count;
    }
}

std::int64_t GroupedReference::total_rows() const {
  return a_.layout == GemmLayout::masked ? a_.groups * a_.m : a_.m;
}

void GroupedReference::poison_d() const {
  const std::size_t bytes =
      static_cast<std::size_t>(total_rows() * a_.ldd) * dtype_size(a_.d_dtype);
  driver::check(
      driver::api().cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(a_.d), 0xFF, bytes, nullptr),
      "poison D");
  driver::check(driver::api().cuCtxSynchronize(), "poison D");
}

GroupedCheck GroupedReference::check() const {
  const std::size_t esize = dtype_size(a_.d_dtype);
  const std::int64_t row_bytes = a_.ldd * static_cast<std::int64_t>(esize), rows = total_rows();
  std::vector<unsigned char> d(static_cast<std::size_t>(rows * row_bytes));
  driver::check(driver::api().cuCtxSynchronize(), "grouped gemm");
  driver::check(driver::api().cuMemcpyDtoH(d.data(), reinterpret_cast<CUdeviceptr>(a_.d), d.size()),
                "download D");
  GroupedCheck c;
  std::vector<bool> owned(static_cast<std::size_t>(rows), false);
  const double* ref = ref_.data();
  for (const GroupRows& g : groups_) {
    const std::int64_t m = g.last - g.first;
    std::fill(owned.begin() + g.first, owned.begin() + g.last, true);
    const double err =
        reference::relative_error(d.data() + g.first * row_bytes, a_.ldd, a_.d_dtype, ref, m, a_.n);
    if (c.worst_group < 0 || !(err <= c.worst_error)) c.worst_error = err, c.worst_group = g.group;
    ref += m * a_.n;
  }
  const auto written = static_cast<std::ptrdiff_t>(a_.n * static_cast<std::int64_t>(esize));
  for (std::int64_t r = 0; r < rows; ++r) {
    const unsigned char* row = d.data() + r * row_bytes;
    if (owned[static_cast<std::size_t>(r)] ||
        std::all_of(row, row + written, [](unsigned char b) { return b == 0xFF; }))
      continue;
    if (c.stray_rows++ == 0) c.first_stray = r;
  }
  return c;
}

}  // namespace fp8jit
