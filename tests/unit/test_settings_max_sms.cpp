// FP8JIT_MAX_SMS: read by the settings module into RuntimeOptions::max_sms; a bad value is an
// error naming the variable, an empty one is unset, a huge one means every SM.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "common/settings.hpp"
#include "fp8jit/runtime.hpp"
#include "tests/common/expect_error.hpp"

namespace fp8jit::test {
namespace {

// Sets FP8JIT_MAX_SMS for one scope.
struct MaxSmsVariable {
  explicit MaxSmsVariable(const char* value) { setenv("FP8JIT_MAX_SMS", value, 1); }
  ~MaxSmsVariable() { unsetenv("FP8JIT_MAX_SMS"); }
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

}  // namespace
}  // namespace fp8jit::test
