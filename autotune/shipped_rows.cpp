#include "autotune/shipped_rows.hpp"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>

#include "common/file_io.hpp"
#include "common/log.hpp"
#include "fp8jit/error.hpp"

namespace fp8jit {

namespace {

bool matches(const TuningRecord& r, const GpuKey& gpu, std::string_view op,
             std::string_view problem_key, std::int64_t n, std::int64_t k,
             std::string_view space_hash) {
  return r.gpu == gpu && r.op == op && r.problem_key == problem_key && r.n == n && r.k == k &&
         r.space_hash == space_hash;
}

}  // namespace

ShippedRows ShippedRows::read(const std::string& dir) {
  ShippedRows out;
  out.dir_ = dir;
  namespace fs = std::filesystem;
  std::error_code ec;
  if (dir.empty() || !fs::is_directory(dir, ec)) return out;
  std::vector<fs::path> files;
  for (const fs::directory_entry& e : fs::directory_iterator(dir, ec))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());  // a fixed order: the first of equal keys wins everywhere
  for (const fs::path& f : files) {
    try {
      for (TuningRecord& r :
           parse_tuning_export(read_regular_file(f.string(), "shipped tuning rows")))
        out.rows_.push_back({std::move(r), f.filename().string()});
    } catch (const std::exception& e) {
      log::at(log::warning, "shipped tuning rows {} not used: {}", printable(f.string()), e.what());
    }
  }
  return out;
}

const ShippedRows& ShippedRows::at(const std::string& dir) {
  static std::mutex mutex;
  static std::map<std::string, std::unique_ptr<ShippedRows>> read_dirs;
  std::lock_guard<std::mutex> lock(mutex);
  auto it = read_dirs.find(dir);
  if (it == read_dirs.end())
    it = read_dirs.emplace(dir, std::make_unique<ShippedRows>(read(dir))).first;
  return *it->second;
}

const ShippedRow* ShippedRows::exact(const GpuKey& gpu, std::string_view op,
                                     std::string_view problem_key, std::int64_t m, std::int64_t n,
                                     std::int64_t k, std::string_view space_hash) const {
  for (const ShippedRow& r : rows_)
    if (r.record.m == m && matches(r.record, gpu, op, problem_key, n, k, space_hash)) return &r;
  return nullptr;
}

const ShippedRow* ShippedRows::nearest_m(const GpuKey& gpu, std::string_view op,
                                         std::string_view problem_key, std::int64_t m,
                                         std::int64_t n, std::int64_t k,
                                         std::string_view space_hash) const {
  const ShippedRow* best = nullptr;
  auto distance = [m](const ShippedRow& r) {
    return r.record.m > m ? r.record.m - m : m - r.record.m;
  };
  for (const ShippedRow& r : rows_) {
    if (!matches(r.record, gpu, op, problem_key, n, k, space_hash)) continue;
    // The closest M; between two as close, the larger (its tiles are less likely too small).
    if (!best || distance(r) < distance(*best) ||
        (distance(r) == distance(*best) && r.record.m > best->record.m))
      best = &r;
  }
  return best;
}

std::string default_shipped_tuning_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<const void*>(&default_shipped_tuning_dir), &info) == 0 ||
      !info.dli_fname)
    return {};
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::weakly_canonical(info.dli_fname, ec);
  if (ec || self.empty()) return {};
  // lib/ or bin/ one level under the prefix, or a multiarch lib/<triplet>/ two levels under it.
  const std::filesystem::path one =
      self.parent_path().parent_path() / "share" / "fp8jit" / "tuning";
  const std::filesystem::path two =
      self.parent_path().parent_path().parent_path() / "share" / "fp8jit" / "tuning";
  return (!std::filesystem::is_directory(one, ec) && std::filesystem::is_directory(two, ec) ? two
                                                                                            : one)
      .string();
}

}  // namespace fp8jit
