#include "runtime/jit/nvrtc.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <algorithm>
#include <chrono>

#include "common/file_io.hpp"
#include "fp8jit/error.hpp"
#include "runtime/jit/headers.hpp"

namespace fp8jit {
namespace {

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS)
    throw Error(ErrorKind::compile, fmt::format("{} failed: {}", what, nvrtcGetErrorString(r)));
}

std::string program_log(nvrtcProgram prog) {
  size_t size = 0;
  if (nvrtcGetProgramLogSize(prog, &size) != NVRTC_SUCCESS || size <= 1) return {};
  std::string log(size, '\0');
  nvrtcGetProgramLog(prog, log.data());
  log.resize(size - 1);
  return log;
}

// Owns an nvrtcProgram so that every exit path destroys it.
struct Program {
  nvrtcProgram handle = nullptr;
  ~Program() {
    if (handle) nvrtcDestroyProgram(&handle);
  }
};

}  // namespace

std::string GpuArch::name() const {
  return fmt::format("sm_{}{}", number, arch_specific ? "a" : "");
}

std::vector<int> nvrtc_supported_archs() {
  int count = 0;
  check(nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs");
  std::vector<int> archs(static_cast<std::size_t>(count));
  if (count > 0) check(nvrtcGetSupportedArchs(archs.data()), "nvrtcGetSupportedArchs");
  return archs;
}

GpuArch parse_gpu_arch(std::string_view text) {
  auto refuse = [&](std::string_view why) -> GpuArch {
    throw Error(
        ErrorKind::invalid_argument,
        fmt::format("arch '{}': {}; expected sm_<number> or sm_<number>a, one of this NVRTC's {} "
                    "(e.g. sm_89, sm_90a, sm_120)",
                    printable(text), why, fmt::join(nvrtc_supported_archs(), ", ")));
  };
  if (!text.starts_with("sm_")) return refuse("not sm_<number>");
  std::string_view digits = text.substr(3);
  GpuArch arch;
  arch.arch_specific = digits.ends_with('a');
  if (arch.arch_specific) digits.remove_suffix(1);
  if (digits.empty() || digits.size() > 3 ||
      digits.find_first_not_of("0123456789") != std::string_view::npos)
    return refuse("not sm_<number>");
  arch.number = std::stoi(std::string(digits));
  const std::vector<int> supported = nvrtc_supported_archs();
  if (std::find(supported.begin(), supported.end(), arch.number) == supported.end())
    return refuse("this NVRTC cannot compile for it");
  if (arch.arch_specific && arch.number < 90)
    return refuse("arch-specific (a) targets start at sm_90a");
  return arch;
}

std::vector<std::string> nvrtc_options(CompileTarget target, const GpuArch& arch) {
  // NOTE: no include paths: every header comes from the embedded set, so the output does not
  // depend on where the library or the toolkit is installed. -prec-div/-fmad keep the IEEE
  // arithmetic the host reference reproduces (the kernels also use explicit .rn PTX).
  // --minimal leaves out the declarations of textures, device-side launches and the runtime API
  // types, which no template uses: the same machine code for less front end (every NVRTC since
  // 12.4 takes it, and the build needs 12.8 or later).
  const std::string sm = arch.name();  // a cubin for sm_90a, PTX for compute_90a
  return {"--gpu-architecture=" + (target == CompileTarget::cubin ? sm : "compute" + sm.substr(2)),
          "-std=c++17",
          "--prec-div=true",
          "--fmad=false",
          "-default-device",
          "--minimal",
          "-DNDEBUG"};
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

CompileResult nvrtc_compile(const std::string& kernel_name, const std::string& source,
                            CompileTarget target, const GpuArch& arch) {
  const auto t0 = std::chrono::steady_clock::now();
  const HeaderSet& headers = embedded_headers();
  Program prog;
  check(nvrtcCreateProgram(&prog.handle, source.c_str(), (kernel_name + ".cu").c_str(),
                           static_cast<int>(headers.names.size()), headers.contents.data(),
                           headers.names.data()),
        "nvrtcCreateProgram");
  const std::vector<std::string> options = nvrtc_options(target, arch);
  std::vector<const char*> argv;
  for (const auto& o : options) argv.push_back(o.c_str());
  const nvrtcResult r = nvrtcCompileProgram(prog.handle, static_cast<int>(argv.size()), argv.data());
  CompileResult out;
  out.log = program_log(prog.handle);
  if (r != NVRTC_SUCCESS) {
    throw Error(ErrorKind::compile,
                fmt::format("NVRTC could not compile kernel {} ({}).\noptions: {}\nlog:\n{}",
                            kernel_name, nvrtcGetErrorString(r), fmt::join(options, " "), out.log));
  }
  size_t size = 0;
  if (target == CompileTarget::cubin) {
    check(nvrtcGetCUBINSize(prog.handle, &size), "nvrtcGetCUBINSize");
    out.binary.resize(size);
    check(nvrtcGetCUBIN(prog.handle, out.binary.data()), "nvrtcGetCUBIN");
  } else {
    check(nvrtcGetPTXSize(prog.handle, &size), "nvrtcGetPTXSize");
    out.binary.resize(size);
    check(nvrtcGetPTX(prog.handle, out.binary.data()), "nvrtcGetPTX");
    if (!out.binary.empty() && out.binary.back() == '\0') out.binary.pop_back();
  }
  out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return out;
}

}  // namespace fp8jit
