// The tuning database's path, checked before SQLite sees it, and its sidecar lock file.
#include <fcntl.h>
#include <fmt/format.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <system_error>
#include <thread>

#include "autotune/tuning_db_internal.hpp"
#include "common/log.hpp"

namespace fp8jit::tuning_db_detail {

namespace fs = std::filesystem;

namespace {

std::string errno_text(int err) {
  return std::error_code(err, std::generic_category()).message();
}

std::string folder_of(const std::string& path) {
  const fs::path parent = fs::path(path).parent_path();
  return parent.empty() ? "." : parent.string();
}

// 0 when this process (its effective user) may access `path` as `mode`; otherwise the errno.
int access_error(const std::string& path, int mode) {
  return ::faccessat(AT_FDCWD, path.c_str(), mode, AT_EACCESS) == 0 ? 0 : errno;
}

const char* kind_of(mode_t mode) {
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "a special file";
}

[[noreturn]] void cannot_create(const std::string& path, const std::string& dir, int err) {
  throw Error(ErrorKind::io,
              fmt::format("cannot create {}: folder {} is not writable ({}); make it "
                          "writable or point FP8JIT_DB / --db at a file in another folder",
                          path, dir, errno_text(err)));
}

void check_existing(const std::string& path, const struct stat& st) {
  if (S_ISDIR(st.st_mode))
    throw Error(ErrorKind::io,
                fmt::format("{} is a directory; FP8JIT_DB / --db must name a file", path));
  if (!S_ISREG(st.st_mode))
    throw Error(ErrorKind::io,
                fmt::format("{} is {}, not a regular file; FP8JIT_DB / --db must name a file", path,
                            kind_of(st.st_mode)));
  for (const auto& [mode, what] : {std::pair{W_OK, "writable"}, std::pair{R_OK, "readable"}})
    if (const int err = access_error(path, mode))
      throw Error(ErrorKind::io,
                  fmt::format("{} is not {} ({}); fix its permissions or point FP8JIT_DB / "
                              "--db at another file",
                              path, what, errno_text(err)));
  const std::string dir = folder_of(path);
  if (const int err = access_error(dir, W_OK | X_OK))
    throw Error(
        ErrorKind::io,
        fmt::format("{}: folder {} is not writable ({}), but the tuning database runs in WAL mode "
                    "and needs to create {}-wal, {}-shm and {}.lock beside it; make the folder "
                    "writable or point FP8JIT_DB / --db at a file in another folder",
                    path, dir, errno_text(err), path, path, path));
}

// SQLite would create a dangling link's target, wherever it points: refused instead.
void refuse_dangling_link(const std::string& path) {
  std::error_code ec;
  if (!fs::is_symlink(fs::symlink_status(path, ec))) return;
  const fs::path target = fs::read_symlink(path, ec);
  throw Error(ErrorKind::io,
              fmt::format("{} is a symbolic link to nothing ({} does not exist); create its "
                          "target, remove the link or point FP8JIT_DB / --db at another file",
                          path, ec ? "its target" : target.string()));
}

// For a missing database: its folder must exist (it is created here) and accept new files.
void prepare_folder(const std::string& path) {
  const std::string dir = folder_of(path);
  fs::path at = dir;  // the deepest folder on the way that exists
  struct stat st;
  while (::stat(at.c_str(), &st) != 0) {
    const int err = errno;
    fs::path up = at.parent_path().empty() ? fs::path(".") : at.parent_path();
    if (err != ENOENT || up == at)
      throw Error(ErrorKind::io, fmt::format("cannot create {}: cannot use folder {} ({})", path,
                                             at.string(), errno_text(err)));
    at = up;
  }
  if (!S_ISDIR(st.st_mode))
    throw Error(ErrorKind::io,
                fmt::format("cannot create {}: {} is not a folder; point FP8JIT_DB / --db "
                            "at another file",
                            path, at.string()));
  if (const int err = access_error(at.string(), W_OK | X_OK)) cannot_create(path, at.string(), err);
  std::error_code ec;
  if (at != fs::path(dir) && !fs::create_directories(dir, ec) && ec)
    throw Error(ErrorKind::io, fmt::format("cannot create {}: cannot create folder {} ({})", path,
                                           dir, ec.message()));
}

[[noreturn]] void lock_open_failed(const std::string& path, int err) {
  const std::string lock = path + ".lock";
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) cannot_create(path, folder_of(path), err);
  throw Error(ErrorKind::io,
              fmt::format("cannot open {}, the lock file of tuning database {} ({}); make "
                          "folder {} writable, or remove {} if it is not a file",
                          lock, path, errno_text(err), folder_of(path), lock));
}

// O_NONBLOCK: a FIFO planted at PATH.lock must not hang the open.
int open_lock(const std::string& path, bool& created) {
  const std::string lock = path + ".lock";
  constexpr int kFlags = O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY;
  for (int attempt = 0; attempt < 3; ++attempt) {
    int fd = ::open(lock.c_str(), kFlags | O_CREAT | O_EXCL, 0644);
    created = fd >= 0;
    if (fd < 0 && errno == EEXIST) {
      fd = ::open(lock.c_str(), kFlags);
      if (fd < 0 && errno == ENOENT) continue;  // removed between the two opens: again
    }
    if (fd < 0) lock_open_failed(path, errno);
    struct stat st;
    if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) return fd;
    ::close(fd);
    throw Error(ErrorKind::io,
                fmt::format("{}, the lock file of tuning database {}, is not a regular "
                            "file; remove it",
                            lock, path));
  }
  lock_open_failed(path, ENOENT);
}

