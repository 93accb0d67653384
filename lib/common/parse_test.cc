#include "lib/common/parse.h"

#include <string>

#include "gtest/gtest.h"

namespace dra {
namespace {

TEST(ParseGoBoolTest, AcceptsGoSpellingsOnly) {
  struct Case {
    std::string text;
    bool ok;
    bool value;
  };
  const Case cases[] = {
      {"1", true, true},       {"t", true, true},       {"T", true, true},
      {"TRUE", true, true},    {"true", true, true},    {"True", true, true},
      {"0", true, false},      {"f", true, false},      {"F", true, false},
      {"FALSE", true, false},  {"false", true, false},  {"False", true, false},
      {"", false, false},      {"yes", false, false},   {"tRuE", false, false},
      {" true", false, false}, {"true ", false, false}, {"2", false, false},
  };
  for (const Case& c : cases) {
    bool value = !c.value;  // must be overwritten on success
    EXPECT_EQ(ParseGoBool(c.text, &value), c.ok) << "\"" << c.text << "\"";
    if (c.ok) {
      EXPECT_EQ(value, c.value) << "\"" << c.text << "\"";
    } else {
      EXPECT_EQ(value, !c.value) << "left unchanged on failure: \"" << c.text << "\"";
    }
  }
}

}  // namespace
}  // namespace dra
