// Runs the `fp8jit` CLI as a separate process for the tests: arguments quoted, stdout and stderr
// captured apart, a time limit so that a hang is a failure rather than a stuck test, and a
// snapshot of a folder so that a test can assert a failing command wrote nothing.
#pragma once

#include <stdlib.h>
#include <sys/wait.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

namespace fp8jit::test {

inline std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

inline std::string shell_quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

struct CliResult {
  bool exited = false;     // false: killed by a signal
  bool timed_out = false;  // still running at the time limit (a hang)
  int status = -1;         // exit status when exited
  std::string out, err;
};

struct CliRun {
  std::string cwd;         // where the command runs ("": the test's own)
  std::string env;         // e.g. "FP8JIT_DB=/tmp/x FP8JIT_CACHE_DIR=/tmp/y"
  int timeout_s = 300;
  std::string stdin_path = "/dev/null";
};

// `scratch` holds the captured output (outside `cwd` when a test snapshots cwd).
inline CliResult run_cli(const std::vector<std::string>& args, const std::string& scratch, const CliRun& how = {}) {
  std::string cmd = how.cwd.empty() ? "" : "cd " + shell_quote(how.cwd) + " && ";
  cmd += "env " + how.env + " timeout -k 5 " + std::to_string(how.timeout_s) + " " + shell_quote(FP8JIT_CLI_PATH);
  for (const auto& a : args) cmd += " " + shell_quote(a);
  const std::string out = scratch + "/.stdout", err = scratch + "/.stderr";
  cmd += " >" + shell_quote(out) + " 2>" + shell_quote(err) + " <" + shell_quote(how.stdin_path);
  const int raw = std::system(cmd.c_str());
  CliResult r;
  r.exited = raw != -1 && WIFEXITED(raw);
  r.status = r.exited ? WEXITSTATUS(raw) : -1;
  r.timed_out = r.exited && (r.status == 124 || r.status == 137);
  r.out = read_bytes(out);
  r.err = read_bytes(err);
  return r;
}

// Every entry under `dir` with its kind and, for regular files, its bytes.
inline std::map<std::string, std::string> snapshot(const std::string& dir) {
  namespace fs = std::filesystem;
  std::map<std::string, std::string> out;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    const fs::path rel = fs::relative(it->path(), dir);
    const auto st = it->symlink_status(ec);
    out[rel.string()] = fs::is_regular_file(st) ? "file:" + read_bytes(it->path().string())
                                                : "kind:" + std::to_string(static_cast<int>(st.type()));
  }
  return out;
}

}  // namespace fp8jit::test
