// NVRTC: generated source -> cubin for sm_90a (or PTX for compute_90a), or, for the elementwise
// families, for another architecture (GpuArch).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace fp8jit {

enum class CompileTarget { cubin, ptx };

struct CompileResult {
  std::string binary;  // cubin bytes or PTX text
  std::string log;     // NVRTC's log (warnings), may be empty
  double seconds = 0;
};

// The architecture a compile is for: sm_90a (the runtime's: wgmma, TMA and setmaxnreg are
// arch-specific) unless asked otherwise; a cubin for `sm_<number>[a]`, PTX for
// `compute_<number>[a]`.
struct GpuArch {
  int number = 90;            // 89: sm_89, 90: sm_90, 100: sm_100, ...
  bool arch_specific = true;  // the "a" suffix
  std::string name() const;   // "sm_90a"
  bool operator==(const GpuArch&) const = default;
};
inline constexpr GpuArch kSm90a{};
// "sm_89", "sm_90a", "sm_120": throws fp8jit::Error(invalid_argument) naming the architectures
// this NVRTC supports where the text is not one of them.
GpuArch parse_gpu_arch(std::string_view text);
// The architectures this NVRTC compiles for (nvrtcGetSupportedArchs), e.g. {75, 80, ..., 120}.
std::vector<int> nvrtc_supported_archs();

// The options every fp8jit compile uses for `target` (part of the binary cache key).
std::vector<std::string> nvrtc_options(CompileTarget target, const GpuArch& arch = kSm90a);
// "13.0"
std::string nvrtc_version();

// Throws fp8jit::Error(compile) carrying the kernel name, the options and NVRTC's log.
CompileResult nvrtc_compile(const std::string& kernel_name, const std::string& source,
                            CompileTarget target, const GpuArch& arch = kSm90a);

}  // namespace fp8jit
