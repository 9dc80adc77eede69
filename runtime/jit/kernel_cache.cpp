#include "runtime/jit/kernel_cache.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "common/file_io.hpp"
#include "common/log.hpp"
#include "fp8jit/version.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "runtime/jit/headers.hpp"

namespace fp8jit {

std::string binary_cache_key(const std::string& source, CompileTarget target,
                             const std::vector<std::string>& post_pass_keys, const GpuArch& arch) {
  std::string passes;
  for (const std::string& line : post_pass_keys) passes += line + "\n";
  return fmt::format("fp8jit {}\nnvrtc {}\noptions {}\nheaders {:016x}\n{}{}",
                     FP8JIT_VERSION_STRING, nvrtc_version(),
                     fmt::join(nvrtc_options(target, arch), " "), embedded_headers().hash, passes,
                     source);
}

std::vector<std::string> post_pass_keys(const std::vector<CubinPostPass>& passes,
                                        const std::string& family) {
  std::vector<std::string> keys;
  for (const CubinPostPass& p : passes)
    if (p.family == family) keys.push_back(p.key);
  return keys;
}

std::vector<std::string> run_post_passes(const std::vector<CubinPostPass>& passes,
                                         const std::string& family, std::string& cubin) {
  std::vector<std::string> reports;
  for (const CubinPostPass& p : passes) {
    if (p.family != family) continue;
    std::string report = p.run(cubin);
    if (!report.empty()) reports.push_back(std::move(report));
  }
  return reports;
}

KernelCache::KernelCache(KernelCacheOptions options)
    : options_(std::move(options)), disk_(options_.cache_dir) {}

// The post-passes rewrite sm_90a cubins (the GEMMs'), never another architecture's binary.
std::string KernelCache::key_of(const std::string& family, const std::string& source,
                                const BuildTarget& target) const {
  return binary_cache_key(source, target.target,
                          target == kHopperCubin ? post_pass_keys(options_.post_passes, family)
                                                 : std::vector<std::string>{},
                          target.arch);
}

std::string KernelCache::cubin_key(const KernelSpec& spec, const BuildTarget& target) const {
  return key_of(spec.family, render_source(spec), target);
}

std::string KernelCache::cubin(const KernelSpec& spec, const BuildTarget& target) {
  return cubin_of(spec, std::nullopt, target);
}

BuildTarget KernelCache::target_for_device(const KernelSpec& spec) const {
  static const std::vector<int> archs = nvrtc_supported_archs();
  const driver::DeviceInfo info = driver::device_info();
  return build_target_for(find_family(spec.family), info.cc_major, info.cc_minor,
                          fmt::format("{} ({})", info.ordinal, info.name), options_.elementwise,
                          archs);
}

// `live_for`: set on the launch path (what the kernel is for), where live compiles may be off.
std::string KernelCache::cubin_of(const KernelSpec& spec, std::optional<std::string_view> live_for,
                                  const BuildTarget& target) {
  const std::string name = spec_name(spec);
  const std::string source = render_source(spec);
  const std::string key = key_of(spec.family, source, target);
  if (auto hit = disk_.load(key)) {
    log::at(log::debug, "{}: cubin from the disk cache", name);
    return *hit;
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = compiled_.find(key); it != compiled_.end()) return it->second;
  }
  if (live_for && !options_.live_compile)
    throw Error(ErrorKind::unsupported,
                fmt::format("{}{}{} is in neither the memory nor the disk cache{}, and live compiles are off (FP8JIT_JIT=off / "
                            "RuntimeOptions::jit): precompile it before serving (fp8jit precompile, "
                            "Runtime::precompile, fp8jit.precompile) or allow compiles",
                            *live_for, live_for->empty() ? "" : ": kernel ", name,
                            disk_.dir().empty() ? " (disabled)" : " " + disk_.dir()));
  if (disk_.dir().empty()) return compile_and_store(name, spec.family, source, key, target);
  // One compile per key across processes: the first to miss compiles under the lock, the others
  // wait for it and find its cubin on the second look.
  const std::string lock_path = disk_.path_for(key) + ".lock";
  io::FileLock lock(lock_path);
  // The lock file goes while still held, once the cubin is stored (or found): the cache keeps
  // only cubins, and a process still waiting on the removed file finds the cubin on its second
  // look. Declared after `lock`, so it runs before the lock is released.
  struct RemoveLockFile {
    const std::string& path;
    bool held;
    ~RemoveLockFile() {
      if (held) ::unlink(path.c_str());
    }
  } remove_lock_file{lock_path, lock.locked()};
  if (lock.locked()) {
    if (auto hit = disk_.load(key, /*count_miss=*/false)) {
      log::at(log::debug, "{}: cubin from the disk cache, compiled by another process", name);
      return *hit;
    }
  }
  return compile_and_store(name, spec.family, source, key, target);
}

