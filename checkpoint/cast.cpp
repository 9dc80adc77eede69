#include "checkpoint/cast.hpp"

#include <fmt/format.h>
#include <fnmatch.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <future>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string_view>

#include "checkpoint/checkpoint.hpp"
#include "common/file_io.hpp"
#include "fp8jit/error.hpp"

namespace fp8jit::checkpoint {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kScaleSuffix = "_scale_inv";
// Written first into the output folder: what the shards there were cast with, so a rerun with
// other options (or another input) rewrites them instead of keeping them as complete.
constexpr const char* kStampName = ".fp8jit-cast.json";

std::optional<Fp8Format> fp8_of(StDtype d) {
  if (d == StDtype::F8_E4M3) return Fp8Format::e4m3;
  if (d == StDtype::F8_E5M2) return Fp8Format::e5m2;
  return std::nullopt;
}
std::optional<DType> float_of(StDtype d) {
  if (d == StDtype::BF16) return DType::bf16;
  if (d == StDtype::F16) return DType::fp16;
  if (d == StDtype::F32) return DType::fp32;
  return std::nullopt;
}
std::vector<std::int64_t> block_shape(const std::vector<std::int64_t>& s) {
  return {(s[0] + 127) / 128, (s[1] + 127) / 128};
}
bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

enum class Step { copy, dequantize, quantize };

// One input tensor's part in an output shard.
struct Item {
  Step step = Step::copy;
  const TensorInfo* in = nullptr;
  const TensorInfo* scale = nullptr;            // dequantize: the input's scale
  const SafetensorsFile* scale_file = nullptr;  // and its shard (any of the checkpoint's)
};

struct ShardPlan {
  std::string name;
  const SafetensorsFile* in = nullptr;
  std::map<std::string, Item> items;  // by output tensor name (quantize: weight and scale both)
  std::vector<TensorDecl> decls;
};

[[noreturn]] void bad_tensor(const SafetensorsFile& f, const std::string& name,
                             const std::string& what) {
  throw Error(ErrorKind::invalid_argument,
              fmt::format("{}: tensor \"{}\": {}", printable(f.path), printable(name), what));
}

bool default_keep(const std::string& name) {
  return name.find("norm") != std::string::npos || name.find("embed") != std::string::npos ||
         name.find("lm_head") != std::string::npos || ends_with(name, ".gate.weight");
}

bool quantizable(const TensorInfo& t, const Checkpoint& c, const CastOptions& o) {
  if (!ends_with(t.name, ".weight") || t.shape.size() != 2 || !float_of(t.dtype) ||
      default_keep(t.name))
    return false;
  if (c.find(t.name + kScaleSuffix)) return false;  // already has block scales
  for (const std::string& p : o.skip)
    if (::fnmatch(p.c_str(), t.name.c_str(), 0) == 0) return false;
  return true;
}

// The scale of an FP8 weight, checked: fp32 [ceil(N/128), ceil(K/128)] of a 2-D weight.
const TensorInfo* scale_of(const Checkpoint& c, const SafetensorsFile& f, const TensorInfo& t) {
  const TensorInfo* s = c.find(t.name + kScaleSuffix);
  if (!s)
    bad_tensor(
        f, t.name,
        fmt::format(
            "{} weight without {}{}: it cannot be dequantized (fp8_cast_bf16.py would keep it in "
            "FP8 inside a BF16 checkpoint; fp8jit refuses)",
            to_string(t.dtype), t.name, kScaleSuffix));
  if (t.shape.size() != 2)
    bad_tensor(
        f, t.name,
        fmt::format("{}-D FP8 weight: 128x128 block scales need a 2-D weight", t.shape.size()));
  if (s->dtype != StDtype::F32 || s->shape != block_shape(t.shape))
    bad_tensor(f, s->name,
               fmt::format("{} {}, expected F32 {} for weight {} {}", to_string(s->dtype),
                           json(s->shape).dump(), json(block_shape(t.shape)).dump(),
                           printable(t.name), json(t.shape).dump()));
  return s;
}

std::vector<ShardPlan> plan(const Checkpoint& c, const CastOptions& o) {
  std::vector<ShardPlan> shards;
  for (const SafetensorsFile& f : c.shards) {
    ShardPlan p;
    p.name = fs::path(f.path).filename().string();
    p.in = &f;
    for (const TensorInfo& t : f.tensors) {
      if (o.to == CastTarget::bf16) {
        const bool is_scale = ends_with(t.name, kScaleSuffix);
        const TensorInfo* weight =
            is_scale ? c.find(t.name.substr(0, t.name.size() - std::strlen(kScaleSuffix)))
                     : nullptr;
        if (weight && fp8_of(weight->dtype)) continue;  // dropped: its weight is dequantized
        if (fp8_of(t.dtype)) {
          const TensorInfo* s = scale_of(c, f, t);
          p.items[t.name] = {Step::dequantize, &t, s, &c.shards[c.tensors.at(s->name).first]};
          p.decls.push_back({t.name, StDtype::BF16, t.shape});
          continue;
        }
      } else if (quantizable(t, c, o)) {
        p.items[t.name] = p.items[t.name + kScaleSuffix] = {Step::quantize, &t};
        p.decls.push_back(
            {t.name, o.format == Fp8Format::e4m3 ? StDtype::F8_E4M3 : StDtype::F8_E5M2, t.shape});
        p.decls.push_back({t.name + kScaleSuffix, StDtype::F32, block_shape(t.shape)});
        continue;
      }
      p.items[t.name] = {Step::copy, &t};
      p.decls.push_back({t.name, t.dtype, t.shape});
    }
    shards.push_back(std::move(p));
  }
  return shards;
}

// An output shard already written by an earlier run with the same stamp: same header, same size.
bool complete(const std::string& path, const Layout& layout) {
  std::error_code ec;
  if (!fs::is_regular_file(path, ec)) return false;
  try {
    const SafetensorsFile f = read_safetensors(path);
    if (f.file_size != layout.total_bytes() || f.tensors.size() != layout.tensors.size())
      return false;
    for (std::size_t i = 0; i < f.tensors.size(); ++i) {
      const TensorInfo &a = f.tensors[i], &b = layout.tensors[i];
      if (a.name != b.name || a.dtype != b.dtype || a.shape != b.shape || a.begin != b.begin ||
          a.end != b.end)
        return false;
    }
    return true;
  } catch (const Error&) {
    return false;  // unreadable or invalid: written again
  }
}

// Reads a shard's inputs one ahead of their use, on another thread: the disk read of the next
// tensor overlaps the conversion and the write of this one (two input tensors in memory).
class Prefetcher {
 public:
  using Read = std::pair<const SafetensorsFile*, const TensorInfo*>;
  explicit Prefetcher(std::vector<Read> plan) : plan_(std::move(plan)) { start(); }
  ~Prefetcher() {
    if (ahead_.valid()) ahead_.wait();
  }
  // The bytes of tensor `t` of `f`: the read started ahead when it is the planned one (its error,
  // if it failed, is thrown here), else a read now.
  std::vector<std::uint8_t> take(const SafetensorsFile& f, const TensorInfo& t) {
    std::vector<std::uint8_t> bytes;
    if (next_ < plan_.size() && plan_[next_] == Read{&f, &t}) {
      ++next_;
      bytes = ahead_.get();
      start();
    } else {
      read_tensor(f, t, bytes);
    }
    return bytes;
  }

