#include "autotune/timer.hpp"

#include <algorithm>

#include "common/stats.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit {

DeviceBuffer::DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
  driver::ensure_context();
  driver::check(driver::api().cuMemAlloc(&ptr_, std::max<std::size_t>(bytes, 16)), "cuMemAlloc");
}
DeviceBuffer::~DeviceBuffer() {
  if (const auto* api = driver::try_api(); api && ptr_) api->cuMemFree(ptr_);
}
void DeviceBuffer::upload(const void* host, std::size_t bytes) {
  driver::check(driver::api().cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD");
}
void DeviceBuffer::download(void* host, std::size_t bytes) const {
  driver::check(driver::api().cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH");
}
void DeviceBuffer::fill(unsigned char byte) {
  driver::check(driver::api().cuMemsetD8Async(ptr_, byte, bytes_, nullptr), "cuMemsetD8Async");
  driver::check(driver::api().cuCtxSynchronize(), "cuCtxSynchronize");
}

std::vector<double> time_samples_ms(const std::function<void()>& fn, int warmup, int iters) {
  const auto& cu = driver::api();
  DeviceBuffer flush(256u << 20);
  CUevent start, stop;
  driver::check(cu.cuEventCreate(&start, CU_EVENT_DEFAULT), "cuEventCreate");
  driver::check(cu.cuEventCreate(&stop, CU_EVENT_DEFAULT), "cuEventCreate");
  for (int i = 0; i < warmup; ++i) fn();
  std::vector<float> ms;
  for (int i = 0; i < iters; ++i) {
    driver::check(cu.cuMemsetD8Async(reinterpret_cast<CUdeviceptr>(flush.get()), static_cast<unsigned char>(i), flush.size(), nullptr), "flush L2");
    driver::check(cu.cuEventRecord(start, nullptr), "cuEventRecord");
    fn();
    driver::check(cu.cuEventRecord(stop, nullptr), "cuEventRecord");
    driver::check(cu.cuEventSynchronize(stop), "cuEventSynchronize");
    float t = 0;
    driver::check(cu.cuEventElapsedTime(&t, start, stop), "cuEventElapsedTime");
    ms.push_back(t);
  }
  cu.cuEventDestroy(start);
  cu.cuEventDestroy(stop);
  return {ms.begin(), ms.end()};
}

double time_median_ms(const std::function<void()>& fn, int warmup, int iters) {
  return median(time_samples_ms(fn, warmup, iters));
}

double copy_median_ms(std::size_t bytes, int iters) {
  DeviceBuffer a(bytes), b(bytes);
  a.fill(1);
  return time_median_ms([&] {
    driver::check(driver::api().cuMemcpyDtoDAsync(reinterpret_cast<CUdeviceptr>(b.get()),
                                                   reinterpret_cast<CUdeviceptr>(a.get()), bytes, nullptr),
                  "cuMemcpyDtoDAsync");
  }, 3, iters);
}

}  // namespace fp8jit
