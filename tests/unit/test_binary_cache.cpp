// Tests for the on-disk binary cache: format verification, failure tolerance, and atomicity under
// concurrent threads and processes.
#include "runtime/jit/binary_cache.hpp"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <future>
#include <iterator>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "common/hash.hpp"

namespace fp8jit {
namespace {

namespace fs = std::filesystem;

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, std::string_view data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(data.data(), static_cast<std::streamsize>(data.size()));
  ASSERT_TRUE(out.good()) << path;
}

// A payload that proves its own integrity: "key=<key>;tag=<tag>;" + fill + 16-hex checksum of
// everything before it. A torn or mixed payload fails the checksum; a wrong entry fails the key.
std::string make_payload(std::string_view key, std::string_view tag, std::size_t size, char fill) {
  std::string p = "key=" + std::string(key) + ";tag=" + std::string(tag) + ";";
  if (p.size() + 16 < size) p.resize(size - 16, fill);
  return p + hex64(stable_hash64(p));
}

bool payload_valid(std::string_view p, std::string_view key) {
  const std::string prefix = "key=" + std::string(key) + ";";
  if (p.size() < prefix.size() + 16 || p.substr(0, prefix.size()) != prefix) return false;
  return hex64(stable_hash64(p.substr(0, p.size() - 16))) == p.substr(p.size() - 16);
}

// Files whose name is not a finished entry: leftovers of a writer that did not clean up.
int count_temp_files(const std::string& dir) {
  int n = 0;
  for (const auto& e : fs::recursive_directory_iterator(dir))
    if (e.is_regular_file() && e.path().extension() != ".cubin") ++n;
  return n;
}

void expect_stats(const BinaryCache& c, std::uint64_t hits, std::uint64_t misses,
                  std::uint64_t writes, std::uint64_t corrupt, std::uint64_t write_failures) {
  const BinaryCacheStats s = c.stats();
  EXPECT_EQ(s.hits, hits);
  EXPECT_EQ(s.misses, misses);
  EXPECT_EQ(s.writes, writes);
  EXPECT_EQ(s.corrupt, corrupt);
  EXPECT_EQ(s.write_failures, write_failures);
}

class BinaryCacheTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "fp8jit_cache_XXXXXX";
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    dir_ = root_ + "/cache/nested";  // several missing levels: store must create them all
  }
  void TearDown() override {
    ::chmod(dir_.c_str(), 0755);  // in case a test made it read-only
    std::error_code ec;
    fs::remove_all(root_, ec);
  }

  // Key with NULs and ~40 KB of text, like real key material that embeds generated source.
  static std::string long_key(const std::string& tag) {
    std::string k = "sm_90a|" + tag + std::string(1, '\0') + "|";
    for (int i = 0; i < 2000; ++i) k += "line " + std::to_string(i) + " of source\n";
    return k;
  }

  std::string root_, dir_;
};

using BinaryCacheConcurrency = BinaryCacheTest;

TEST_F(BinaryCacheTest, StoreLoadRoundTrip) {
  BinaryCache c(dir_);
  const std::string key = long_key("a");
  std::string payload = "ELF";
  payload += std::string(3, '\0') + std::string(100000, '\x7f');
  c.store(key, payload);
  expect_stats(c, 0, 0, 1, 0, 0);
  ASSERT_TRUE(fs::exists(c.path_for(key)));

  auto got = c.load(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, payload);
  expect_stats(c, 1, 0, 1, 0, 0);

  // Overwrite wins; an empty payload is a valid entry.
  c.store(key, "");
  got = c.load(key);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(*got, "");
  expect_stats(c, 2, 0, 2, 0, 0);
  EXPECT_EQ(count_temp_files(dir_), 0);

  c.reset_stats();
  expect_stats(c, 0, 0, 0, 0, 0);
}

TEST_F(BinaryCacheTest, PathLayout) {
  BinaryCache c(dir_);
  EXPECT_EQ(c.dir(), dir_);
  const std::string h = hex64(stable_hash64("k"));
  EXPECT_EQ(c.path_for("k"), dir_ + "/" + h.substr(0, 2) + "/" + h + ".cubin");
  EXPECT_NE(c.path_for("k"), c.path_for("k2"));
}

TEST_F(BinaryCacheTest, MissOnAbsentKey) {
  BinaryCache c(dir_);
  EXPECT_FALSE(c.load("never stored").has_value());
  expect_stats(c, 0, 1, 0, 0, 0);
  EXPECT_FALSE(fs::exists(dir_)) << "load must not create the directory";

  c.store("other", "x");
  EXPECT_FALSE(c.load("never stored").has_value());
  expect_stats(c, 0, 2, 1, 0, 0);
}

