// The safetensors reader and writer: the library's exact layout, round trips, and every way a
// hostile or truncated file is refused with the file and tensor named.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>

#include "checkpoint/safetensors.hpp"
#include "tests/common/expect_error.hpp"
#include "tests/common/temp_dir.hpp"

namespace fp8jit::checkpoint {
namespace {

namespace fs = std::filesystem;

std::string le64(std::uint64_t n) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i) & 0xff);
  return s;
}

void write_raw(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), {}};
}

// A file of a raw header (no padding needed by readers) and `data_bytes` zero bytes.
std::string raw_file(const std::string& header, std::size_t data_bytes) {
  return le64(header.size()) + header + std::string(data_bytes, '\0');
}

TEST(Safetensors, LayoutIsTheLibrarysByteForByte) {
  // safetensors.torch.save_file({"b": torch.zeros(2), "a": torch.zeros(1, 2, dtype=torch.bfloat16),
  // "c": torch.zeros(3, dtype=torch.float8_e4m3fn)}, metadata={"format": "pt"}): descending dtype,
  // then name; dtype, shape, data_offsets in that order; compact; spaces to a multiple of 8.
  const Layout l = layout_of(
      {{"a", StDtype::BF16, {1, 2}}, {"c", StDtype::F8_E4M3, {3}}, {"b", StDtype::F32, {2}}},
      {{"format", "pt"}});
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"b":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("a":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},"c":{"dtype":"F8_E4M3","shape":[3],)"
      R"("data_offsets":[12,15]}})";
  const std::string padded = json + std::string((8 - json.size() % 8) % 8, ' ');
  EXPECT_EQ(l.header, le64(padded.size()) + padded);
  ASSERT_EQ(l.tensors.size(), 3u);
  EXPECT_EQ(l.tensors[0].name, "b");
  EXPECT_EQ(l.tensors[2].end, 15u);
  EXPECT_EQ(l.total_bytes(), 8 + padded.size() + 15);
  EXPECT_EQ(l.header.size() % 8, 0u);
}

TEST(Safetensors, WriteThenReadRoundTrips) {
  test::TempDir dir("fp8jit_st");
  const std::string path = dir.path() + "/m.safetensors";
  SafetensorsWriter w(
      path,
      layout_of({{"w", StDtype::BF16, {2, 3}}, {"s", StDtype::F32, {1}}, {"e", StDtype::U8, {0}}},
                {{"format", "pt"}}));
  EXPECT_FALSE(fs::exists(path));  // only the temporary until commit
  std::vector<std::string> order;
  while (const TensorInfo* t = w.next()) {
    order.push_back(t->name);
    w.write(std::string(t->bytes(), static_cast<char>('0' + order.size())));
  }
  EXPECT_EQ(order, (std::vector<std::string>{"s", "w", "e"}));
  w.commit();
  const SafetensorsFile f = read_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "pt");
  ASSERT_EQ(f.tensors.size(), 3u);
  const TensorInfo* t = f.find("w");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, (std::vector<std::int64_t>{2, 3}));
  EXPECT_EQ(t->dtype, StDtype::BF16);
  std::vector<std::uint8_t> bytes;
  read_tensor(f, *t, bytes);
  EXPECT_EQ(std::string(bytes.begin(), bytes.end()), std::string(12, '2'));
  EXPECT_EQ(fs::file_size(path), w.layout().total_bytes());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(Safetensors, UnfinishedWriterLeavesNothing) {
  test::TempDir dir("fp8jit_st");
  const std::string path = dir.path() + "/m.safetensors";
  {
    SafetensorsWriter w(path, layout_of({{"a", StDtype::F32, {4}}, {"b", StDtype::F32, {4}}}, {}));
    w.write(std::string(16, 'x'));
    EXPECT_NE(
        test::error_message(ErrorKind::internal, [&] { w.commit(); }).find("before tensor \"b\""),
        std::string::npos);
    EXPECT_NE(test::error_message(ErrorKind::internal, [&] { w.write("short"); })
                  .find("16 bytes, 5 given"),
              std::string::npos);
  }
  EXPECT_TRUE(fs::is_empty(dir.path()));
}

