#include "common/file_io.hpp"

#include <errno.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <filesystem>
#include <functional>
#include <random>
#include <set>
#include <system_error>
#include <thread>
#include <utility>

#include "fp8jit/error.hpp"

namespace fp8jit {
namespace {

// Paths in messages are escaped (a name may hold control bytes) but kept whole up to PATH_MAX.
constexpr std::size_t kShownPath = 4096;

std::string shown(const std::string& path) {
  return printable(path, kShownPath);
}

std::string kind_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a special file";
}

// The reason a non-regular `kind` cannot be read as a file.
std::string not_regular(const std::string& kind) {
  if (kind == "a directory") return "is a directory, expected a file";
  return "is " + kind + ", not a regular file";
}

std::string size_limit(std::size_t max_bytes) {
  constexpr std::size_t kMiB = std::size_t{1} << 20;
  if (max_bytes >= kMiB && max_bytes % kMiB == 0) return fmt::format("{} MiB", max_bytes / kMiB);
  return fmt::format("{} bytes", max_bytes);
}

Error cannot_write(const std::string& path, const std::string& reason) {
  return Error(ErrorKind::io, fmt::format("cannot write {}: {}", shown(path), reason));
}

// The target must be a regular file or absent, and its folder an existing, writable directory:
// checked before any output is written so that one bad path fails the command up front.
void check_target(const std::string& path) {
  const std::string kind = special_file_kind(path);
  if (kind == "a directory") throw cannot_write(path, "it is a directory; give a file path");
  if (!kind.empty())
    throw cannot_write(
        path, fmt::format("it is {}, not a regular file; remove it or give another path", kind));
  const std::string dir = io::parent_of(path);
  struct stat st {};
  if (::stat(dir.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT)
      throw cannot_write(path,
                         fmt::format("its folder {} does not exist; create it first", shown(dir)));
    throw cannot_write(path, fmt::format("its folder {}: {}", shown(dir), io::errno_text(err)));
  }
  if (!S_ISDIR(st.st_mode))
    throw cannot_write(path, fmt::format("{} is not a directory", shown(dir)));
  if (::access(dir.c_str(), W_OK | X_OK) != 0) {
    const int err = errno;
    if (err == EACCES || err == EROFS)
      throw cannot_write(path, fmt::format("{} (in folder {})", io::errno_text(err), shown(dir)));
  }
}

// A symbolic link to a file is written through, as opening it would have, rather than replaced
// by a regular file.
std::string resolve_link(std::string path) {
  struct stat st {};
  if (::lstat(path.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) return path;
  char* real = ::realpath(path.c_str(), nullptr);
  if (!real) return path;
  std::string out(real);
  ::free(real);
  return out;
}

}  // namespace

std::string special_file_kind(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) return kind_of_mode(st.st_mode);
  const int err = errno;
  if (err == ELOOP) return "a symbolic link loop";
  if (err == ENOENT && ::lstat(path.c_str(), &st) == 0 && S_ISLNK(st.st_mode))
    return "a symbolic link to nothing";
  return "";
}

std::string read_regular_file(const std::string& path, std::string_view what,
                              std::size_t max_bytes) {
  auto fail = [&](const std::string& reason) {
    const std::string subject =
        what.empty() ? shown(path) : fmt::format("{} {}", what, shown(path));
    return Error(ErrorKind::io, subject + ": " + reason);
  };
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever.
  io::Fd fd(io::open_retry(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC));
  if (fd.get() < 0) {
    const int err = errno;
    const std::string kind = special_file_kind(path);  // e.g. a socket fails open with ENXIO
    throw fail(kind.empty() ? io::errno_text(err) : not_regular(kind));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw fail(io::errno_text(errno));
  if (!S_ISREG(st.st_mode)) throw fail(not_regular(kind_of_mode(st.st_mode)));
  const std::string too_large = "larger than " + size_limit(max_bytes);
  if (static_cast<std::uint64_t>(st.st_size) > max_bytes) throw fail(too_large);

  std::string data;
  data.reserve(static_cast<std::size_t>(st.st_size));
  char buf[1 << 16];
  for (;;) {  // to the end of file, not st_size: the file may change while it is read
    const ssize_t got = ::read(fd.get(), buf, sizeof buf);
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) throw fail("cannot read it: " + io::errno_text(errno));
    if (got == 0) break;
    if (data.size() + static_cast<std::size_t>(got) > max_bytes) throw fail(too_large);
    data.append(buf, static_cast<std::size_t>(got));
  }
  return data;
}

OutputFiles::~OutputFiles() {
  remove_temps();
}

void OutputFiles::add(std::string path, std::string data) {
  if (path.empty())
    throw Error(ErrorKind::invalid_argument, "cannot write an empty path; give a file name");
  path = resolve_link(std::move(path));
  for (const Staged& f : files_)
    if (f.path == path)
      throw Error(ErrorKind::invalid_argument,
                  fmt::format("cannot write {} twice in one command; give each output its own path",
                              shown(path)));
  check_target(path);
  files_.push_back({std::move(path), std::move(data), {}});
}