TEST_F(BinaryCacheTest, DisabledCacheNeverStoresOrHits) {
  BinaryCache c("");
  ::testing::internal::CaptureStderr();
  c.store("k", "payload");
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
  EXPECT_FALSE(c.load("k").has_value());
  EXPECT_EQ(c.path_for("k"), "");
  expect_stats(c, 0, 1, 0, 0, 0);
}

TEST_F(BinaryCacheTest, ForeignKeyAtSamePathIsCorruptMiss) {
  BinaryCache c(dir_);
  const std::string a = long_key("A"), b = long_key("B");
  c.store(a, "payload of A");
  // Simulate a hash collision: A's valid entry sits where B's would be.
  write_bytes(c.path_for(b), read_bytes(c.path_for(a)));
  c.reset_stats();

  EXPECT_FALSE(c.load(b).has_value());
  expect_stats(c, 0, 1, 0, 1, 0);
  EXPECT_FALSE(fs::exists(c.path_for(b))) << "bad entry should be removed";
  EXPECT_EQ(c.load(a).value_or("<miss>"), "payload of A");

  c.store(b, "payload of B");
  EXPECT_EQ(c.load(b).value_or("<miss>"), "payload of B");
  expect_stats(c, 2, 1, 1, 1, 0);
}

// Same key, same length, only the stored key bytes differ: must be compared, not just sized.
TEST_F(BinaryCacheTest, SameLengthDifferentKeyIsCorruptMiss) {
  BinaryCache c(dir_);
  c.store("key-1", "one");
  write_bytes(c.path_for("key-2"), read_bytes(c.path_for("key-1")));
  c.reset_stats();
  EXPECT_FALSE(c.load("key-2").has_value());
  expect_stats(c, 0, 1, 0, 1, 0);
}

class BinaryCacheCorruption : public BinaryCacheTest {
 protected:
  const std::string key_ = long_key("victim");
  const std::string payload_ = make_payload("victim", "t", 5000, 'p');
  std::uint64_t key_offset() const { return 20; }
  std::uint64_t suffix_offset() const { return 20 + key_.size(); }
  std::uint64_t payload_offset() const { return suffix_offset() + 16; }

  std::string valid_file() {
    BinaryCache c(dir_);
    c.store(key_, payload_);
    return read_bytes(c.path_for(key_));
  }

  // Puts `bytes` where the key's entry lives and checks it is rejected, counted, removed, and
  // that the cache recovers with a fresh store.
  void expect_rejected(const std::string& bytes, const std::string& what) {
    SCOPED_TRACE(what);
    BinaryCache c(dir_);
    write_bytes(c.path_for(key_), bytes);
    EXPECT_FALSE(c.load(key_).has_value());
    expect_stats(c, 0, 1, 0, 1, 0);
    EXPECT_FALSE(fs::exists(c.path_for(key_)));

    c.store(key_, payload_);
    EXPECT_EQ(c.load(key_).value_or("<miss>"), payload_);
    expect_stats(c, 1, 1, 1, 1, 0);
  }
};

TEST_F(BinaryCacheCorruption, FileSizeMatchesLayout) {
  EXPECT_EQ(valid_file().size(), payload_offset() + payload_.size());
  EXPECT_EQ(valid_file().substr(0, 8), "FP8JITC1");
}

TEST_F(BinaryCacheCorruption, TruncatedAtSeveralOffsets) {
  const std::string good = valid_file();
  const std::uint64_t cuts[] = {0,
                                1,
                                7,
                                8,
                                11,
                                12,
                                19,
                                key_offset(),
                                key_offset() + key_.size() / 2,
                                suffix_offset(),
                                suffix_offset() + 8,
                                payload_offset() - 1,
                                payload_offset(),
                                payload_offset() + payload_.size() / 2,
                                good.size() - 1};
  for (std::uint64_t cut : cuts)
    expect_rejected(good.substr(0, cut), "cut at " + std::to_string(cut));
}

TEST_F(BinaryCacheCorruption, FlippedPayloadByte) {
  for (std::uint64_t off : {payload_offset(), payload_offset() + 2500, valid_file().size() - 1}) {
    std::string bad = valid_file();
    bad[off] ^= 0x01;
    expect_rejected(bad, "payload byte " + std::to_string(off));
  }
}

