// Progress of a long command (tune, precompile, compile-all, demo) on stderr: one line rewritten
// in place on a terminal, plain lines without '\r' (a few per run) when stderr is a log or a pipe,
// both with the count, the elapsed time and an estimate of the time left.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdio>
#include <mutex>
#include <string>
#include <string_view>

namespace fp8jit::cli {

class Progress {
 public:
  // `what` names the work ("compiling gemm kernels"), `total` the number of steps.
  Progress(std::string what, std::size_t total, std::FILE* out = stderr);
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;
  ~Progress();

  // Thread-safe: `n` more steps are done; `note` (e.g. the last kernel's name) is shown beside.
  void advance(std::size_t n = 1, std::string_view note = {});
  // Ends the line on a terminal; the caller prints its own summary after.
  void finish();

  // The line for `done` of `total` after `elapsed` seconds: "what: 12/40 (30%), 3.1 s, ~7.2 s left".
  static std::string line(std::string_view what, std::size_t done, std::size_t total, double elapsed,
                          std::string_view note);

 private:
  void print_locked(bool force);

  std::string what_;
  std::size_t total_, done_ = 0;
  std::FILE* out_;
  bool tty_;
  bool finished_ = false;
  std::string note_;
  std::chrono::steady_clock::time_point start_, last_print_;
  std::size_t last_printed_done_ = 0;
  std::mutex mutex_;
};

}  // namespace fp8jit::cli
