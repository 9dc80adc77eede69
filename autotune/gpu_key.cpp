#include "autotune/gpu_key.hpp"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>

#include "common/file_io.hpp"
#include "fp8jit/error.hpp"
#include "runtime/jit/driver.hpp"

namespace fp8jit {
namespace {

constexpr const char* kForm = "NAME|MAJOR.MINOR|SM_COUNT, e.g. \"NVIDIA H200|9.0|132\"";

// A whole-string, non-negative decimal integer; -1 when `s` is anything else.
int parse_count(std::string_view s) {
  int v = -1;
  if (s.empty() || s.size() > 9) return -1;  // 9 digits cannot overflow an int
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || v < 0) return -1;
  return v;
}

// The key is shown by `fp8jit db list` as it is: a control byte could move a terminal's cursor.
bool has_control_byte(std::string_view s) {
  return std::any_of(s.begin(), s.end(), [](unsigned char c) { return c < 0x20 || c == 0x7f; });
}

}  // namespace

std::string GpuKey::str() const { return fmt::format("{}|{}.{}|{}", name, cc_major, cc_minor, sm_count); }

GpuKey GpuKey::from_string(std::string_view text) {
  const auto bad = [&]() {
    throw_invalid("gpu key", printable(text, 80), std::string("expected ") + kForm);
  };
  if (has_control_byte(text))
    throw_invalid("gpu key", printable(text, 80), "control bytes are not allowed in a GPU key");
  const std::size_t last = text.rfind('|');
  if (last == std::string_view::npos || last == 0) bad();
  const std::size_t mid = text.rfind('|', last - 1);
  if (mid == std::string_view::npos || mid == 0) bad();
  const std::string_view cc = text.substr(mid + 1, last - mid - 1);
  const std::size_t dot = cc.find('.');
  if (dot == std::string_view::npos) bad();
  GpuKey key;
  key.name = std::string(text.substr(0, mid));
  key.cc_major = parse_count(cc.substr(0, dot));
  key.cc_minor = parse_count(cc.substr(dot + 1));
  key.sm_count = parse_count(text.substr(last + 1));
  if (key.cc_major < 0 || key.cc_minor < 0 || key.sm_count <= 0) bad();
  return key;
}

GpuKey current_gpu_key() {
  const driver::DeviceInfo d = driver::device_info();
  return GpuKey{d.name, d.cc_major, d.cc_minor, d.sm_count};
}

std::string current_gpu_identity() {
  const driver::DeviceInfo d = driver::device_info();
  char host[256] = {};
  const std::string_view h = ::gethostname(host, sizeof host - 1) == 0 && host[0] ? host : "unknown-host";
  // printable: a host name is the one part not ours, and the row is shown as it is stored.
  return printable(fmt::format("{} device {} (PCI {}, {})", h, d.ordinal, d.pci_bus_id, d.uuid), 200);
}

}  // namespace fp8jit
