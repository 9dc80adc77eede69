#include "binary_cache.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>

#include <cstdio>
#include <cstring>
#include <functional>
#include <random>
#include <system_error>
#include <thread>
#include <utility>

#include "fp8jit/error.hpp"
#include "hash.hpp"
#include "log.hpp"

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

std::string errno_text(int err) { return std::error_code(err, std::system_category()).message(); }

[[noreturn]] void throw_io(const std::string& what, const std::string& path, int err) {
  throw Error(ErrorKind::io, what + " '" + path + "': " + errno_text(err));
}

// Owns a file descriptor so that every early return closes it.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { close_now(); }
  int get() const { return fd_; }
  int close_now() {  // returns close()'s result so the writer can see deferred write errors
    int rc = 0;
    if (fd_ >= 0) rc = ::close(fd_);
    fd_ = -1;
    return rc;
  }

 private:
  int fd_;
};

int open_retry(const char* path, int flags, mode_t mode = 0) {
  int fd;
  do fd = ::open(path, flags, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

// Reads exactly n bytes. False on error or early end of file (a truncated entry).
bool read_exact(int fd, char* buf, std::uint64_t n) {
  while (n > 0) {
    ssize_t got = ::read(fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<std::uint64_t>(got);
  }
  return true;
}

// Writes all n bytes despite short writes and signals; false with errno set on failure.
bool write_all(int fd, const char* buf, std::size_t n) {
  while (n > 0) {
    ssize_t put = ::write(fd, buf, n);
    if (put < 0 && errno == EINTR) continue;
    if (put < 0) return false;
    if (put == 0) {  // should not happen for regular files; avoid spinning forever
      errno = EIO;
      return false;
    }
    buf += put;
    n -= static_cast<std::size_t>(put);
  }
  return true;
}

// Parses and verifies one entry. Any mismatch (size, magic, version, key, checksum) => nullopt.
std::optional<std::string> read_entry(int fd, std::uint64_t file_size, std::string_view key) {
  char prefix[kPrefixSize];
  if (file_size < kPrefixSize || !read_exact(fd, prefix, kPrefixSize)) return std::nullopt;
  if (std::string_view(prefix, kMagic.size()) != kMagic) return std::nullopt;
  if (get_le(prefix + 8, 4) != kFormatVersion) return std::nullopt;
  if (get_le(prefix + 12, 8) != key.size()) return std::nullopt;

  // Checked before reading the key so a short file never costs a long read.
  const std::uint64_t fixed = kPrefixSize + key.size() + kSuffixSize;
  if (file_size < fixed) return std::nullopt;
  std::string stored_key(key.size(), '\0');
  if (!read_exact(fd, stored_key.data(), key.size()) || stored_key != key) return std::nullopt;

  char suffix[kSuffixSize];
  if (!read_exact(fd, suffix, kSuffixSize)) return std::nullopt;
  const std::uint64_t payload_size = get_le(suffix, 8);
  // Written as a subtraction so a huge bogus size cannot overflow into a match.
  if (payload_size != file_size - fixed) return std::nullopt;
  std::string payload(payload_size, '\0');
  if (!read_exact(fd, payload.data(), payload_size)) return std::nullopt;
  if (fnv1a64(payload) != get_le(suffix + 8, 8)) return std::nullopt;
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

// pid + thread + counter already make the name unique among live writers; the random part guards
// against pid reuse meeting a stale temp file left by a crashed process.
std::string temp_name_for(const std::string& final_path) {
  static std::atomic<std::uint64_t> counter{0};
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const auto tid = std::hash<std::thread::id>{}(std::this_thread::get_id());
  return fmt::format("{}.tmp.{}.{:x}.{}.{:016x}", final_path, ::getpid(), tid,
                     counter.fetch_add(1, std::memory_order_relaxed), rng());
}

std::string encode_header(std::string_view key, std::string_view payload) {
  std::string h;
  h.reserve(kPrefixSize + key.size() + kSuffixSize);
  h.append(kMagic);
  put_le(h, kFormatVersion, 4);
  put_le(h, key.size(), 8);
  h.append(key);
  put_le(h, payload.size(), 8);
  put_le(h, fnv1a64(payload), 8);
  return h;
}

// Returns an empty string on success, else what failed. The temp file is removed on failure; it
// is only unlinked once we know we created it (O_EXCL), never someone else's.
std::string write_file_durably(const std::string& path, std::string_view header,
                               std::string_view payload) {
  Fd fd(open_retry(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
  if (fd.get() < 0) {
    const int err = errno;
    return "cannot create '" + path + "': " + errno_text(err);
  }
  const char* failed = nullptr;
  if (!write_all(fd.get(), header.data(), header.size()) ||
      !write_all(fd.get(), payload.data(), payload.size()))
    failed = "cannot write";
  // Without fsync a crash after the rename could leave a named but empty or partial file.
  else if (::fsync(fd.get()) != 0)
    failed = "cannot fsync";
  else if (fd.close_now() != 0)
    failed = "cannot close";
  if (!failed) return {};
  const int err = errno;
  const std::string why = std::string(failed) + " '" + path + "': " + errno_text(err);
  fd.close_now();
  ::unlink(path.c_str());
  return why;
}

// Makes the rename itself durable. Best effort: the entry is already valid without it.
void fsync_dir(const std::string& dir) {
  Fd fd(open_retry(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

std::string parent_of(const std::string& path) { return path.substr(0, path.rfind('/')); }

}  // namespace

BinaryCache::BinaryCache(std::string dir) : dir_(std::move(dir)) {}

std::string BinaryCache::path_for(std::string_view key) const {
  if (dir_.empty()) return {};
  const std::string h = hex64(fnv1a64(key));
  return dir_ + "/" + h.substr(0, 2) + "/" + h + ".cubin";
}

std::optional<std::string> BinaryCache::load(std::string_view key) {
  if (dir_.empty()) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  const std::string path = path_for(key);
  Fd fd(open_retry(path.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  // Absent or unreadable: a plain miss, nothing to clean up.
  if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0) {
    misses_.fetch_add(1, std::memory_order_relaxed);
    return std::nullopt;
  }
  std::optional<std::string> payload;
  if (S_ISREG(st.st_mode))
    payload = read_entry(fd.get(), static_cast<std::uint64_t>(st.st_size), key);
  if (!payload) {
    corrupt_.fetch_add(1, std::memory_order_relaxed);
    misses_.fetch_add(1, std::memory_order_relaxed);
    remove_if_unchanged(path, st);
    return std::nullopt;
  }
  hits_.fetch_add(1, std::memory_order_relaxed);
  return payload;
}

void BinaryCache::store(std::string_view key, std::string_view payload) {
  if (dir_.empty()) return;
  const std::string path = path_for(key);
  try {
    const std::string sub = parent_of(path);
    make_dirs(sub);
    const std::string temp = temp_name_for(path);
    const std::string why = write_file_durably(temp, encode_header(key, payload), payload);
    if (!why.empty()) throw Error(ErrorKind::io, why);
    if (::rename(temp.c_str(), path.c_str()) != 0) {
      const int err = errno;
      ::unlink(temp.c_str());
      throw_io("cannot rename cache file to", path, err);
    }
    fsync_dir(sub);
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
