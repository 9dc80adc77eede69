// The launch settings: FP8JIT_MAX_SMS and FP8JIT_PDL, read by the settings module into
// RuntimeOptions; a bad value is an error naming the variable and the value, an empty one is unset.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "common/settings.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit::test {
namespace {

// Sets a variable for one scope.
struct Variable {
  Variable(const char* name, const char* value) : name(name) { setenv(name, value, 1); }
  ~Variable() { unsetenv(name); }
  const char* name;
};
struct MaxSmsVariable : Variable {
  explicit MaxSmsVariable(const char* value) : Variable("FP8JIT_MAX_SMS", value) {}
};

TEST(SettingsMaxSms, ReadIntoTheRuntimeOptions) {
  {
    MaxSmsVariable v("100");
    EXPECT_EQ(Settings::from_env().max_sms, 100);
  }
  {
    MaxSmsVariable v("");  // empty: unset, every SM
    EXPECT_EQ(Settings::from_env().max_sms, 0);
  }
  {
    MaxSmsVariable v("2147483647");  // more than any GPU has: every SM, as for GemmArgs::max_sms
    EXPECT_EQ(Settings::from_env().max_sms, 2147483647);
  }
  EXPECT_EQ(Settings::from_env().max_sms, 0);
  EXPECT_EQ(RuntimeOptions{}.max_sms, 0);
}

TEST(SettingsMaxSms, BadValuesNameTheVariable) {
  for (const char* bad : {"-1", "abc", "12x", "99999999999", "1.5"}) {
    MaxSmsVariable v(bad);
    const std::string msg = invalid_message([] { Settings::from_env(); });
    EXPECT_NE(msg.find("FP8JIT_MAX_SMS"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  }
}

TEST(SettingsPdl, ReadIntoTheRuntimeOptions) {
  EXPECT_FALSE(RuntimeOptions{}.pdl);
  EXPECT_FALSE(Settings::from_env().pdl);
  for (const char* on : {"1", "on", "true"}) {
    Variable v("FP8JIT_PDL", on);
    EXPECT_TRUE(Settings::from_env().pdl) << on;
  }
  for (const char* off : {"0", "off", ""}) {
    Variable v("FP8JIT_PDL", off);
    EXPECT_FALSE(Settings::from_env().pdl) << off;
  }
  for (const char* bad : {"2", "yes please", "-1"}) {
    Variable v("FP8JIT_PDL", bad);
    const std::string msg = invalid_message([] { Settings::from_env(); });
    EXPECT_NE(msg.find("FP8JIT_PDL"), std::string::npos) << bad << ": " << msg;
    EXPECT_NE(msg.find(bad), std::string::npos) << msg;
  }
}

}  // namespace
}  // namespace fp8jit::test
