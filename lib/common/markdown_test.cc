#include "lib/common/markdown.h"

#include "gtest/gtest.h"

namespace dra {
namespace {

TEST(MarkdownCellTest, EscapesPipesAndJoinsLines) {
  EXPECT_EQ(MarkdownCell(""), "");
  EXPECT_EQ(MarkdownCell("plain"), "plain");
  EXPECT_EQ(MarkdownCell("a|b || c"), "a\\|b \\|\\| c");
  EXPECT_EQ(MarkdownCell("  first\n\n  second  \n"), "first<br>second");
}

}  // namespace
}  // namespace dra
