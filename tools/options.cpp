#include "tools/options.hpp"

#include <fmt/format.h>

#include <charconv>
#include <sstream>

#include "fp8jit/error.hpp"
#include "runtime/ops/dims.hpp"
#include "common/file_io.hpp"
#include "common/settings.hpp"

namespace fp8jit::cli {
namespace {

// "" and the value, or why the text is not an integer in [lo, hi].
std::string parse_integer(const std::string& text, std::int64_t lo, std::int64_t hi, std::int64_t& value) {
  const char* end = text.data() + text.size();
  const auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec == std::errc::result_out_of_range)
    return fmt::format("{} is out of range [{}, {}]", printable(text, 40), lo, hi);
  if (ec != std::errc() || ptr != end || text.empty())
    return fmt::format("\"{}\" is not an integer", printable(text, 40));
  if (value < lo || value > hi) return fmt::format("{} is out of range [{}, {}]", value, lo, hi);
  return "";
}

// A validator that parses an integer and then applies `rule`, which throws fp8jit::Error.
template <class Rule>
CLI::Validator checked_integer(std::string description, Rule rule) {
  return CLI::Validator(
      [rule](std::string& text) -> std::string {
        std::int64_t v = 0;
        if (std::string why = parse_integer(text, INT64_MIN, INT64_MAX, v); !why.empty())
          return why.find("out of range") != std::string::npos ? printable(text, 40) + " is out of range (it does not fit in 64 bits)" : why;
        try {
          rule(v);
        } catch (const Error& e) {
          return e.what();
        }
        return "";
      },
      std::move(description));
}

}  // namespace

CLI::Validator integer_in(std::int64_t lo, std::int64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& text) {
        std::int64_t v = 0;
        return parse_integer(text, lo, hi, v);
      },
      fmt::format("INT in [{}, {}]", lo, hi));
}

CLI::Validator non_empty() {
  return CLI::Validator(
      [](std::string& text) {
        return text.empty() ? std::string("must not be empty") : std::string();
      },
      "TEXT (not empty)");
}

CLI::Validator gemm_dim(char which) {
  return checked_integer(which == 'k' ? "INT in [1, 2^31-1], a multiple of 16" : "INT in [1, 2^31-1]",
                         [which](std::int64_t v) {
                           check_gemm_dims(which == 'm' ? v : 16, which == 'n' ? v : 16, which == 'k' ? v : 16);
                         });
}

CLI::Validator quant_dim(char which) {
  return checked_integer("INT in [1, 2^31-1]",
                         [which](std::int64_t v) { check_quant_dims(which == 'm' ? v : 1, which == 'k' ? v : 1); });
}

CLI::Option* add_jobs(CLI::App* sub, int& jobs) {
  jobs = 0;
  return sub->add_option("--jobs", jobs, "parallel NVRTC compilations (default: FP8JIT_JOBS, else the cores, at most 8)")
      ->check(integer_in(1, 1024));
}

int resolve_jobs(int jobs) { return jobs > 0 ? jobs : Settings::get().jobs; }

CLI::Option* add_choice(CLI::App* sub, const std::string& flag, std::string& value, const std::vector<std::string>& names,
                        const std::string& doc) {
  return sub->add_option(flag, value, doc)->check(CLI::IsMember(names))->capture_default_str();
}

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : sep) + s;
  return out;
}

}  // namespace fp8jit::cli