// Whether `fd` is still the file named PATH.lock: a refused opener that created it may have
// removed it (drop_created_lock) between our open and our flock, and a lock on a removed file
// keeps no rebuild out.
bool is_current(int fd, const std::string& path) {
  struct stat held, named;
  return ::fstat(fd, &held) == 0 && ::stat((path + ".lock").c_str(), &named) == 0 &&
         held.st_dev == named.st_dev && held.st_ino == named.st_ino;
}

// Takes `how` (LOCK_SH or LOCK_EX) on fd, retrying until `deadline`: 0 once held, otherwise the
// errno (EWOULDBLOCK: still held by others at the deadline).
int flock_until(int fd, int how, std::chrono::steady_clock::time_point deadline) {
  while (::flock(fd, how | LOCK_NB) != 0) {
    const int err = errno;
    if (err == EINTR) continue;
    if (err != EWOULDBLOCK || std::chrono::steady_clock::now() > deadline) return err;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return 0;
}

// Removal and re-creation can only race a few times in a row; past that, use what is held.
constexpr int kReopens = 100;

[[noreturn]] void rebuild_too_long(const std::string& path, int fd) {
  ::close(fd);
  throw Error(ErrorKind::io,
              fmt::format("tuning database {} is being rebuilt by another process ({}.lock is "
                          "held) and it did not finish within {} s; try again when `fp8jit db "
                          "rebuild` is done",
                          path, path, kBusyMs / 1000));
}

[[noreturn]] void lock_failed(const std::string& path, int fd, int err) {
  ::close(fd);
  throw Error(ErrorKind::io,
              fmt::format("tuning database {}: cannot lock {}.lock ({}); rebuild needs flock(2): "
                          "copy the database to a local disk and rebuild it there",
                          path, path, errno_text(err)));
}

}  // namespace

void check_path(const std::string& path) {
  struct stat st;  // stat, not open: opening a FIFO would block
  if (::stat(path.c_str(), &st) == 0) return check_existing(path, st);
  const int err = errno;
  if (err == ENOENT) {
    refuse_dangling_link(path);
    return prepare_folder(path);
  }
  throw Error(ErrorKind::io,
              fmt::format("cannot use {} as the tuning database ({}); point FP8JIT_DB / "
                          "--db at another file",
                          path, errno_text(err)));
}

int lock_shared(const std::string& path, bool& created) {
  // Only rebuild holds it exclusively, and only while it copies the readable rows to a fresh
  // file: wait for that, as long as for any other lock.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(kBusyMs);
  for (int reopen = 0;; ++reopen) {
    const int fd = open_lock(path, created);
    const int err = flock_until(fd, LOCK_SH, deadline);
    if (err == EWOULDBLOCK) rebuild_too_long(path, fd);
    if (err != 0) {
      // A file system without flock (some network ones): work unlocked. Rebuild cannot lock
      // either, so it refuses to move the file rather than risk it.
      log::at(log::warning, "tuning database {}: cannot lock {}.lock ({}); using it unlocked", path,
              path, errno_text(err));
      return fd;
    }
    if (is_current(fd, path) || reopen == kReopens) return fd;
    ::close(fd);
  }
}

int try_lock_exclusive(const std::string& path) {
  for (int reopen = 0;; ++reopen) {
    bool created = false;
    const int fd = open_lock(path, created);
    if (const int err = flock_until(fd, LOCK_EX, std::chrono::steady_clock::now())) {
      if (err != EWOULDBLOCK) lock_failed(path, fd, err);
      ::close(fd);
      return -1;
    }
    if (is_current(fd, path) || reopen == kReopens) return fd;
    ::close(fd);
  }
}

// Removed only under the exclusive lock, and only while it is the file that fd locks: a
// connection that locked it meanwhile keeps it (LOCK_NB fails), and one that opened it but
// locks it only after the removal sees that (is_current) and opens the new one. flock converts
// a shared lock to an exclusive one non-atomically: where that fails the shared lock may be
// gone, which a refused open no longer needs.
void drop_created_lock(const std::string& path, int fd) {
  if (fd >= 0 && ::flock(fd, LOCK_EX | LOCK_NB) == 0 && is_current(fd, path))
    ::unlink((path + ".lock").c_str());
  unlock(fd);
}

void unlock(int fd) {
  if (fd >= 0) ::close(fd);
}

}  // namespace fp8jit::tuning_db_detail