 private:
  void start() {
    if (next_ >= plan_.size()) return;
    ahead_ = std::async(std::launch::async, [r = plan_[next_]] {
      std::vector<std::uint8_t> b;
      read_tensor(*r.first, *r.second, b);
      return b;
    });
  }
  std::vector<Read> plan_;
  std::size_t next_ = 0;
  std::future<std::vector<std::uint8_t>> ahead_;
};

// Runs a plan: shard by shard, tensor by tensor in the output's layout order.
class Caster {
 public:
  Caster(const CastOptions& o, Converter& conv,
         const std::function<void(const CastProgress&)>& progress)
      : o_(o), conv_(conv), progress_(progress) {}

  void write_shard(const ShardPlan& p, const std::string& path, CastProgress& at, CastReport& r) {
    Layout layout = layout_of(p.decls, p.in->metadata);
    Prefetcher reads(reads_of(p, layout));
    SafetensorsWriter w(path, std::move(layout));
    pending_.clear();
    while (const TensorInfo* t = w.next()) {
      const Item& item = p.items.at(t->name);
      w.write(produce(reads, *p.in, item, t->name));
      if (item.step == Step::quantize && t->name != item.in->name) continue;  // its weight counts
      at.bytes_done += item.in->bytes();
      ++at.tensors_done;
      at.tensor = item.in->name;
      r.bytes_read += item.in->bytes() + (item.scale ? item.scale->bytes() : 0);
      ++(item.step == Step::copy ? r.copied : r.converted);
      if (progress_) progress_(at);
    }
    w.commit();
    r.bytes_written += w.layout().total_bytes();
  }

