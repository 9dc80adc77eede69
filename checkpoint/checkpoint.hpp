// A Hugging Face checkpoint folder: `model.safetensors.index.json` naming the shard of every
// tensor, or a single `model.safetensors`; every shard's header read and checked, and the index
// checked against the shards, before anything is converted or written.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "checkpoint/safetensors.hpp"

namespace fp8jit::checkpoint {

inline constexpr const char* kIndexName = "model.safetensors.index.json";
inline constexpr const char* kSingleName = "model.safetensors";

struct Checkpoint {
  std::string dir;
  bool sharded = false;                 // an index names the shards
  std::string index_text;               // the index as read (its other fields are kept)
  std::vector<SafetensorsFile> shards;  // in the index's order of first mention
  // Every tensor: its shard (index into `shards`) and its entry there.
  std::map<std::string, std::pair<std::size_t, const TensorInfo*>> tensors;

  const TensorInfo* find(const std::string& name) const;
};

// Throws Error(invalid_argument) naming the folder, file and tensor for: no index and no single
// file, an index that is not JSON or has no weight_map object, a shard name that is not a plain
// file name in the folder, a missing shard, a tensor the index places in a shard that lacks it,
// a shard tensor the index does not place there, a tensor in two shards, and any invalid shard.
Checkpoint open_checkpoint(const std::string& dir);

}  // namespace fp8jit::checkpoint
