// GpuKey: which GPU a tuning result was measured on.
//
// Tuned configs are only trusted on the same kind of device: the name alone is not enough (an
// H100 PCIe and an H100 SXM differ in SM count and clocks), so the compute capability and the
// SM count are part of the key.
#pragma once

#include <string>
#include <string_view>

namespace fp8jit {

struct GpuKey {
  std::string name;  // the driver's device name, e.g. "NVIDIA H200"
  int cc_major = 0, cc_minor = 0;
  int sm_count = 0;

  // "NVIDIA H200|9.0|132": the form stored in the tuning database.
  std::string str() const;
  // Inverse of str(). Parses from the right, so a name containing '|' still round-trips.
  // Throws fp8jit::Error (invalid_argument) naming the text (escaped) and the expected form, and
  // for control bytes anywhere in it: `fp8jit db list` shows keys as they are.
  static GpuKey from_string(std::string_view text);

  bool operator==(const GpuKey&) const = default;
};

// The key of the calling thread's current device (driver::device_info()). Needs a GPU: throws
// fp8jit::Error (driver) where none is usable.
GpuKey current_gpu_key();

// Which card of which host the calling thread's current device is, for the tuning rows it
// measures: "HOST device ORDINAL (PCI BUS_ID, UUID)", e.g. "node7 device 1 (PCI 0000:1a:00.0,
// GPU-6f1e2a3b-...)". The ordinal alone would not do: CUDA_VISIBLE_DEVICES renumbers the cards.
// Needs a GPU, as current_gpu_key().
std::string current_gpu_identity();

}  // namespace fp8jit
