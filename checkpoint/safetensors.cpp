#include "checkpoint/safetensors.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "common/file_io.hpp"
#include "fp8jit/error.hpp"

namespace fp8jit::checkpoint {
namespace {

using json = nlohmann::json;

constexpr std::array<std::string_view, 16> kDtypeNames = {
    "BOOL", "U8",   "I8",  "F8_E5M2", "F8_E4M3", "F8_E8M0", "I16", "U16",
    "F16",  "BF16", "I32", "U32",     "F32",     "F64",     "I64", "U64"};
constexpr std::array<std::size_t, 16> kDtypeSizes = {1, 1, 1, 1, 1, 1, 2, 2,
                                                     2, 2, 4, 4, 4, 8, 8, 8};

[[noreturn]] void bad_file(const std::string& path, const std::string& what) {
  throw Error(ErrorKind::invalid_argument,
              fmt::format("{}: not a valid safetensors file: {}", printable(path), what));
}

[[noreturn]] void bad_tensor(const std::string& path, const std::string& name,
                             const std::string& what) {
  bad_file(path, fmt::format("tensor \"{}\": {}", printable(name), what));
}

// Reads exactly n bytes at `offset`; false on a short read or an error (errno set).
bool read_at(int fd, std::uint64_t offset, char* buf, std::uint64_t n) {
  while (n > 0) {
    const ssize_t got =
        ::pread(fd, buf, std::min<std::uint64_t>(n, 1u << 30), static_cast<off_t>(offset));
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) {
      if (got == 0) errno = 0;
      return false;
    }
    buf += got, offset += static_cast<std::uint64_t>(got), n -= static_cast<std::uint64_t>(got);
  }
  return true;
}

int open_for_reading(const std::string& path) {
  if (const std::string kind = special_file_kind(path); !kind.empty())
    throw Error(ErrorKind::io, fmt::format("cannot read {}: is {}, not a safetensors file",
                                           printable(path), kind));
  const int fd = io::open_retry(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    throw Error(ErrorKind::io,
                fmt::format("cannot read {}: {}", printable(path), io::errno_text(errno)));
  return fd;
}

std::int64_t checked_int(const json& v, const std::string& path, const std::string& name,
                         const char* what) {
  if (!v.is_number_unsigned() ||
      v.get<std::uint64_t>() > std::uint64_t(std::numeric_limits<std::int64_t>::max()))
    bad_tensor(path, name, fmt::format("{} {} is not a non-negative integer", what, v.dump()));
  return v.get<std::int64_t>();
}

TensorInfo parse_entry(const std::string& path, const std::string& name, const json& v) {
  if (!v.is_object())
    bad_tensor(path, name, "expected an object with dtype, shape and data_offsets");
  TensorInfo t;
  t.name = name;
  const auto dtype = v.find("dtype");
  if (dtype == v.end() || !dtype->is_string()) bad_tensor(path, name, "no dtype string");
  const auto parsed = parse_st_dtype(dtype->get<std::string>());
  if (!parsed)
    bad_tensor(path, name, fmt::format("unknown dtype {}", printable(dtype->dump(), 40)));
  t.dtype = *parsed;
  const auto shape = v.find("shape");
  if (shape == v.end() || !shape->is_array()) bad_tensor(path, name, "no shape array");
  for (const json& d : *shape) t.shape.push_back(checked_int(d, path, name, "shape entry"));
  const auto offsets = v.find("data_offsets");
  if (offsets == v.end() || !offsets->is_array() || offsets->size() != 2)
    bad_tensor(path, name, "data_offsets is not a pair [begin, end]");
  t.begin = static_cast<std::uint64_t>(checked_int((*offsets)[0], path, name, "data offset"));
  t.end = static_cast<std::uint64_t>(checked_int((*offsets)[1], path, name, "data offset"));
  if (t.end < t.begin)
    bad_tensor(path, name, fmt::format("data_offsets [{}, {}] end before begin", t.begin, t.end));
  // Bytes of dtype x shape, without overflow: a hostile shape must not wrap to a small size.
  std::uint64_t bytes = element_size(t.dtype);
  for (std::int64_t d : t.shape) {
    if (d != 0 && bytes > std::numeric_limits<std::uint64_t>::max() / static_cast<std::uint64_t>(d))
      bad_tensor(path, name, "shape overflows 64 bits");
    bytes *= static_cast<std::uint64_t>(d);
  }
  if (bytes != t.bytes())
    bad_tensor(path, name,
               fmt::format("{} {} is {} bytes, data_offsets [{}, {}] hold {}", to_string(t.dtype),
                           json(t.shape).dump(), bytes, t.begin, t.end, t.bytes()));
  return t;
}

// The header as JSON, refusing a key given twice (JSON parsers keep one of them silently, and
// two readers may disagree on which).
json parse_header(const std::string& path, const std::string& text) {
  std::set<std::string> keys;
  std::string duplicate;
  const json::parser_callback_t callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key &&
        !keys.insert(parsed.get<std::string>()).second)
      duplicate = parsed.get<std::string>();
    return true;
  };
  json header;
  try {
    header = json::parse(text, callback);
  } catch (const json::exception& e) {
    bad_file(path, fmt::format("its header is not valid JSON ({})", e.what()));
  }
  if (!duplicate.empty()) bad_tensor(path, duplicate, "named twice in the header");
  if (!header.is_object()) bad_file(path, "its header is not a JSON object");
  return header;
}

}  // namespace