struct BadCase {
  const char* what;
  std::string bytes;
  const char* needle;
};

TEST(Safetensors, HostileAndTruncatedFilesAreRefusedByName) {
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  const BadCase cases[] = {
      {"empty", "", "shorter than the 8-byte header length"},
      {"length past the end", le64(1000) + "{}", "header length 1000 runs past the end"},
      {"length over the limit", le64(kMaxHeaderBytes + 1) + "{}", "over the limit"},
      {"not JSON", raw_file("{not json", 0), "not valid JSON"},
      {"not an object", raw_file("[1,2]", 0), "not a JSON object"},
      {"unknown dtype", raw_file(R"({"w":{"dtype":"F12","shape":[1],"data_offsets":[0,1]}})", 1),
       "tensor \"w\": unknown dtype"},
      {"negative shape", raw_file(R"({"w":{"dtype":"U8","shape":[-1],"data_offsets":[0,1]}})", 1),
       "tensor \"w\": shape entry -1"},
      {"size mismatch", raw_file(R"({"w":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
       "tensor \"w\": F32 [3] is 12 bytes, data_offsets [0, 8] hold 8"},
      {"end before begin", raw_file(R"({"w":{"dtype":"U8","shape":[0],"data_offsets":[4,0]}})", 4),
       "end before begin"},
      {"overlap",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
           8),
       "tensor \"b\": data_offsets [4, 8] overlap"},
      {"hole",
       raw_file(
           R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
           12),
       "leave bytes [4, 8) unindexed"},
      {"truncated data", raw_file(ok, 5), "need 8 bytes of data, the file holds 5 (truncated?)"},
      {"trailing bytes", raw_file(ok, 9), "1 bytes after the last tensor"},
      {"duplicate name",
       raw_file(
           R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})",
           1),
       "tensor \"w\": named twice"},
      {"metadata not strings", raw_file(R"({"__metadata__":{"a":1}})", 0),
       "__metadata__ entry \"a\""},
      {"overflowing shape",
       raw_file(R"({"w":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0),
       "shape overflows 64 bits"},
      {"missing offsets", raw_file(R"({"w":{"dtype":"U8","shape":[1]}})", 1),
       "data_offsets is not a pair"},
  };
  test::TempDir dir("fp8jit_st");
  for (const BadCase& c : cases) {
    SCOPED_TRACE(c.what);
    const std::string path = dir.path() + "/bad.safetensors";
    write_raw(path, c.bytes);
    const std::string msg = test::invalid_message([&] { (void)read_safetensors(path); });
    EXPECT_NE(msg.find(c.needle), std::string::npos) << msg;
    EXPECT_NE(msg.find(path), std::string::npos) << msg;
  }
  // The valid one reads, and so does a file with no tensors at all.
  write_raw(dir.path() + "/ok.safetensors", raw_file(ok, 8));
  EXPECT_EQ(read_safetensors(dir.path() + "/ok.safetensors").tensors.size(), 1u);
  write_raw(dir.path() + "/none.safetensors", raw_file("{}", 0));
  EXPECT_TRUE(read_safetensors(dir.path() + "/none.safetensors").tensors.empty());
}

TEST(Safetensors, MissingOrSpecialFilesAreIoErrors) {
  test::TempDir dir("fp8jit_st");
  EXPECT_NE(
      test::error_message(ErrorKind::io, [&] { (void)read_safetensors(dir.path() + "/nope"); })
          .find("no such file"),
      std::string::npos);
  EXPECT_NE(test::error_message(ErrorKind::io, [&] { (void)read_safetensors(dir.path()); })
                .find("directory"),
            std::string::npos);
}

}  // namespace
}  // namespace fp8jit::checkpoint
