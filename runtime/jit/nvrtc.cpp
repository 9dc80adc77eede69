#include "runtime/jit/nvrtc.hpp"

#include <fmt/format.h>
#include <nvrtc.h>

#include <chrono>

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

std::vector<std::string> nvrtc_options(CompileTarget target) {
  // NOTE: no include paths: every header comes from the embedded set, so the output does not
  // depend on where the library or the toolkit is installed. -prec-div/-fmad keep the IEEE
  // arithmetic the host reference reproduces (the kernels also use explicit .rn PTX).
  return {target == CompileTarget::cubin ? "--gpu-architecture=sm_90a" : "--gpu-architecture=compute_90a",
          "-std=c++17", "--prec-div=true", "--fmad=false", "-default-device", "-DNDEBUG"};
}

std::string nvrtc_version() {
  int major = 0, minor = 0;
  nvrtcVersion(&major, &minor);
  return fmt::format("{}.{}", major, minor);
}

CompileResult nvrtc_compile(const std::string& kernel_name, const std::string& source,
                            CompileTarget target) {
  const auto t0 = std::chrono::steady_clock::now();
  const HeaderSet& headers = embedded_headers();
  Program prog;
  check(nvrtcCreateProgram(&prog.handle, source.c_str(), (kernel_name + ".cu").c_str(),
                           static_cast<int>(headers.names.size()), headers.contents.data(),
                           headers.names.data()),
        "nvrtcCreateProgram");
  const std::vector<std::string> options = nvrtc_options(target);
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