std::string_view to_string(StDtype d) {
  return kDtypeNames.at(static_cast<std::size_t>(d));
}

std::optional<StDtype> parse_st_dtype(std::string_view name) {
  for (std::size_t i = 0; i < kDtypeNames.size(); ++i)
    if (kDtypeNames[i] == name) return static_cast<StDtype>(i);
  return std::nullopt;
}

std::size_t element_size(StDtype d) {
  return kDtypeSizes.at(static_cast<std::size_t>(d));
}

std::int64_t TensorInfo::elements() const {
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

const TensorInfo* SafetensorsFile::find(std::string_view name) const {
  for (const TensorInfo& t : tensors)
    if (t.name == name) return &t;
  return nullptr;
}

SafetensorsFile read_safetensors(const std::string& path) {
  io::Fd fd(open_for_reading(path));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0)
    throw Error(ErrorKind::io,
                fmt::format("cannot read {}: {}", printable(path), io::errno_text(errno)));
  SafetensorsFile f;
  f.path = path;
  f.file_size = static_cast<std::uint64_t>(st.st_size);
  unsigned char prefix[8];
  if (f.file_size < 8 || !read_at(fd.get(), 0, reinterpret_cast<char*>(prefix), 8))
    bad_file(path, fmt::format("{} bytes, shorter than the 8-byte header length", f.file_size));
  std::uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = n << 8 | prefix[i];
  if (n > kMaxHeaderBytes)
    bad_file(path, fmt::format("header length {} is over the limit of {}", n, kMaxHeaderBytes));
  if (n > f.file_size - 8)
    bad_file(path, fmt::format("header length {} runs past the end of the file ({} bytes)", n,
                               f.file_size));
  std::string text(n, '\0');
  if (!read_at(fd.get(), 8, text.data(), n))
    throw Error(ErrorKind::io,
                fmt::format("cannot read {}: {}", printable(path), io::errno_text(errno)));
  f.data_offset = 8 + n;
  const json header = parse_header(path, text);
  for (const auto& [key, value] : header.items()) {
    if (key == "__metadata__") {
      if (!value.is_object()) bad_file(path, "__metadata__ is not an object of strings");
      for (const auto& [k, v] : value.items()) {
        if (!v.is_string())
          bad_file(path, fmt::format("__metadata__ entry \"{}\" is not a string", printable(k)));
        f.metadata[k] = v.get<std::string>();
      }
      continue;
    }
    f.tensors.push_back(parse_entry(path, key, value));
  }
  std::sort(f.tensors.begin(), f.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return std::tie(a.begin, a.end) < std::tie(b.begin, b.end);
  });
  // The ranges must tile the data section: no overlap, no unindexed bytes, nothing past the end.
  std::uint64_t at = 0;
  for (const TensorInfo& t : f.tensors) {
    if (t.begin < at)
      bad_tensor(path, t.name,
                 fmt::format("data_offsets [{}, {}] overlap the previous tensor (ending at {})",
                             t.begin, t.end, at));
    if (t.begin > at)
      bad_tensor(path, t.name,
                 fmt::format("data_offsets [{}, {}] leave bytes [{}, {}) unindexed", t.begin, t.end,
                             at, t.begin));
    at = t.end;
  }
  const std::uint64_t data_bytes = f.file_size - f.data_offset;
  if (at > data_bytes)
    bad_file(path, fmt::format("the tensors need {} bytes of data, the file holds {} (truncated?)",
                               at, data_bytes));
  if (at < data_bytes)
    bad_file(path, fmt::format("{} bytes after the last tensor", data_bytes - at));
  return f;
}

void read_tensor(const SafetensorsFile& file, const TensorInfo& t, std::vector<std::uint8_t>& out) {
  io::Fd fd(open_for_reading(file.path));
  out.resize(t.bytes());
  if (!read_at(fd.get(), file.data_offset + t.begin, reinterpret_cast<char*>(out.data()),
               t.bytes()))
    throw Error(ErrorKind::io, fmt::format("cannot read tensor \"{}\" of {}: {}", printable(t.name),
                                           printable(file.path),
                                           errno ? io::errno_text(errno) : "file shortened"));
}

std::uint64_t Layout::total_bytes() const {
  return header.size() + (tensors.empty() ? 0 : tensors.back().end);
}