 private:
  // The reads produce() makes for the layout, in its order: a quantized weight once (its second
  // output comes from pending_), a dequantized weight with its scale.
  static std::vector<Prefetcher::Read> reads_of(const ShardPlan& p, const Layout& layout) {
    std::vector<Prefetcher::Read> plan;
    std::set<const TensorInfo*> quantized;
    for (const TensorInfo& t : layout.tensors) {
      const Item& item = p.items.at(t.name);
      if (item.step == Step::quantize && !quantized.insert(item.in).second) continue;
      plan.emplace_back(p.in, item.in);
      if (item.step == Step::dequantize) plan.emplace_back(item.scale_file, item.scale);
    }
    return plan;
  }

  // The bytes of output tensor `name`, made from its input (a view of in_ or out_).
  std::string_view produce(Prefetcher& reads, const SafetensorsFile& f, const Item& item,
                           const std::string& name) {
    const TensorInfo& t = *item.in;
    if (item.step == Step::copy) {
      in_ = reads.take(f, t);
      return {reinterpret_cast<const char*>(in_.data()), in_.size()};
    }
    const std::int64_t n = t.shape[0], k = t.shape[1];
    const std::size_t elems = static_cast<std::size_t>(n * k);
    if (item.step == Step::dequantize) {
      in_ = reads.take(f, t);
      scales_ = reads.take(*item.scale_file, *item.scale);
      out_.assign(elems * 2, '\0');
      conv_.dequantize(in_.data(), *fp8_of(t.dtype), n, k,
                       reinterpret_cast<const float*>(scales_.data()),
                       reinterpret_cast<std::uint16_t*>(out_.data()));
      return out_;
    }
    // Quantize: weight and scale come from one conversion; the layout puts the fp32 scales of a
    // shard before its FP8 weights, so the codes wait (at most one shard's FP8 weights).
    if (auto it = pending_.find(name); it != pending_.end()) {
      out_ = std::move(it->second);
      pending_.erase(it);
      return out_;
    }
    in_ = reads.take(f, t);
    std::string q(elems, '\0'),
        s(static_cast<std::size_t>(block_shape(t.shape)[0] * block_shape(t.shape)[1]) * 4, '\0');
    conv_.quantize(in_.data(), *float_of(t.dtype), n, k, o_.format, o_.ue8m0,
                   reinterpret_cast<std::uint8_t*>(q.data()), reinterpret_cast<float*>(s.data()));
    const bool weight_first = name == t.name;
    pending_[weight_first ? t.name + kScaleSuffix : t.name] = std::move(weight_first ? s : q);
    out_ = std::move(weight_first ? q : s);
    return out_;
  }

