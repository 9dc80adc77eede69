#include "runtime/jit/binary_cache.hpp"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "fp8jit/error.hpp"
#include "common/file_io.hpp"
#include "common/hash.hpp"
#include "common/log.hpp"

namespace fp8jit {
namespace {

constexpr std::string_view kMagic = "FP8JITC1";
constexpr std::uint32_t kFormatVersion = 1;
constexpr std::uint64_t kPrefixSize = 8 + 4 + 8;  // magic, version, key size
constexpr std::uint64_t kSuffixSize = 8 + 8;      // payload size, payload checksum

void put_le(std::string& out, std::uint64_t v, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

std::uint64_t get_le(const char* p, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= std::uint64_t(static_cast<unsigned char>(p[i])) << (8 * i);
  return v;
}

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorKind::io, what + " '" + path + "': " + io::errno_text(err));
}

// Parses and verifies one entry. Any mismatch (size, magic, version, key, checksum) => nullopt.
std::optional<std::string> read_entry(int fd, std::uint64_t file_size, std::string_view key) {
  char prefix[kPrefixSize];
  if (file_size < kPrefixSize || !io::read_exact(fd, prefix, kPrefixSize)) return std::nullopt;
  if (std::string_view(prefix, kMagic.size()) != kMagic) return std::nullopt;
  if (get_le(prefix + 8, 4) != kFormatVersion) return std::nullopt;
  if (get_le(prefix + 12, 8) != key.size()) return std::nullopt;

  // Checked before reading the key so a short file never costs a long read.
  const std::uint64_t fixed = kPrefixSize + key.size() + kSuffixSize;
  if (file_size < fixed) return std::nullopt;
  std::string stored_key(key.size(), '\0');
  if (!io::read_exact(fd, stored_key.data(), key.size()) || stored_key != key) return std::nullopt;

  char suffix[kSuffixSize];
  if (!io::read_exact(fd, suffix, kSuffixSize)) return std::nullopt;
  const std::uint64_t payload_size = get_le(suffix, 8);
  // Written as a subtraction so a huge bogus size cannot overflow into a match.
  if (payload_size != file_size - fixed) return std::nullopt;
  std::string payload(payload_size, '\0');
  if (!io::read_exact(fd, payload.data(), payload_size)) return std::nullopt;
  if (stable_hash64(payload) != get_le(suffix + 8, 8)) return std::nullopt;
  return payload;
}

// Deletes a bad entry, but only if the path still names the file we read: another process may
// have renamed a fresh valid entry over it in the meantime, and that one must survive.
void remove_if_unchanged(const std::string& path, const struct stat& seen) {
  struct stat now {};
  if (::stat(path.c_str(), &now) == 0 && now.st_dev == seen.st_dev && now.st_ino == seen.st_ino)
    ::unlink(path.c_str());
}

// mkdir -p that tolerates other processes creating the same directories concurrently.
void make_dirs(const std::string& path) {
  for (std::size_t pos = path.find('/', 1);; pos = path.find('/', pos + 1)) {
    const std::string part = path.substr(0, pos);
    if (!part.empty() && ::mkdir(part.c_str(), 0755) != 0) {
      // EEXIST is the common case; other errors (EACCES, EROFS) are fine too when the directory
      // already exists, e.g. a read-only parent of a writable cache.
      const int err = errno;
      struct stat st {};
      if (::stat(part.c_str(), &st) != 0) throw_io("cannot create cache directory", part, err);
      if (!S_ISDIR(st.st_mode)) throw_io("cache path is not a directory", part, ENOTDIR);
    }
    if (pos == std::string::npos) break;
  }
}

std::string encode_header(std::string_view key, std::string_view payload) {
  std::string h;
  h.reserve(kPrefixSize + key.size() + kSuffixSize);
  h.append(kMagic);
  put_le(h, kFormatVersion, 4);
  put_le(h, key.size(), 8);
  h.append(key);
  put_le(h, payload.size(), 8);
  put_le(h, stable_hash64(payload), 8);
  return h;
}

// Why a file that is not ours sits where an entry would be; empty when nothing or a regular file
// is there. Such a file is never read, replaced or removed: only its owner may do that.
std::string foreign_entry(const std::string& path, std::string_view action) {
  const std::string kind = special_file_kind(path);
  if (kind.empty()) return {};
  return fmt::format(
      "binary cache entry {} is {}, not a file fp8jit wrote; {} (remove it to let the cache use "
      "this entry)",
      printable(path, 4096), kind, action);
}

}  // namespace