TEST_F(BinaryCacheCorruption, FlippedHeaderBytes) {
  // magic, version, key size (low and high byte), key, payload size, checksum
  const std::uint64_t offs[] = {0, 7, 8, 12, 19, key_offset(), key_offset() + 1000, suffix_offset(),
                                suffix_offset() + 7, suffix_offset() + 8, suffix_offset() + 15};
  for (std::uint64_t off : offs) {
    std::string bad = valid_file();
    bad[off] ^= 0x10;
    expect_rejected(bad, "header byte " + std::to_string(off));
  }
}

TEST_F(BinaryCacheCorruption, TrailingBytes) {
  expect_rejected(valid_file() + "x", "one extra byte");
}

TEST_F(BinaryCacheCorruption, EmptyFile) { expect_rejected("", "empty"); }

TEST_F(BinaryCacheCorruption, Garbage) {
  std::mt19937 rng(42);
  std::string junk(4096, '\0');
  for (char& ch : junk) ch = static_cast<char>(rng());
  expect_rejected(junk, "random bytes");
  expect_rejected("FP8JITC1", "magic only");
  expect_rejected(std::string(64, '\xff'), "all ones");
}

TEST_F(BinaryCacheCorruption, HugeDeclaredPayloadSize) {
  // Valid up to the payload size, which claims 2^63 bytes: must not allocate or overflow.
  std::string bad = valid_file().substr(0, suffix_offset());
  bad += std::string(7, '\0') + "\x80" + std::string(8, '\0') + "tail";
  expect_rejected(bad, "payload size 2^63");
}

TEST_F(BinaryCacheTest, UnwritableLocationWarnsAndCounts) {
  const std::string file = root_ + "/plain_file";
  write_bytes(file, "not a directory");
  BinaryCache c(file + "/cache");
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(c.store("k", "payload"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  expect_stats(c, 0, 0, 0, 0, 1);
  EXPECT_FALSE(c.load("k").has_value());
  expect_stats(c, 0, 1, 0, 0, 1);
}

TEST_F(BinaryCacheTest, ReadOnlyDirectoryWarnsAndCounts) {
  if (::geteuid() == 0) GTEST_SKIP() << "root ignores directory permissions";
  BinaryCache c(dir_);
  c.store("seed", "x");  // creates <dir>/<2 hex>/
  const std::string sub = fs::path(c.path_for("seed")).parent_path();
  ASSERT_EQ(::chmod(sub.c_str(), 0555), 0);
  ASSERT_EQ(::chmod(dir_.c_str(), 0555), 0);
  ::testing::internal::CaptureStderr();
  EXPECT_NO_THROW(c.store("seed", "y"));
  ::testing::internal::GetCapturedStderr();
  ::chmod(sub.c_str(), 0755);
  expect_stats(c, 0, 0, 1, 0, 1);
  EXPECT_EQ(c.load("seed").value_or("<miss>"), "x");
}

// Runs fn on another thread. Should it still be running after a few seconds (blocked opening the
// FIFO), opening the FIFO for writing releases it so that the test fails instead of hanging.
template <class F>
auto within_deadline(F fn, const std::string& fifo) {
  auto done = std::async(std::launch::async, fn);
  if (done.wait_for(std::chrono::seconds(3)) != std::future_status::ready) {
    ADD_FAILURE() << "blocked on the FIFO " << fifo;
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  }
  return done.get();
}

bool is_fifo(const std::string& path) {
  struct stat st {};
  return ::lstat(path.c_str(), &st) == 0 && S_ISFIFO(st.st_mode);
}

TEST_F(BinaryCacheTest, FifoAtEntryPathIsLeftAloneAndNeverBlocks) {
  BinaryCache c(dir_);
  const std::string path = c.path_for("k");
  fs::create_directories(fs::path(path).parent_path());
  ASSERT_EQ(::mkfifo(path.c_str(), 0644), 0);

  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(within_deadline([&] { return c.load("k"); }, path).has_value());
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(path + " is a FIFO"), std::string::npos) << err;
  expect_stats(c, 0, 1, 0, 1, 0);
  EXPECT_TRUE(is_fifo(path)) << "not ours: must not be removed";

  ::testing::internal::CaptureStderr();
  within_deadline([&] { c.store("k", "payload"); return 0; }, path);
  err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("warning"), std::string::npos) << err;
  expect_stats(c, 0, 1, 0, 1, 1);
  EXPECT_TRUE(is_fifo(path)) << "not ours: must not be replaced";
  EXPECT_EQ(count_temp_files(dir_), 0);
}

