// The safetensors format (Hugging Face): an 8-byte little-endian header length N, N bytes of JSON
// naming each tensor's dtype, shape and [begin, end) byte range in the data that follows, and the
// data itself. Reading checks everything a hostile or truncated file could get wrong before any
// byte of data is trusted; writing lays a file out exactly as the `safetensors` library does
// (tensors by descending dtype, then by name; the header padded with spaces to 8 bytes), so a
// file written here is byte-identical to safetensors.torch.save_file of the same tensors.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fp8jit::checkpoint {

// In the safetensors library's order (increasing alignment), which decides the file layout.
enum class StDtype : std::uint8_t {
  BOOL,
  U8,
  I8,
  F8_E5M2,
  F8_E4M3,
  F8_E8M0,
  I16,
  U16,
  F16,
  BF16,
  I32,
  U32,
  F32,
  F64,
  I64,
  U64
};

std::string_view to_string(StDtype d);
std::optional<StDtype> parse_st_dtype(std::string_view name);
std::size_t element_size(StDtype d);

struct TensorInfo {
  std::string name;
  StDtype dtype = StDtype::U8;
  std::vector<std::int64_t> shape;
  std::uint64_t begin = 0, end = 0;  // byte range within the data section

  std::uint64_t bytes() const { return end - begin; }
  std::int64_t elements() const;
};

// A checked safetensors file: the tensors in data order, and where the data starts.
struct SafetensorsFile {
  std::string path;
  std::uint64_t file_size = 0, data_offset = 0;  // data_offset = 8 + header length
  std::vector<TensorInfo> tensors;
  std::map<std::string, std::string> metadata;  // "__metadata__" (string to string)

  const TensorInfo* find(std::string_view name) const;
};

// Headers larger than this are refused, as the safetensors library refuses them.
constexpr std::uint64_t kMaxHeaderBytes = 100'000'000;

// Reads and checks the header of `path`: the length within the file and the limit, valid UTF-8
// JSON object, known dtypes, non-negative shapes, byte ranges matching dtype x shape, ranges that
// tile the data section exactly (no overlap, no hole, nothing past the end). Throws Error(io) for
// an unreadable file and Error(invalid_argument) naming the file and the tensor otherwise.
SafetensorsFile read_safetensors(const std::string& path);

// Reads one tensor's bytes (`out` resized to its size). Throws Error(io) naming file and tensor.
void read_tensor(const SafetensorsFile& file, const TensorInfo& t, std::vector<std::uint8_t>& out);

// What a file will hold: each tensor's name, dtype and shape, and the metadata.
struct TensorDecl {
  std::string name;
  StDtype dtype = StDtype::U8;
  std::vector<std::int64_t> shape;
};

// The header bytes (length prefix included) and the tensors in their data order, with their
// ranges: the safetensors library's layout for these tensors and metadata.
struct Layout {
  std::string header;  // 8-byte length + JSON padded with spaces to a multiple of 8
  std::vector<TensorInfo> tensors;
  std::uint64_t total_bytes() const;  // header + data: the file's size
};
Layout layout_of(std::vector<TensorDecl> tensors,
                 const std::map<std::string, std::string>& metadata);

// Writes a file of a Layout tensor by tensor, in the layout's order, to a temporary name beside
// `path`; commit() checks every tensor was written, syncs and renames it into place. A writer
// destroyed before commit() removes its temporary: no file that looks finished is left behind.
class SafetensorsWriter {
 public:
  SafetensorsWriter(std::string path, Layout layout);
  ~SafetensorsWriter();
  SafetensorsWriter(const SafetensorsWriter&) = delete;
  SafetensorsWriter& operator=(const SafetensorsWriter&) = delete;

  const Layout& layout() const { return layout_; }
  // The next tensor in layout order; null once all are written.
  const TensorInfo* next() const;
  // Appends the next tensor's bytes (exactly its size).
  void write(std::string_view bytes);
  void commit();

 private:
  std::string path_, temp_;
  Layout layout_;
  std::size_t written_ = 0;
  int fd_ = -1;
};

}  // namespace fp8jit::checkpoint
