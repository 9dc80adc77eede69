#include "checkpoint/checkpoint.hpp"

#include <fmt/format.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "common/file_io.hpp"
#include "fp8jit/error.hpp"

namespace fp8jit::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

[[noreturn]] void bad(const std::string& where, const std::string& what) {
  throw Error(ErrorKind::invalid_argument, fmt::format("{}: {}", printable(where), what));
}

// A shard must be a file of the folder itself: an index naming "../x" or "/etc/x" would make the
// cast read (and name in its output) files outside the checkpoint.
void check_shard_name(const std::string& index_path, const std::string& name) {
  if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
      name.find('\0') != std::string::npos)
    bad(index_path, fmt::format("shard name \"{}\" is not a file name in the checkpoint's folder",
                                printable(name)));
}

}  // namespace

const TensorInfo* Checkpoint::find(const std::string& name) const {
  const auto it = tensors.find(name);
  return it == tensors.end() ? nullptr : it->second.second;
}

Checkpoint open_checkpoint(const std::string& dir) {
  Checkpoint c;
  c.dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) bad(dir, "not a directory");
  const std::string index_path = (fs::path(dir) / kIndexName).string();
  std::vector<std::string> names;
  std::map<std::string, std::string> placed;  // tensor -> shard, from the index
  if (fs::exists(index_path, ec)) {
    c.sharded = true;
    c.index_text = read_regular_file(index_path, "checkpoint index");
    json index;
    try {
      index = json::parse(c.index_text);
    } catch (const json::exception& e) {
      bad(index_path, fmt::format("not valid JSON ({})", e.what()));
    }
    if (!index.is_object() || !index.contains("weight_map") || !index["weight_map"].is_object())
      bad(index_path, "no \"weight_map\" object (tensor name -> shard file)");
    for (const auto& [tensor, shard] : index["weight_map"].items()) {
      if (!shard.is_string())
        bad(index_path, fmt::format("weight_map[\"{}\"] is not a file name", printable(tensor)));
      const std::string name = shard.get<std::string>();
      check_shard_name(index_path, name);
      if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
      placed[tensor] = name;
    }
  } else if (fs::exists(fs::path(dir) / kSingleName, ec)) {
    names.push_back(kSingleName);
  } else {
    bad(dir, fmt::format("no {} or {}: not a Hugging Face safetensors checkpoint", kIndexName,
                         kSingleName));
  }
  c.shards.reserve(names.size());  // `tensors` points into the shards: no reallocation after
  for (const std::string& name : names) {
    const std::string path = (fs::path(dir) / name).string();
    if (!fs::exists(path, ec))
      bad(index_path, fmt::format("names shard {}, which does not exist", printable(name)));
    c.shards.push_back(read_safetensors(path));
  }
  for (std::size_t i = 0; i < c.shards.size(); ++i) {
    for (const TensorInfo& t : c.shards[i].tensors) {
      if (c.sharded) {
        const auto it = placed.find(t.name);
        if (it == placed.end() || it->second != names[i])
          bad(c.shards[i].path, fmt::format("tensor \"{}\" is not placed in this shard by {}",
                                            printable(t.name), kIndexName));
      }
      if (!c.tensors.emplace(t.name, std::pair{i, &t}).second)
        bad(c.shards[i].path,
            fmt::format("tensor \"{}\" is also in another shard", printable(t.name)));
    }
  }
  for (const auto& [tensor, shard] : placed)
    if (!c.tensors.count(tensor))
      bad(index_path, fmt::format("places tensor \"{}\" in {}, which does not hold it",
                                  printable(tensor), printable(shard)));
  return c;
}

}  // namespace fp8jit::checkpoint