TEST_F(BinaryCacheTest, DirectoryAtEntryPathIsAMissAndAFailedWrite) {
  BinaryCache c(dir_);
  const std::string path = c.path_for("k");
  fs::create_directories(path);
  ::testing::internal::CaptureStderr();
  EXPECT_FALSE(c.load("k").has_value());
  expect_stats(c, 0, 1, 0, 1, 0);
  EXPECT_NO_THROW(c.store("k", "payload"));
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find(path + " is a directory"), std::string::npos) << err;
  expect_stats(c, 0, 1, 0, 1, 1);
  EXPECT_TRUE(fs::is_directory(path));
  EXPECT_EQ(count_temp_files(dir_), 0);
}

TEST_F(BinaryCacheConcurrency, ThreadsStoreAndLoadOverlappingKeys) {
  BinaryCache c(dir_);
  constexpr int kThreads = 8, kIters = 200, kKeys = 24;
  std::atomic<int> bad{0}, hits{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < kIters; ++i) {
        const std::string key = "kernel-" + std::to_string((i * 7 + t) % kKeys);
        const std::string tag = std::to_string(t) + "/" + std::to_string(i);
        // Sizes differ per writer so a mix of two files could not pass as either.
        c.store(key, make_payload(key, tag, 1000 + (t * 977 + i * 131) % 60000, char('a' + t)));
        const std::string other = "kernel-" + std::to_string((i * 5 + t * 3) % kKeys);
        if (auto got = c.load(other)) {
          ++hits;
          if (!payload_valid(*got, other)) ++bad;
        }
      }
    });
  }
  for (auto& th : threads) th.join();

  EXPECT_EQ(bad.load(), 0);
  const BinaryCacheStats s = c.stats();
  EXPECT_EQ(s.writes, std::uint64_t(kThreads * kIters));
  EXPECT_EQ(s.write_failures, 0u);
  EXPECT_EQ(s.corrupt, 0u) << "a reader saw a partially written entry";
  EXPECT_EQ(s.hits, std::uint64_t(hits.load()));
  EXPECT_EQ(s.hits + s.misses, std::uint64_t(kThreads * kIters));
  EXPECT_EQ(count_temp_files(dir_), 0);
  for (int k = 0; k < kKeys; ++k) {
    const std::string key = "kernel-" + std::to_string(k);
    auto got = c.load(key);
    ASSERT_TRUE(got.has_value()) << key;
    EXPECT_TRUE(payload_valid(*got, key)) << key;
  }
}

TEST_F(BinaryCacheConcurrency, ProcessesWriteWhileParentLoads) {
  constexpr int kChildren = 4, kKeys = 50;
  auto key_of = [](int k) { return "shared-kernel-" + std::to_string(k); };
  std::fflush(stdout);  // or children would flush the parent's buffered output again
  std::fflush(stderr);

  std::vector<pid_t> children;
  for (int p = 0; p < kChildren; ++p) {
    const pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      BinaryCache c(dir_);
      for (int i = 0; i < kKeys; ++i) {
        const int k = i;  // same order in every child: writers of one key collide in time
        const std::size_t size = 200000 + std::size_t(p) * 50000 + std::size_t(k) * 997;
        const std::string tag = "proc" + std::to_string(p);
        c.store(key_of(k), make_payload(key_of(k), tag, size, char('A' + p)));
      }
      const BinaryCacheStats s = c.stats();
      ::_exit(s.writes == kKeys && s.write_failures == 0 ? 0 : 1);  // skip gtest's atexit work
    }
    children.push_back(pid);
  }

  BinaryCache c(dir_);
  int torn = 0, running = kChildren;
  std::uint64_t loads = 0;
  while (running > 0) {
    for (int k = 0; k < kKeys; ++k, ++loads)
      if (auto got = c.load(key_of(k)); got && !payload_valid(*got, key_of(k))) ++torn;
    for (pid_t& pid : children) {
      int status = 0;
      if (pid > 0 && ::waitpid(pid, &status, WNOHANG) == pid) {
        EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child failed to write";
        pid = -1;
        --running;
      }
    }
  }
  EXPECT_EQ(torn, 0);
  EXPECT_EQ(c.stats().corrupt, 0u) << "the parent saw a partially written entry";
  EXPECT_EQ(c.stats().hits + c.stats().misses, loads);

  c.reset_stats();
  for (int k = 0; k < kKeys; ++k) {
    auto got = c.load(key_of(k));
    ASSERT_TRUE(got.has_value()) << key_of(k);
    EXPECT_TRUE(payload_valid(*got, key_of(k))) << key_of(k);
  }
  expect_stats(c, kKeys, 0, 0, 0, 0);
  EXPECT_EQ(count_temp_files(dir_), 0);
}

}  // namespace
}  // namespace fp8jit
