// On-disk cache of compiled cubins, shared by every process that points at the same directory.
//
// A cache must never make the operation it speeds up fail or return wrong code, so: every file is
// verified in full before use (anything odd is a miss), writes are atomic (temp file + fsync +
// rename), and write failures only warn.
//
// File layout (integers little-endian):
//   "FP8JITC1" | u32 format version | u64 key size | key bytes | u64 payload size |
//   u64 stable_hash64(payload) | payload
// The full key is stored so that two keys whose hashes collide on a file name read as a miss,
// never as each other's binary.
#pragma once

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace fp8jit {

struct BinaryCacheStats {
  std::uint64_t hits = 0, misses = 0, writes = 0, corrupt = 0, write_failures = 0;
};

class BinaryCache {
 public:
  // dir empty => disabled (load always misses, store does nothing). The directory is created on
  // first store.
  explicit BinaryCache(std::string dir);

  // key: the full key material (arbitrary bytes, may be long). Returns the payload if a file for
  // this key exists and verifies; a truncated, corrupted or foreign file counts as `corrupt` (and
  // a miss), is removed best-effort, and is never returned. Something that is not a regular file
  // at the entry's path (a directory, FIFO, socket, device) is not ours: it counts as `corrupt`,
  // is warned about and left in place, and is never opened in a way that could block.
  // count_miss false: a second look after a first that missed (waiting for another process's
  // compile) counts a hit but not a second miss.
  std::optional<std::string> load(std::string_view key, bool count_miss = true);

  // Atomic: unique temp file in the same directory, fsync, rename over the final name. Concurrent
  // writers (threads or processes) never expose a partial file; the last rename wins. Failures are
  // counted in write_failures and warned about on stderr, never thrown; a directory, FIFO or
  // other non-regular file at the entry's path is such a failure and is left in place.
  void store(std::string_view key, std::string_view payload);

  // <dir>/<2 hex>/<16 hex of stable_hash64(key)>.cubin; empty when the cache is disabled.
  std::string path_for(std::string_view key) const;
  const std::string& dir() const { return dir_; }

  BinaryCacheStats stats() const;  // thread-safe; each counter is read atomically
  void reset_stats();

 private:
  std::optional<std::string> foreign_miss(const std::string& path, bool count_miss);  // counts and warns

  std::string dir_;
  std::atomic<std::uint64_t> hits_{0}, misses_{0}, writes_{0}, corrupt_{0}, write_failures_{0};
};

}  // namespace fp8jit
