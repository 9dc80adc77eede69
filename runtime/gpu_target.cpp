#include <string>

#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"

namespace fp8jit {

GpuTarget gpu_target(std::string_view name) {
  // Multiprocessors of each part; every Hopper part has 227 KiB of opt-in shared memory a block.
  static const std::pair<std::string_view, int> kKnown[] = {{"h100-sxm", 132}, {"h100-pcie", 114}, {"h100-nvl", 132},
                                                             {"h200", 132},     {"h20", 78},        {"h800", 132},
                                                             {"h800-pcie", 114}};
  for (const auto& [known, sms] : kKnown)
    if (name == known) return {std::string(known), sms, GpuTarget{}.smem_bytes};
  const bool digits = !name.empty() && name.size() <= 4 && name.find_first_not_of("0123456789") == std::string_view::npos;
  const int sms = digits ? std::stoi(std::string(name)) : 0;
  if (sms < 1 || sms > 1024) {
    std::string known;
    for (const auto& k : kKnown) known += std::string(k.first) + ", ";
    throw_invalid("GPU target", std::string(name), known + "or a multiprocessor count in [1, 1024]");
  }
  return {std::string(name) + " SMs", sms, GpuTarget{}.smem_bytes};
}

}  // namespace fp8jit