BinaryCache::BinaryCache(std::string dir) : dir_(std::move(dir)) {}

std::string BinaryCache::path_for(std::string_view key) const {
  if (dir_.empty()) return {};
  const std::string h = hex64(stable_hash64(key));
  return dir_ + "/" + h.substr(0, 2) + "/" + h + ".cubin";
}

std::optional<std::string> BinaryCache::load(std::string_view key, bool count_miss) {
  if (dir_.empty()) {
    misses_.fetch_add(count_miss ? 1 : 0, std::memory_order_relaxed);
    return std::nullopt;
  }
  const std::string path = path_for(key);
  // O_NONBLOCK: a FIFO at the entry's path would otherwise block open() until a writer comes.
  io::Fd fd(io::open_retry(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    // Absent: a plain miss, nothing to clean up. Otherwise (no permission, or a socket, which
    // fails open with ENXIO) foreign_miss() tells a file that is not ours from a plain miss.
    if (err != ENOENT) return foreign_miss(path, count_miss);
    misses_.fetch_add(count_miss ? 1 : 0, std::memory_order_relaxed);
    return std::nullopt;
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) {
    misses_.fetch_add(count_miss ? 1 : 0, std::memory_order_relaxed);
    return std::nullopt;
  }
  if (!S_ISREG(st.st_mode)) return foreign_miss(path, count_miss);
  std::optional<std::string> payload =
      read_entry(fd.get(), static_cast<std::uint64_t>(st.st_size), key);
  if (!payload) {
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    misses_.fetch_add(count_miss ? 1 : 0, std::memory_order_relaxed);
    remove_if_unchanged(path, st);
    return std::nullopt;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return payload;
}

std::optional<std::string> BinaryCache::foreign_miss(const std::string& path, bool count_miss) {
  misses_.fetch_add(count_miss ? 1 : 0, std::memory_order_relaxed);
  const std::string why = foreign_entry(path, "left alone and read as a miss");
  if (!why.empty()) {
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    log::at(log::warning, "{}", why);
  }
  return std::nullopt;
}

void BinaryCache::store(std::string_view key, std::string_view payload) {
  if (dir_.empty()) return;
  const std::string path = path_for(key);
  try {
    const std::string sub = io::parent_of(path);
    make_dirs(sub);
    // A rename would replace a FIFO or socket there; like load(), leave what is not ours alone.
    if (std::string why = foreign_entry(path, "not replaced"); !why.empty())
      throw Error(ErrorKind::io, why);
    const std::string temp = io::temp_name_for(path);
    if (auto f = io::write_new_file(temp, {encode_header(key, payload), payload}, 0644))
      throw_io(fmt::format("cannot {} cache file", f->step), temp, f->err);
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(temp.c_str());
      throw_io("cannot rename cache file to", path, err);
    }
    io::fsync_dir(sub);
    writes_.fetch_add(1, std::memory_order_relaxed);
  } catch (const std::exception& e) {
    // Includes bad_alloc and random_device failures: a cache write is never worth an exception.
    write_failures_.fetch_add(1, std::memory_order_relaxed);
    log::at(log::warning, "binary cache write skipped: {} (continuing without it)", e.what());
  }
}

BinaryCacheStats BinaryCache::stats() const {
  BinaryCacheStats s;
  s.hits = hits_.load(std::memory_order_relaxed);
  s.misses = misses_.load(std::memory_order_relaxed);
  s.writes = writes_.load(std::memory_order_relaxed);
  s.corrupt = corrupt_.load(std::memory_order_relaxed);
  s.write_failures = write_failures_.load(std::memory_order_relaxed);
  return s;
}

void BinaryCache::reset_stats() {
  for (auto* c : {&hits_, &misses_, &writes_, &corrupt_, &write_failures_})
    c->store(0, std::memory_order_relaxed);
}

}  // namespace fp8jit