void OutputFiles::write_temp(Staged& f) {
  check_target(f.path);  // again: the target may have changed since add()
  mode_t mode = 0666;    // what a plain open(O_CREAT) would give, umask applied
  struct stat st {};
  const bool existed = ::stat(f.path.c_str(), &st) == 0;
  if (existed) mode = st.st_mode & 07777;
  const std::string temp = io::temp_name_for(f.path);
  if (auto failure = io::write_new_file(temp, {f.data}, mode)) {
    const std::string reason = io::errno_text(failure->err);
    const std::string step = failure->step;
    throw cannot_write(f.path,
                       step == "create" || step == "write" ? reason : step + " failed: " + reason);
  }
  f.temp = temp;  // only now: a temp name we did not create must never be removed
  if (existed) ::chmod(temp.c_str(), mode);  // keep e.g. 0600 on a private file despite the umask
}

void OutputFiles::commit() {
  try {
    for (Staged& f : files_) write_temp(f);
    for (Staged& f : files_) {
      if (::rename(f.temp.c_str(), f.path.c_str()) != 0)
        throw cannot_write(f.path, io::errno_text(errno));
      f.temp.clear();
    }
  } catch (...) {
    remove_temps();
    throw;
  }
  std::set<std::string> dirs;
  for (const Staged& f : files_) dirs.insert(io::parent_of(f.path));
  for (const std::string& d : dirs) io::fsync_dir(d);
  files_.clear();
}

void OutputFiles::remove_temps() noexcept {
  for (Staged& f : files_) {
    if (!f.temp.empty()) ::unlink(f.temp.c_str());
    f.temp.clear();
  }
}

std::string printable(std::string_view text, std::size_t max) {
  std::string out;
  for (const char ch : text) {
    const auto c = static_cast<unsigned char>(ch);
    const bool plain = c >= 0x20 && c < 0x7f;
    if (out.size() + (plain ? 1 : 4) > max) return out + "...";
    if (plain)
      out += ch;
    else
      out += fmt::format("\\x{:02x}", c);
  }
  return out;
}

namespace io {

int Fd::close_now() {
  int rc = 0;
  if (fd_ >= 0) rc = ::close(fd_);
  fd_ = -1;
  return rc;
}

int open_retry(const std::string& path, int flags, mode_t mode) {
  int fd;
  do fd = ::open(path.c_str(), flags, mode);
  while (fd < 0 && errno == EINTR);
  return fd;
}

bool read_exact(int fd, char* buf, std::uint64_t n) {
  while (n > 0) {
    const ssize_t got = ::read(fd, buf, n);
    if (got < 0 && errno == EINTR) continue;
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<std::uint64_t>(got);
  }
  return true;
}

bool write_all(int fd, std::string_view data) {
  const char* buf = data.data();
  std::size_t n = data.size();
  while (n > 0) {
    const ssize_t put = ::write(fd, buf, n);
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

std::string errno_text(int err) {
  switch (err) {
    case ENOENT:
      return "no such file";
    case EACCES:
    case EPERM:
      return "permission denied";
    case EISDIR:
      return "is a directory";
    case ENOTDIR:
      return "a folder in the path is not a directory";
    case ELOOP:
      return "too many levels of symbolic links";
    case ENAMETOOLONG:
      return "file name too long";
    case EROFS:
      return "read-only file system";
    case ENOSPC:
      return "no space left on device";
    case EDQUOT:
      return "disk quota exceeded";
    case EMFILE:
    case ENFILE:
      return "too many open files";
    default:
      break;
  }
  std::string text = std::error_code(err, std::system_category()).message();
  if (!text.empty()) text[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(text[0])));
  return text;
}

std::string parent_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  if (slash == 0) return "/";
  return path.substr(0, slash);
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

std::optional<WriteFailure> write_new_file(const std::string& path,
                                           std::initializer_list<std::string_view> parts,
                                           mode_t mode) {
  Fd fd(open_retry(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
  if (fd.get() < 0) return WriteFailure{"create", errno};
  const char* failed = nullptr;
  for (std::string_view part : parts)
    if (!failed && !write_all(fd.get(), part)) failed = "write";
  // Without fsync a crash after the rename could leave a named but empty or partial file.
  if (!failed && ::fsync(fd.get()) != 0) failed = "fsync";
  if (!failed && fd.close_now() != 0) failed = "close";
  if (!failed) return std::nullopt;
  const int err = errno;
  fd.close_now();
  ::unlink(path.c_str());
  return WriteFailure{failed, err};
}

FileLock::FileLock(const std::string& path) {
  std::error_code ec;
  std::filesystem::create_directories(parent_of(path), ec);
  const int fd = open_retry(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) return;
  int r;
  do r = ::flock(fd, LOCK_EX);
  while (r != 0 && errno == EINTR);
  if (r != 0) {
    ::close(fd);
    return;
  }
  fd_ = fd;
}

FileLock::~FileLock() {
  if (fd_ >= 0) ::close(fd_);  // closing the only descriptor releases the flock
}

void fsync_dir(const std::string& dir) {
  Fd fd(open_retry(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (fd.get() >= 0) ::fsync(fd.get());
}

}  // namespace io
}  // namespace fp8jit
