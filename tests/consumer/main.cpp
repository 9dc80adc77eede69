// Uses the installed headers and library: render a quantize kernel, convert a value to FP8, catch
// the library's exception type (its typeinfo must cross a shared library's boundary) and check
// that headers and library have the same version.
#include <fp8jit/fp8jit.h>

#include <cstdio>
#include <cstring>
#include <fp8jit/fp8.hpp>
#include <fp8jit/fp8jit.hpp>

int main() {
  auto spec = fp8jit::default_quantize_spec(fp8jit::QuantizeProblem{});
  std::string src = fp8jit::render_source(spec);
  unsigned code = fp8jit::fp8::from_float(1.0f, fp8jit::Fp8Format::e4m3);
  bool caught = false;
  try {
    fp8jit::spec_from_json("{");
  } catch (const fp8jit::Error& e) {
    caught = e.kind() == fp8jit::ErrorKind::invalid_argument;
  }
  bool same_version = std::strcmp(fp8jit_version(), FP8JIT_VERSION_STRING) == 0;
  std::printf("%s %zu bytes of CUDA, 1.0 -> 0x%02x, fp8jit %s (headers %s)\n",
              fp8jit::spec_name(spec).c_str(), src.size(), code, fp8jit_version(),
              FP8JIT_VERSION_STRING);
  return (code == 0x38 && !src.empty() && caught && same_version) ? 0 : 1;
}
