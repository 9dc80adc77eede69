// `fp8jit cast`: a Hugging Face safetensors checkpoint between block-scaled FP8 and BF16.
#include <fmt/format.h>

#include <memory>

#include "checkpoint/cast.hpp"
#include "common/file_io.hpp"
#include "fp8jit/error.hpp"
#include "fp8jit/runtime.hpp"
#include "generator/family.hpp"
#include "runtime/jit/driver.hpp"
#include "tools/cli.hpp"
#include "tools/progress.hpp"

namespace fp8jit::cli {
namespace {

struct CastArgs {
  std::string to, in, out, format = "e4m3", scale_fmt = "fp32", device = "auto";
  std::vector<std::string> skip;
};

std::unique_ptr<checkpoint::Converter> converter_for(const std::string& device) {
  if (device == "cpu") return checkpoint::host_converter();
  if (device == "gpu") require_gpu();
  // auto: the GPU where its kernels run (sm_89 on), else the host; gpu: the GPU or a clear error.
  if (driver::available()) {
    const driver::DeviceInfo d = driver::device_info();
    const int cc = d.cc_major * 10 + d.cc_minor;
    if (device == "gpu" || arch_refusal(quantize_family(), cc, cc == 90).empty())
      return checkpoint::gpu_converter(default_runtime());
  }
  return checkpoint::host_converter();
}

int cast(const CastArgs& a) {
  checkpoint::CastOptions o;
  o.to = a.to == "bf16" ? checkpoint::CastTarget::bf16 : checkpoint::CastTarget::fp8;
  o.format = a.format == "e5m2" ? Fp8Format::e5m2 : Fp8Format::e4m3;
  o.ue8m0 = a.scale_fmt == "ue8m0";
  o.skip = a.skip;
  if (o.to == checkpoint::CastTarget::bf16 &&
      (a.format != "e4m3" || a.scale_fmt != "fp32" || !a.skip.empty()))
    throw_invalid("--format/--scale-fmt/--skip", "given",
                  "they choose how --to fp8 quantizes; --to bf16 takes none");
  std::unique_ptr<checkpoint::Converter> conv = converter_for(a.device);
  constexpr std::uint64_t kMiB = 1 << 20;
  std::unique_ptr<Progress> bar;
  std::uint64_t shown = 0;  // MiB the bar counts
  const checkpoint::CastReport r =
      checkpoint::cast_checkpoint(a.in, a.out, o, *conv, [&](const checkpoint::CastProgress& p) {
        if (!bar) {  // the input is checked by now: the cast starts
          fmt::print(stderr, "fp8jit cast: converting with the {}\n", conv->name());
          bar = std::make_unique<Progress>(fmt::format("casting {} shards (MiB)", p.shards),
                                           (p.bytes_total + kMiB - 1) / kMiB);
        }
        const std::uint64_t done = p.bytes_done / kMiB;
        bar->advance(0, fmt::format("shard {}/{}, {}/{} tensors, {}", p.shard, p.shards,
                                    p.tensors_done, p.tensors_total, printable(p.tensor, 60)));
        if (done > shown) bar->advance(done - shown), shown = done;
      });
  if (bar) {
    bar->advance((r.bytes_read + kMiB - 1) / kMiB > shown ? (r.bytes_read + kMiB - 1) / kMiB - shown
                                                          : 0);
    bar->finish();
  }
  fmt::print(
      "{}: {} shards written, {} kept from an earlier run; {} tensors converted, {} copied, {} "
      "scales "
      "dropped; {:.2f} GB read, {:.2f} GB written in {:.1f} s ({:.1f} s converting, the rest disk "
      "I/O)\n",
      printable(a.out), r.shards_written, r.shards_kept, r.converted, r.copied, r.dropped,
      r.bytes_read / 1e9, r.bytes_written / 1e9, r.seconds, r.convert_seconds);
  return 0;
}

}  // namespace

void add_cast_command(CLI::App& app) {
  auto* sub = app.add_subcommand("cast",
                                 "a safetensors checkpoint between block-scaled FP8 (DeepSeek-V3 / "
                                 "Qwen3-FP8 layout) and BF16");
  auto a = std::make_shared<CastArgs>();
  sub->add_option("--to", a->to,
                  "bf16: dequantize every FP8 weight with its _scale_inv; fp8: quantize 2-D "
                  "linear weights into FP8 + _scale_inv (128x128 blocks)")
      ->required()
      ->check(CLI::IsMember({"bf16", "fp8"}));
  sub->add_option("IN_DIR", a->in,
                  "the checkpoint: model.safetensors.index.json + shards, or model.safetensors")
      ->required();
  sub->add_option("OUT_DIR", a->out, "where the cast checkpoint goes (created; not IN_DIR)")
      ->required();
  sub->add_option("--format", a->format, "--to fp8: the FP8 format")
      ->check(CLI::IsMember({"e4m3", "e5m2"}));
  sub->add_option("--scale-fmt", a->scale_fmt,
                  "--to fp8: fp32 scales, or ue8m0 (powers of two, DeepSeek-V3.1)")
      ->check(CLI::IsMember({"fp32", "ue8m0"}));
  sub->add_option("--skip", a->skip,
                  "--to fp8: glob patterns of tensor names to keep as they are (besides norms, "
                  "embeddings, lm_head, MoE routers); repeat it or separate with commas")
      ->allow_extra_args(false)
      ->delimiter(',');
  sub->add_option(
         "--device", a->device,
         "auto: the GPU when there is one that runs FP8 conversions (sm_89 on: Ada, Hopper, "
         "Blackwell), else the host reference (slow); gpu; cpu")
      ->check(CLI::IsMember({"auto", "gpu", "cpu"}));
  on_run(sub, [a] { return cast(*a); });
}

}  // namespace fp8jit::cli
