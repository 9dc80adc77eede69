// Which binary a kernel family is built as for the GPU that runs it: Hopper's GEMMs only as
// sm_90a cubins; the elementwise families (quantize, dequantize: FP8 conversions only) for any
// GPU from sm_89 on, as a cubin for its own architecture, or as PTX that the driver compiles for
// it where this NVRTC does not know the GPU (or where the runtime is asked for PTX).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/jit/nvrtc.hpp"

namespace fp8jit {

struct FamilyDef;

struct BuildTarget {
  GpuArch arch = kSm90a;
  CompileTarget target = CompileTarget::cubin;  // ptx: compiled by the driver when loaded
  std::string name() const;                     // "sm_90a", "sm_89", "compute_89"
  bool operator==(const BuildTarget&) const = default;
};
// What the runtime has always built, and builds on Hopper: an sm_90a cubin.
inline constexpr BuildTarget kHopperCubin{};

// RuntimeOptions::elementwise_arch: "" (nullopt: each GPU's own build) or "compute_<number>"
// (PTX for that architecture, from 89, among this NVRTC's: one binary for every GPU from it on).
// Throws Error(invalid_argument) naming the option and the accepted values.
std::optional<BuildTarget> parse_elementwise_arch(std::string_view text);

// The build of `family`'s kernels on a GPU of compute capability cc_major.cc_minor (`gpu` names
// it in errors), given the elementwise override and the architectures this NVRTC supports:
//  - sm90a_only families (GEMMs): the sm_90a cubin on a 9.0 GPU, else Error(unsupported);
//  - others, from the family's min_arch: the override where set (its PTX must not be newer than
//    the GPU); on 9.0 the sm_90a cubin; a cubin for the GPU's own sm_<cc> where NVRTC supports
//    it; else PTX for compute_<min_arch>, which the driver compiles for the newer GPU.
// A GPU older than min_arch: Error(unsupported) naming what the family needs.
BuildTarget build_target_for(const FamilyDef& family, int cc_major, int cc_minor,
                             const std::string& gpu, const std::optional<BuildTarget>& elementwise,
                             const std::vector<int>& nvrtc_archs);

}  // namespace fp8jit