std::string KernelCache::compile_and_store(const std::string& name, const std::string& family,
                                           const std::string& source, const std::string& key,
                                           const BuildTarget& target) {
  CompileResult r = nvrtc_compile(name, source, target.target, target.arch);
  compiles_++;
  compile_micros_ += static_cast<std::uint64_t>(r.seconds * 1e6);
  log::at(log::info, "{}: compiled in {:.3f} s{}", name, r.seconds,
          target == kHopperCubin ? "" : " for " + target.name());
  if (!r.log.empty()) log::at(log::debug, "{}: NVRTC log:\n{}", name, r.log);
  if (target == kHopperCubin)
    for (const std::string& report : run_post_passes(options_.post_passes, family, r.binary))
      log::at(log::debug, "{}: {}", name, report);
  if (disk_.dir().empty()) {
    if (!options_.live_compile) {  // the launch path may take only what was compiled before it
      std::lock_guard<std::mutex> lock(mutex_);
      compiled_.emplace(key, r.binary);
    }
    return std::move(r.binary);
  }
  disk_.store(key, r.binary);
  if (options_.keep_source) {
    // Beside the cubin, so `cuobjdump` output and source can be read together.
    // Temp + rename: a FIFO there fails instead of blocking, a failed write leaves no partial file.
    const std::string path = disk_.path_for(key) + ".cu";
    try {
      OutputFiles out;
      out.add(path, source);
      out.commit();
      log::at(log::info, "{}: source kept at {}", name, path);
    } catch (const std::exception& e) {  // a debugging aid, never worth failing the compile
      log::at(log::warning, "{}: source not kept: {}", name, e.what());
    }
  }
  return std::move(r.binary);
}

int resident_clusters(const LoadedKernel& k, int size, int sms) {
  LaunchConfig probe;
  probe.grid[0] = static_cast<unsigned>(std::max(1, sms / size) * size);
  probe.block[0] = static_cast<unsigned>(k.threads);
  probe.smem_bytes = static_cast<unsigned>(k.smem_bytes);
  probe.cluster[0] = static_cast<unsigned>(size);
  return max_active_clusters(k.functions[0], probe);
}

namespace {

// A kernel with a cluster of its own is launched as a persistent grid of resident clusters.
void probe_own_clusters(LoadedKernel& k) {
  k.max_active_clusters = resident_clusters(k, k.cluster, driver::device_info().sm_count);
  if (k.max_active_clusters < 1)
    throw Error(ErrorKind::unsupported,
                fmt::format("{}: no cluster of {} CTAs with {} bytes of shared memory each fits on this GPU; "
                            "pick a config with cluster_m = cluster_n = 1",
                            k.name, k.cluster, k.smem_bytes));
  log::at(log::info, "{}: {} clusters of {} CTAs can be resident", k.name, k.max_active_clusters, k.cluster);
}

}  // namespace

const LoadedKernel& KernelCache::get(const KernelSpec& spec, std::string_view what) {
  CUcontext ctx = driver::ensure_context();
  Key key{ctx, spec_name(spec)};
  std::promise<std::shared_ptr<LoadedKernel>> promise;
  std::shared_future<std::shared_ptr<LoadedKernel>> future;
  bool owner = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = loaded_.find(key);
    if (it == loaded_.end()) {
      future = promise.get_future().share();
      loaded_.emplace(key, future);
      owner = true;
    } else {
      future = it->second;
    }
  }
  if (!owner) {
    memory_hits_++;
    return *future.get();  // rethrows the owner's failure
  }
  memory_misses_++;
  try {
    // A first call may come while a CUDA graph is being captured (on this thread or another, in
    // any mode): the module load below must neither fail nor invalidate that capture.
    const driver::RelaxedCapture relaxed;
    auto k = std::make_shared<LoadedKernel>();
    k->spec = spec;
    k->name = key.second;
    const BuildTarget target = target_for_device(spec);
    k->module = std::make_shared<Module>(Module::load(cubin_of(spec, what, target)));
    // griddepcontrol.wait is compiled only from sm_90: a build for an older architecture (the
    // compute_89 PTX included) must not start before the kernel it follows has finished.
    k->pdl = target.arch.number >= 90;
    for (const std::string& entry : spec_entry_points(spec))
      k->functions.push_back(k->module->function(entry.c_str()));
    k->threads = spec_block_threads(spec);
    k->smem_bytes = spec_dynamic_smem(spec);
    for (CUfunction f : k->functions) set_max_dynamic_smem(f, k->smem_bytes);
    k->cluster = spec_cluster_size(spec);
    if (k->cluster > 1) probe_own_clusters(*k);
    for (const KernelLoadHook& hook : options_.load_hooks)
      if (hook.family == spec.family) hook.run(*k);
    promise.set_value(k);
  } catch (...) {
    promise.set_exception(std::current_exception());
    std::lock_guard<std::mutex> lock(mutex_);
    loaded_.erase(key);  // a later call may retry (e.g. after the disk cache was cleared)
    throw;
  }
  return *future.get();
}

CacheStats KernelCache::stats() const {
  const BinaryCacheStats d = disk_.stats();
  CacheStats s;
  s.memory_hits = memory_hits_;
  s.memory_misses = memory_misses_;
  s.disk_hits = d.hits;
  s.disk_misses = d.misses;
  s.disk_corrupt = d.corrupt;
  s.disk_writes = d.writes;
  s.compiles = compiles_;
  s.compile_seconds = static_cast<double>(compile_micros_.load()) * 1e-6;
  return s;
}

void KernelCache::reset_stats() {
  disk_.reset_stats();
  memory_hits_ = memory_misses_ = compiles_ = compile_micros_ = 0;
}

}  // namespace fp8jit
