#include "lib/kubeletplugin/slice_publisher.h"

#include "gtest/gtest.h"

namespace dra::kubeletplugin {
namespace {

TEST(SliceIndexTest, WidthIsAtLeastFiveHexDigits) {
  EXPECT_EQ(SliceIndexWidth(0), 5);
  EXPECT_EQ(SliceIndexWidth(1), 5);
  EXPECT_EQ(SliceIndexWidth(0x100000), 5);  // last index 0xfffff
  EXPECT_EQ(SliceIndexWidth(0x100001), 6);  // last index 0x100000
}

TEST(SliceIndexTest, ParsesOnlyExactWidthLowerHexFollowedByDash) {
  EXPECT_EQ(ParseSliceIndex("00000-gpu.nvidia.com-node1-abcde", 5), 0u);
  EXPECT_EQ(ParseSliceIndex("0001f-gpu.nvidia.com-node1-x", 5), 31u);
  EXPECT_EQ(ParseSliceIndex("000001-gpu", 6), 1u);
  EXPECT_FALSE(ParseSliceIndex("0001-gpu", 5).has_value());    // too short
  EXPECT_FALSE(ParseSliceIndex("000001-gpu", 5).has_value());  // no dash at width
  EXPECT_FALSE(ParseSliceIndex("0000A-gpu", 5).has_value());   // upper-case hex
  EXPECT_FALSE(ParseSliceIndex("gpu-slice-1", 5).has_value());
  EXPECT_FALSE(ParseSliceIndex("00000", 5).has_value());
}

}  // namespace
}  // namespace dra::kubeletplugin
