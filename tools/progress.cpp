#include "tools/progress.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include "common/file_io.hpp"

namespace fp8jit::cli {
namespace {

// A terminal is redrawn at most this often; a log gets a line per 10 % or per this many seconds.
constexpr double kTtyInterval = 0.1, kLogInterval = 10.0;

std::string seconds(double s) {
  if (s < 90) return fmt::format("{:.1f} s", s);
  return fmt::format("{}m{:02d}s", static_cast<int>(s) / 60, static_cast<int>(s) % 60);
}

}  // namespace

Progress::Progress(std::string what, std::size_t total, std::FILE* out)
    : what_(std::move(what)), total_(total), out_(out), tty_(::isatty(::fileno(out)) == 1),
      start_(std::chrono::steady_clock::now()), last_print_(start_) {
  std::lock_guard<std::mutex> lock(mutex_);
  print_locked(true);
}

Progress::~Progress() { finish(); }

std::string Progress::line(std::string_view what, std::size_t done, std::size_t total, double elapsed,
                           std::string_view note) {
  std::string s = fmt::format("{}: {}/{}", what, done, total);
  if (total > 0) s += fmt::format(" ({}%)", done * 100 / total);
  s += ", " + seconds(elapsed);
  // The estimate assumes the remaining steps cost what the finished ones did on average.
  if (done > 0 && done < total) s += ", ~" + seconds(elapsed / done * (total - done)) + " left";
  if (!note.empty()) s += fmt::format(" [{}]", printable(note, 60));
  return s;
}

void Progress::advance(std::size_t n, std::string_view note) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ = std::min(total_, done_ + n);
  note_ = note;
  print_locked(done_ == total_);
}

void Progress::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  if (last_printed_done_ != done_) print_locked(true);
  if (tty_) fmt::print(out_, "\n");
  std::fflush(out_);
}

void Progress::print_locked(bool force) {
  const auto now = std::chrono::steady_clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  const bool decile = total_ > 0 && (done_ * 10 / total_) != (last_printed_done_ * 10 / total_);
  if (!force && (tty_ ? since < kTtyInterval : !(decile || since >= kLogInterval))) return;
  if (!tty_ && !force && done_ == last_printed_done_) return;
  const std::string text = line(what_, done_, total_, std::chrono::duration<double>(now - start_).count(), note_);
  // On a terminal: back to column 0, the line, then erase what a longer earlier line left.
  if (tty_) fmt::print(out_, "\r{}\x1b[K", text);
  else fmt::print(out_, "{}\n", text);
  std::fflush(out_);
  last_print_ = now;
  last_printed_done_ = done_;
}

}  // namespace fp8jit::cli
