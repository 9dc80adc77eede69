// `fp8jit cast`: a Hugging Face safetensors checkpoint between block-scaled FP8 (E4M3 weights with
// `<name>_scale_inv` fp32 [ceil(N/128), ceil(K/128)], as DeepSeek-V3 and Qwen3-FP8 ship them) and
// BF16, shard by shard, two input tensors in memory at a time (the next one read ahead). Each
// output shard goes to a temporary name and is renamed when complete, the index and config.json
// last, so an interrupted cast leaves no file that looks finished; a rerun keeps the shards
// already complete.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "checkpoint/converters.hpp"
#include "fp8jit/types.hpp"

namespace fp8jit::checkpoint {

enum class CastTarget { bf16, fp8 };

struct CastOptions {
  CastTarget to = CastTarget::bf16;
  Fp8Format format = Fp8Format::e4m3;  // --to fp8
  bool ue8m0 = false;                  // --to fp8: scales rounded up to powers of two
  // --to fp8: glob patterns (fnmatch) of tensor names to keep as they are, beside the defaults:
  // every tensor not named "*.weight", not 2-D or not bf16/fp16/fp32, and names holding "norm",
  // "embed", "lm_head" or ending ".gate.weight" (MoE routers).
  std::vector<std::string> skip;
};

struct CastProgress {
  std::uint64_t bytes_done = 0, bytes_total = 0;  // of input tensor data
  std::size_t tensors_done = 0, tensors_total = 0;
  std::size_t shard = 0, shards = 0;  // the shard being written (1-based)
  std::string tensor;                 // the tensor just converted or copied
};

struct CastReport {
  std::size_t shards_written = 0, shards_kept = 0;  // kept: complete from an earlier run
  std::size_t converted = 0, copied = 0, dropped = 0;
  std::uint64_t bytes_read = 0, bytes_written = 0;
  double seconds = 0, convert_seconds = 0;  // the rest is disk I/O and bookkeeping
  std::string converter;
};

// Reads and checks the whole input (every header, the index, the pairing of weights and scales)
// before writing anything. Throws Error(invalid_argument) naming the file and tensor of bad
// input, or when `out_dir` is `in_dir`; Error(io) when a file cannot be read or written.
CastReport cast_checkpoint(const std::string& in_dir, const std::string& out_dir,
                           const CastOptions& options, Converter& converter,
                           const std::function<void(const CastProgress&)>& progress = {});

}  // namespace fp8jit::checkpoint
