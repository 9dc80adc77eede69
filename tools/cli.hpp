// Shared pieces of the `fp8jit` command-line tool.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "fp8jit/kernel_spec.hpp"

namespace fp8jit::cli {

// --name value / --flag options after the subcommand. Unknown options are errors.
class Args {
 public:
  Args(int argc, char** argv, int first, const std::vector<std::string>& valued,
       const std::vector<std::string>& flags);
  std::optional<std::string> get(const std::string& name) const;
  std::string get_or(const std::string& name, const std::string& fallback) const;
  long long get_int(const std::string& name, long long fallback) const;
  bool flag(const std::string& name) const;

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, bool> flags_;
};

// A spec from inline JSON or from a file holding it.
KernelSpec read_spec(const std::string& json_or_path);

int cmd_info(const Args& args);
int cmd_list(const Args& args);
int cmd_emit(const Args& args);
int cmd_compile(const Args& args);
int cmd_compile_all(const Args& args);
int cmd_quantize(const Args& args);
int cmd_dequantize(const Args& args);
int cmd_demo(const Args& args);
int cmd_gemm(const Args& args);
int cmd_tune(const Args& args);
int cmd_precompile(const Args& args);
int cmd_select_gemm(const Args& args);
// `db <subcommand> [options]`: argv[2] names the subcommand, its options follow.
int cmd_db(int argc, char** argv);
int cmd_bench(const Args& args);

}  // namespace fp8jit::cli
