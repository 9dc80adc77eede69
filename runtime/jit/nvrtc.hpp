// NVRTC: generated source -> cubin for sm_90a (or PTX for compute_90a).
#pragma once

#include <string>
#include <vector>

namespace fp8jit {

enum class CompileTarget { cubin, ptx };

struct CompileResult {
  std::string binary;  // cubin bytes or PTX text
  std::string log;     // NVRTC's log (warnings), may be empty
  double seconds = 0;
};

// The options every fp8jit compile uses for `target` (part of the binary cache key).
std::vector<std::string> nvrtc_options(CompileTarget target);
// "13.0"
std::string nvrtc_version();

// Throws fp8jit::Error(compile) carrying the kernel name, the options and NVRTC's log.
CompileResult nvrtc_compile(const std::string& kernel_name, const std::string& source,
                            CompileTarget target);

}  // namespace fp8jit
