// Reading input files and writing output files without the classic traps: a FIFO or device that
// blocks the process forever, a directory read as "unexpected end of input", an output left
// half-written by a failure, or one output of a command written while another failed.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fp8jit {

// "" for a regular file (or a symbolic link to one) and for a missing path; otherwise what is
// there: "a directory", "a FIFO", "a socket", "a character device", "a block device",
// "a symbolic link to nothing", "a symbolic link loop", "a special file". Uses stat, never open,
// so asking about a FIFO or device cannot block or trigger anything.
std::string special_file_kind(const std::string& path);

// The whole content of a regular file. Throws Error(io) "WHAT PATH: REASON", REASON being e.g.
// "no such file", "is a directory, expected a file", "is a FIFO, not a regular file",
// "permission denied" or "larger than 64 MiB". The file is opened non-blocking and checked to be
// a regular file before any read, so a FIFO or device path fails at once instead of hanging.
std::string read_regular_file(const std::string& path, std::string_view what,
                              std::size_t max_bytes = std::size_t{64} << 20);

// The output files of one command, written all or nothing. add() stages a file and checks its
// target at once (not a directory, FIFO or device; its folder exists), so a bad path fails before
// any work is spent on the outputs. commit() writes every file to a temporary name in its
// target's folder and renames them into place only once all were written and synced; on failure
// every temporary is removed and Error(io) names the file and the reason. Nothing at the target
// paths changes unless commit() succeeds (up to a target replaced by a directory between the
// check and the rename). An existing target keeps its permission bits.
class OutputFiles {
 public:
  OutputFiles() = default;
  OutputFiles(const OutputFiles&) = delete;
  OutputFiles& operator=(const OutputFiles&) = delete;
  ~OutputFiles();  // removes the temporaries of an interrupted commit

  // Throws Error(io) for a bad target, Error(invalid_argument) for a path added twice.
  void add(std::string path, std::string data);
  // Writes everything staged; afterwards the set is empty and can be reused.
  void commit();
  std::size_t size() const { return files_.size(); }

 private:
  struct Staged {
    std::string path, data, temp;  // temp: non-empty while a temporary exists on disk
  };
  void write_temp(Staged& f);
  void remove_temps() noexcept;
  std::vector<Staged> files_;
};

// Text safe to put in a message or a terminal: printable ASCII is kept, every other byte (control
// bytes, ESC, DEL, bytes >= 0x80) becomes \xNN. The result is cut to at most `max` characters
// plus "..." when the text did not fit.
std::string printable(std::string_view text, std::size_t max = 200);

// Low-level pieces shared by the writers above and the binary cache.
namespace io {

// Owns a file descriptor so that every early return closes it.
class Fd {
 public:
  explicit Fd(int fd) : fd_(fd) {}
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd() { close_now(); }
  int get() const { return fd_; }
  int close_now();  // close()'s result, so a writer sees deferred write errors

 private:
  int fd_;
};

// open(2), retried on EINTR.
int open_retry(const std::string& path, int flags, mode_t mode = 0);
// Reads exactly n bytes. False on error or early end of file.
bool read_exact(int fd, char* buf, std::uint64_t n);
// Writes all of data despite short writes and signals; false with errno set on failure.
bool write_all(int fd, std::string_view data);
// A short lowercase reason for errno `err`, e.g. "no such file", "permission denied".
std::string errno_text(int err);
// The folder of `path` ("." for a bare name, "/" for a file in the root).
std::string parent_of(const std::string& path);
// A fresh name beside final_path, unique among live writers of any thread or process.
std::string temp_name_for(const std::string& final_path);

struct WriteFailure {
  const char* step;  // "create", "write", "fsync" or "close"
  int err;           // errno
};
// Creates `path` (O_EXCL: it must not exist, so a file someone else made is never written or
// removed), writes the parts in order, fsyncs and closes it. On failure the file is removed.
std::optional<WriteFailure> write_new_file(const std::string& path,
                                           std::initializer_list<std::string_view> parts,
                                           mode_t mode);
// Makes renames in `dir` durable. Best effort.
void fsync_dir(const std::string& dir);

// An exclusive lock on the file `path` (created, with its folder, if missing) held for the
// object's life: flock(2), so the system releases it when the holder dies, and two opens in one
// process exclude each other too. Waits for the lock. locked() is false where the file could not
// be created or locked (a read-only cache, say): the caller goes on without it.
class FileLock {
 public:
  explicit FileLock(const std::string& path);
  ~FileLock();
  FileLock(const FileLock&) = delete;
  FileLock& operator=(const FileLock&) = delete;
  bool locked() const { return fd_ >= 0; }

 private:
  int fd_ = -1;
};

}  // namespace io
}  // namespace fp8jit
