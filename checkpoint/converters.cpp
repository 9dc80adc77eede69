#include "checkpoint/converters.hpp"

#include <fmt/format.h>

#include <chrono>

#include "autotune/timer.hpp"
#include "fp8jit/reference.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/jit/build_target.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit::checkpoint {
namespace {

std::int64_t block_scales(std::int64_t n, std::int64_t k) {
  return ((n + 127) / 128) * ((k + 127) / 128);
}

// Adds the seconds of the scope to `total`.
class Stopwatch {
 public:
  explicit Stopwatch(double& total) : total_(total), start_(std::chrono::steady_clock::now()) {}
  ~Stopwatch() {
    total_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

 private:
  double& total_;
  std::chrono::steady_clock::time_point start_;
};

class HostConverter final : public Converter {
 public:
  void dequantize(const std::uint8_t* q, Fp8Format format, std::int64_t n, std::int64_t k,
                  const float* scales, std::uint16_t* y) override {
    Stopwatch w(seconds);
    reference::dequantize(args(q, format, n, k, scales, y));
  }
  void quantize(const void* x, DType input, std::int64_t n, std::int64_t k, Fp8Format format,
                bool pow2, std::uint8_t* q, float* scales) override {
    Stopwatch w(seconds);
    reference::quantize(args(x, input, n, k, format, pow2, q, scales));
  }
  std::string name() const override {
    return "host reference (no GPU: the kernels' bytes, slowly)";
  }

  static DequantizeArgs args(const void* q, Fp8Format format, std::int64_t n, std::int64_t k,
                             const float* scales, void* y) {
    DequantizeArgs a;
    a.q = q;
    a.format = format;
    a.m = n;
    a.k = k;
    a.scales = scales;
    a.granularity = Granularity::block128;
    a.y = y;
    a.output = DType::bf16;
    return a;
  }
  static QuantizeArgs args(const void* x, DType input, std::int64_t n, std::int64_t k,
                           Fp8Format format, bool pow2, void* q, float* scales) {
    QuantizeArgs a;
    a.x = x;
    a.input = input;
    a.m = n;
    a.k = k;
    a.q = q;
    a.format = format;
    a.scales = scales;
    a.granularity = Granularity::block128;
    a.pow2_scale = pow2;
    return a;
  }
};

class GpuConverter final : public Converter {
 public:
  explicit GpuConverter(Runtime& runtime) : rt_(runtime) {
    const driver::DeviceInfo d = driver::device_info();
    // A cast quantizes and dequantizes only: any GPU from sm_89 on (Ada, Hopper, Blackwell);
    // build_target_for refuses older ones by name, before anything is read or written.
    for (const FamilyDef* f : {&quantize_family(), &dequantize_family()})
      (void)build_target_for(*f, d.cc_major, d.cc_minor, fmt::format("{} ({})", d.ordinal, d.name),
                             std::nullopt, nvrtc_supported_archs());
    name_ = fmt::format("GPU ({})", d.name);
  }
  void dequantize(const std::uint8_t* q, Fp8Format format, std::int64_t n, std::int64_t k,
                  const float* scales, std::uint16_t* y) override {
    Stopwatch w(seconds);
    const std::size_t elems = static_cast<std::size_t>(n * k),
                      ns = static_cast<std::size_t>(block_scales(n, k));
    DeviceBuffer& dq = grown(a_, elems);
    DeviceBuffer& ds = grown(s_, ns * 4);
    DeviceBuffer& dy = grown(b_, elems * 2);
    dq.upload(q, elems);
    ds.upload(scales, ns * 4);
    rt_.dequantize(HostConverter::args(dq.get(), format, n, k, ds.f32(), dy.get()), nullptr);
    dy.download(y, elems * 2);  // synchronous: waits for the kernel on the legacy stream
  }
  void quantize(const void* x, DType input, std::int64_t n, std::int64_t k, Fp8Format format,
                bool pow2, std::uint8_t* q, float* scales) override {
    Stopwatch w(seconds);
    const std::size_t elems = static_cast<std::size_t>(n * k),
                      ns = static_cast<std::size_t>(block_scales(n, k));
    DeviceBuffer& dx = grown(a_, elems * dtype_size(input));
    DeviceBuffer& ds = grown(s_, ns * 4);
    DeviceBuffer& dq = grown(b_, elems);
    dx.upload(x, elems * dtype_size(input));
    rt_.quantize(HostConverter::args(dx.get(), input, n, k, format, pow2, dq.get(), ds.f32()),
                 nullptr);
    dq.download(q, elems);
    ds.download(scales, ns * 4);
  }
  std::string name() const override { return name_; }

 private:
  // The buffer, reallocated only when a larger tensor comes (freed first: the old contents are
  // not needed, and two of the largest tensors may not fit at once).
  static DeviceBuffer& grown(std::unique_ptr<DeviceBuffer>& b, std::size_t bytes) {
    if (!b || b->size() < bytes) {
      b.reset();
      b = std::make_unique<DeviceBuffer>(bytes);
    }
    return *b;
  }
  Runtime& rt_;
  std::string name_;
  std::unique_ptr<DeviceBuffer> a_, b_, s_;
};

}  // namespace

std::unique_ptr<Converter> host_converter() {
  return std::make_unique<HostConverter>();
}
std::unique_ptr<Converter> gpu_converter(Runtime& runtime) {
  return std::make_unique<GpuConverter>(runtime);
}

}  // namespace fp8jit::checkpoint