Layout layout_of(std::vector<TensorDecl> tensors,
                 const std::map<std::string, std::string>& metadata) {
  // The safetensors library's order: descending dtype (its alignment order), then name.
  std::sort(tensors.begin(), tensors.end(), [](const TensorDecl& a, const TensorDecl& b) {
    return a.dtype != b.dtype ? a.dtype > b.dtype : a.name < b.name;
  });
  Layout layout;
  // Keys in the library's order (metadata first, then tensors in data order; each tensor's
  // fields as dtype, shape, data_offsets), compact, so the bytes match its header.
  std::string text = "{";
  if (!metadata.empty()) text += "\"__metadata__\":" + json(metadata).dump() + ",";
  std::uint64_t offset = 0;
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const TensorDecl& d = tensors[i];
    if (d.name == "__metadata__")
      throw_invalid("tensor name", d.name, "reserved for the header's metadata");
    TensorInfo t{d.name, d.dtype, d.shape, offset, 0};
    std::uint64_t bytes = element_size(d.dtype);
    for (std::int64_t s : d.shape) {
      if (s < 0) throw_invalid("shape of " + d.name, json(d.shape).dump(), "non-negative");
      bytes *= static_cast<std::uint64_t>(s);
    }
    t.end = offset + bytes;
    offset = t.end;
    text +=
        fmt::format("{}{}:{{\"dtype\":\"{}\",\"shape\":{},\"data_offsets\":[{},{}]}}", i ? "," : "",
                    json(d.name).dump(), to_string(d.dtype), json(d.shape).dump(), t.begin, t.end);
    layout.tensors.push_back(std::move(t));
  }
  text += "}";
  text.append((8 - text.size() % 8) % 8, ' ');
  std::string prefix(8, '\0');
  for (int i = 0; i < 8; ++i) prefix[i] = static_cast<char>(text.size() >> (8 * i) & 0xff);
  layout.header = prefix + text;
  return layout;
}

SafetensorsWriter::SafetensorsWriter(std::string path, Layout layout)
    : path_(std::move(path)), temp_(io::temp_name_for(path_)), layout_(std::move(layout)) {
  fd_ = io::open_retry(temp_, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0)
    throw Error(ErrorKind::io,
                fmt::format("cannot write {}: {}", printable(path_), io::errno_text(errno)));
  if (!io::write_all(fd_, layout_.header)) {
    const int err = errno;
    ::close(fd_), ::unlink(temp_.c_str()), fd_ = -1;
    throw Error(ErrorKind::io,
                fmt::format("cannot write {}: {}", printable(path_), io::errno_text(err)));
  }
}

SafetensorsWriter::~SafetensorsWriter() {
  if (fd_ >= 0) {
    ::close(fd_);
    ::unlink(temp_.c_str());
  }
}

const TensorInfo* SafetensorsWriter::next() const {
  return written_ < layout_.tensors.size() ? &layout_.tensors[written_] : nullptr;
}

void SafetensorsWriter::write(std::string_view bytes) {
  const TensorInfo* t = next();
  if (fd_ < 0 || !t)
    throw Error(ErrorKind::internal, "SafetensorsWriter::write past the last tensor of " + path_);
  if (bytes.size() != t->bytes())
    throw Error(ErrorKind::internal,
                fmt::format("SafetensorsWriter: tensor \"{}\" is {} bytes, {} given", t->name,
                            t->bytes(), bytes.size()));
  if (!io::write_all(fd_, bytes))
    throw Error(ErrorKind::io,
                fmt::format("cannot write tensor \"{}\" to {}: {}", printable(t->name),
                            printable(path_), io::errno_text(errno)));
  ++written_;
}

void SafetensorsWriter::commit() {
  if (fd_ < 0) throw Error(ErrorKind::internal, "SafetensorsWriter::commit twice: " + path_);
  if (const TensorInfo* t = next())
    throw Error(
        ErrorKind::internal,
        fmt::format("SafetensorsWriter: {} committed before tensor \"{}\"", path_, t->name));
  const int fd = fd_;
  fd_ = -1;
  const bool synced = ::fsync(fd) == 0;
  int err = synced ? 0 : errno;
  if (::close(fd) != 0 && synced) err = errno;
  if (err != 0) {
    ::unlink(temp_.c_str());
    throw Error(ErrorKind::io,
                fmt::format("cannot write {}: {}", printable(path_), io::errno_text(err)));
  }
  if (::rename(temp_.c_str(), path_.c_str()) != 0) {
    const int err = errno;
    ::unlink(temp_.c_str());
    throw Error(ErrorKind::io,
                fmt::format("cannot write {}: {}", printable(path_), io::errno_text(err)));
  }
  io::fsync_dir(io::parent_of(path_));
}

}  // namespace fp8jit::checkpoint