  const CastOptions& o_;
  Converter& conv_;
  const std::function<void(const CastProgress&)>& progress_;
  std::vector<std::uint8_t> in_, scales_;
  std::string out_;
  std::map<std::string, std::string> pending_;
};

std::string stamp_of(const Checkpoint& c, const CastOptions& o) {
  json skip = o.skip;
  json stamp = {{"to", o.to == CastTarget::bf16 ? "bf16" : "fp8"},
                {"format", std::string(to_string(o.format))},
                {"scale_fmt", o.ue8m0 ? "ue8m0" : "fp32"},
                {"skip", skip},
                {"input", fs::absolute(c.dir).lexically_normal().string()}};
  return stamp.dump(2) + "\n";
}

// The index with its weight_map for the output tensors and metadata.total_size updated.
std::string output_index(const Checkpoint& c, const std::vector<ShardPlan>& shards) {
  json index = json::parse(c.index_text);
  json map = json::object();
  std::uint64_t total = 0;
  for (const ShardPlan& p : shards) {
    const Layout l = layout_of(p.decls, {});
    for (const TensorInfo& t : l.tensors) map[t.name] = p.name;
    total += l.tensors.empty() ? 0 : l.tensors.back().end;
  }
  index["weight_map"] = map;
  if (!index.contains("metadata") || !index["metadata"].is_object())
    index["metadata"] = json::object();
  index["metadata"]["total_size"] = total;
  return index.dump(2) + "\n";
}

// config.json with quantization_config as DeepSeek-V3 and Qwen3-FP8 declare block-scaled FP8
// (fp8), or without it (bf16); unchanged when it is not a JSON object.
std::string output_config(const std::string& text, const CastOptions& o) {
  json config;
  try {
    config = json::parse(text);
  } catch (const json::exception&) {
    return text;
  }
  if (!config.is_object()) return text;
  if (o.to == CastTarget::bf16) {
    config.erase("quantization_config");
  } else {
    json q = {{"quant_method", "fp8"},
              {"fmt", std::string(to_string(o.format))},
              {"activation_scheme", "dynamic"},
              {"weight_block_size", {128, 128}}};
    if (o.ue8m0) q["scale_fmt"] = "ue8m0";
    config["quantization_config"] = q;
  }
  return config.dump(2) + "\n";
}

bool side_file(const fs::path& p) {
  static const char* kinds[] = {".json", ".txt", ".model", ".py", ".jinja", ".md", ".tiktoken"};
  const std::string name = p.filename().string();
  if (name == kIndexName || name == kStampName) return false;
  for (const char* k : kinds)
    if (ends_with(name, k)) return true;
  return false;
}

void check_folders(const std::string& in_dir, const std::string& out_dir) {
  std::error_code ec;
  if (fs::exists(out_dir, ec) && fs::equivalent(in_dir, out_dir, ec))
    throw_invalid("output folder", printable(out_dir),
                  "is the input folder; cast into another folder");
  if (fs::exists(out_dir, ec) && !fs::is_directory(out_dir, ec))
    throw_invalid("output folder", printable(out_dir), "exists and is not a directory");
}

}  // namespace

CastReport cast_checkpoint(const std::string& in_dir, const std::string& out_dir,
                           const CastOptions& o, Converter& converter,
                           const std::function<void(const CastProgress&)>& progress) {
  const auto t0 = std::chrono::steady_clock::now();
  check_folders(in_dir, out_dir);
  const Checkpoint c = open_checkpoint(in_dir);
  const std::vector<ShardPlan> shards = plan(c, o);
  // Everything is checked; only now does anything get written.
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec)
    throw Error(ErrorKind::io,
                fmt::format("cannot create {}: {}", printable(out_dir), ec.message()));
  const std::string stamp = stamp_of(c, o), stamp_path = (fs::path(out_dir) / kStampName).string();
  std::string old_stamp;
  if (fs::is_regular_file(stamp_path, ec)) old_stamp = read_regular_file(stamp_path, "cast stamp");
  if (old_stamp != stamp) {
    OutputFiles f;
    f.add(stamp_path, stamp);
    f.commit();
  }
  CastReport r;
  r.converter = converter.name();
  CastProgress at;
  at.shards = shards.size();
  for (const ShardPlan& p : shards)
    for (const auto& [name, item] : p.items)
      if (name == item.in->name) at.bytes_total += item.in->bytes(), ++at.tensors_total;
  Caster caster(o, converter, progress);
  const double convert0 = converter.seconds;
  for (std::size_t i = 0; i < shards.size(); ++i) {
    const ShardPlan& p = shards[i];
    at.shard = i + 1;
    const std::string path = (fs::path(out_dir) / p.name).string();
    if (old_stamp == stamp && complete(path, layout_of(p.decls, p.in->metadata))) {
      ++r.shards_kept;
      for (const auto& [name, item] : p.items)
        if (name == item.in->name) at.bytes_done += item.in->bytes(), ++at.tensors_done;
      continue;
    }
    caster.write_shard(p, path, at, r);
    ++r.shards_written;
  }
  for (const ShardPlan& p : shards)
    for (const auto& entry : p.items)
      r.dropped += entry.second.step == Step::dequantize;  // their scales
  // The index and the side files last: a folder with an index holds every shard it names.
  OutputFiles last;
  for (const fs::directory_entry& e : fs::directory_iterator(in_dir, ec)) {
    if (!e.is_regular_file(ec) || !side_file(e.path())) continue;
    const std::string text = read_regular_file(e.path().string(), "checkpoint file");
    last.add((fs::path(out_dir) / e.path().filename()).string(),
             e.path().filename() == "config.json" ? output_config(text, o) : text);
  }
  if (c.sharded) last.add((fs::path(out_dir) / kIndexName).string(), output_index(c, shards));
  last.commit();
  r.convert_seconds = converter.seconds - convert0;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace fp8jit::checkpoint
