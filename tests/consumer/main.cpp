// Uses the installed headers and library: render a quantize kernel and convert a value to FP8.
#include <cstdio>
#include <fp8jit/fp8.hpp>
#include <fp8jit/fp8jit.hpp>

int main() {
  auto spec = fp8jit::default_quantize_spec(fp8jit::QuantizeProblem{});
  std::string src = fp8jit::render_source(spec);
  unsigned code = fp8jit::fp8::from_float(1.0f, fp8jit::Fp8Format::e4m3);
  std::printf("%s %zu bytes of CUDA, 1.0 -> 0x%02x\n", fp8jit::spec_name(spec).c_str(), src.size(), code);
  return (code == 0x38 && !src.empty()) ? 0 : 1;
}
