#include "runtime/jit/build_target.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "common/file_io.hpp"
#include "fp8jit/error.hpp"
#include "generator/family.hpp"

namespace fp8jit {

std::string BuildTarget::name() const {
  const std::string sm = arch.name();
  return target == CompileTarget::cubin ? sm : "compute" + sm.substr(2);
}

std::optional<BuildTarget> parse_elementwise_arch(std::string_view text) {
  if (text.empty()) return std::nullopt;
  const std::vector<int> supported = nvrtc_supported_archs();
  std::vector<int> from89;
  std::copy_if(supported.begin(), supported.end(), std::back_inserter(from89),
               [](int n) { return n >= 89; });
  auto refuse = [&](std::string_view why) -> std::optional<BuildTarget> {
    throw Error(
        ErrorKind::invalid_argument,
        fmt::format("elementwise_arch (FP8JIT_ELEMENTWISE_ARCH) '{}': {}; expected empty (each "
                    "GPU's own build) "
                    "or compute_<number>, PTX for one of this NVRTC's architectures from 89: {}",
                    printable(text), why, fmt::join(from89, ", ")));
  };
  if (!text.starts_with("compute_")) return refuse("not compute_<number>");
  const std::string_view digits = text.substr(8);
  if (digits.empty() || digits.size() > 3 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos)
    return refuse("not compute_<number>");
  const int number = std::stoi(std::string(digits));
  if (std::find(from89.begin(), from89.end(), number) == from89.end())
    return refuse(number < 89 ? "FP8 conversions start at compute_89"
                              : "this NVRTC cannot compile for it");
  return BuildTarget{GpuArch{number, false}, CompileTarget::ptx};
}

BuildTarget build_target_for(const FamilyDef& family, int cc_major, int cc_minor,
                             const std::string& gpu, const std::optional<BuildTarget>& elementwise,
                             const std::vector<int>& nvrtc_archs) {
  const int cc = cc_major * 10 + cc_minor;
  auto refuse = [&](const std::string& why) -> BuildTarget {
    throw Error(ErrorKind::unsupported, fmt::format("GPU {} has compute capability {}.{}; {}", gpu,
                                                    cc_major, cc_minor, why));
  };
  if (family.sm90a_only) {
    if (cc == 90) return kHopperCubin;
    return refuse(fmt::format(
        "{} kernels need 9.0 (Hopper: H100, H200, H20, H800): they are built for sm_90a, "
        "whose wgmma, TMA and setmaxnreg no other architecture runs",
        family.name));
  }
  if (cc < family.min_arch)
    return refuse(
        fmt::format("{} kernels need {}.{} or later (FP8 conversions: Ada, Hopper, Blackwell)",
                    family.name, family.min_arch / 10, family.min_arch % 10));
  if (elementwise) {
    if (elementwise->arch.number > cc)
      return refuse(
          fmt::format("elementwise_arch {} is PTX for a newer architecture than this GPU runs; use "
                      "compute_{} or older, or leave it empty",
                      elementwise->name(), cc));
    return *elementwise;
  }
  // Hopper keeps sm_90a: the binaries (and cache keys) the runtime built before other GPUs.
  if (cc == 90) return kHopperCubin;
  if (std::find(nvrtc_archs.begin(), nvrtc_archs.end(), cc) != nvrtc_archs.end())
    return BuildTarget{GpuArch{cc, false}, CompileTarget::cubin};
  return BuildTarget{GpuArch{family.min_arch, false}, CompileTarget::ptx};
}

}  // namespace fp8jit
