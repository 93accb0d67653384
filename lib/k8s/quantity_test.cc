#include "lib/k8s/quantity.h"

#include <cstdint>
#include <limits>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dra::k8s {
namespace {

using ::testing::HasSubstr;

struct CanonicalCase {
  std::string input;
  std::string canonical;
};

// Expected values follow k8s.io/apimachinery/pkg/api/resource (quantity_test.go and
// CanonicalizeBytes).
TEST(QuantityTest, ParsesAndPrintsCanonicalForm) {
  const CanonicalCase cases[] = {
      // Zero.
      {"0", "0"},
      {"0Ki", "0"},
      {"-0", "0"},
      {"0.000", "0"},
      // DecimalSI.
      {"1", "1"},
      {"1000", "1k"},
      {"1024", "1024"},
      {"10000", "10k"},
      {"100m", "100m"},
      {"1000m", "1"},
      {"1500m", "1500m"},
      {"1.5", "1500m"},
      {"0.5", "500m"},
      {".5", "500m"},
      {"1.", "1"},
      {"007", "7"},
      {"+1", "1"},
      {"1k", "1k"},
      {"1.5G", "1500M"},
      {"1M", "1M"},
      {"1E", "1E"},
      {"9E", "9E"},
      {"1n", "1n"},
      {"1u", "1u"},
      {"1500n", "1500n"},
      {"0.1n", "1n"},                   // rounded up to the smallest unit
      {"1.0000000001", "1000000001n"},  // rounded up, away from zero
      {"9223372036854775807", "9223372036854775807"},
      // BinarySI.
      {"1Ki", "1Ki"},
      {"1024Mi", "1Gi"},
      {"81920Mi", "80Gi"},
      {"1.5Gi", "1536Mi"},
      {"2048Ki", "2Mi"},
      {"1025Ki", "1025Ki"},
      {"1Ei", "1Ei"},
      {"7Ei", "7Ei"},
      {"0.5Ki", "512"},      // below 1024: printed as DecimalSI
      {"1.5Ki", "1536"},     // whole but not a multiple of 1024
      {"0.1Ki", "102400m"},  // not whole: DecimalSI
      // DecimalExponent.
      {"1e3", "1e3"},
      {"1E3", "1e3"},
      {"1e+3", "1e3"},
      {"1e-3", "1e-3"},
      {"12e6", "12e6"},
      {"100e1", "1e3"},
      {"1.5e3", "1500"},
      {"1e0", "1"},
      {"1500e-3", "1500e-3"},
      // Negative values.
      {"-1Gi", "-1Gi"},
      {"-1500m", "-1500m"},
      {"-0.5", "-500m"},
      {"-1e3", "-1e3"},
  };
  for (const CanonicalCase& c : cases) {
    absl::StatusOr<Quantity> q = Quantity::Parse(c.input);
    ASSERT_TRUE(q.ok()) << c.input << ": " << q.status();
    EXPECT_EQ(q->ToString(), c.canonical) << "input " << c.input;
    // Canonical output parses back to the same value and prints the same.
    absl::StatusOr<Quantity> again = Quantity::Parse(c.canonical);
    ASSERT_TRUE(again.ok()) << c.canonical;
    EXPECT_EQ(*again, *q) << c.input;
    EXPECT_EQ(again->ToString(), c.canonical) << c.input;
  }
}

TEST(QuantityTest, RejectsMalformedInputQuotingIt) {
  const std::string bad_inputs[] = {"",      "abc",  "1K",  "1 Gi", "1e", "Gi",   "-",   ".",
                                    "1.5.5", "1Gib", "--1", "1e+",  " 1", "1Ki ", "1kk", "0x10"};
  for (const std::string& input : bad_inputs) {
    absl::StatusOr<Quantity> q = Quantity::Parse(input);
    ASSERT_FALSE(q.ok()) << "accepted \"" << input << "\" as " << q->ToString();
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(q.status().message()), HasSubstr("\"" + input + "\"")) << input;
  }
}

TEST(QuantityTest, RejectsMagnitudeAboveInt64) {
  for (const char* input :
       {"9223372036854775808", "8Ei", "9.3E", "10E", "1e19", "1e999999999999", "-8Ei"}) {
    absl::StatusOr<Quantity> q = Quantity::Parse(input);
    ASSERT_FALSE(q.ok()) << input;
    EXPECT_THAT(std::string(q.status().message()), HasSubstr("out of range")) << input;
  }
  // Tiny exponents are fine: rounded up to 1n, kept in exponent form.
  absl::StatusOr<Quantity> tiny = Quantity::Parse("1e-999999999");
  ASSERT_TRUE(tiny.ok());
  EXPECT_EQ(tiny->ToString(), "1e-9");
}

TEST(QuantityTest, ValueRoundsUpAwayFromZero) {
  struct Case {
    const char* input;
    int64_t value;
    int64_t milli;
  };
  const Case cases[] = {
      {"80Gi", 85899345920, 85899345920000},
      {"1500m", 2, 1500},
      {"-1500m", -2, -1500},
      {"1n", 1, 1},
      {"0", 0, 0},
      {"1k", 1000, 1000000},
  };
  for (const Case& c : cases) {
    absl::StatusOr<Quantity> q = Quantity::Parse(c.input);
    ASSERT_TRUE(q.ok()) << c.input;
    EXPECT_EQ(q->Value(), c.value) << c.input;
    absl::StatusOr<int64_t> milli = q->MilliValue();
    ASSERT_TRUE(milli.ok()) << c.input;
    EXPECT_EQ(*milli, c.milli) << c.input;
  }
  absl::StatusOr<Quantity> max = Quantity::Parse("9223372036854775807");
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->Value(), std::numeric_limits<int64_t>::max());
  EXPECT_EQ(max->MilliValue().status().code(), absl::StatusCode::kOutOfRange);
}

TEST(QuantityTest, BuiltInCodeUsesTheRequestedFamily) {
  EXPECT_EQ(Quantity::FromBytes(1024).ToString(), "1Ki");
  EXPECT_EQ(Quantity::FromBytes(int64_t{81920} * 1024 * 1024).ToString(), "80Gi");
  // Below 1024 a BinarySI value prints as DecimalSI, as upstream does.
  EXPECT_EQ(Quantity::FromBytes(1000).ToString(), "1k");
  EXPECT_EQ(Quantity::FromBytes(1023).ToString(), "1023");
  EXPECT_EQ(Quantity::FromBytes(1536).ToString(), "1536");
  EXPECT_EQ(Quantity::FromBytes(0).ToString(), "0");
  EXPECT_EQ(Quantity::FromBytes(-2048).ToString(), "-2Ki");
  EXPECT_EQ(Quantity::FromInt64(1000).ToString(), "1k");
  EXPECT_EQ(Quantity::FromInt64(1000, Quantity::Format::kDecimalExponent).ToString(), "1e3");
  EXPECT_EQ(Quantity::FromMilli(1500).ToString(), "1500m");
  EXPECT_EQ(Quantity::FromMilli(2000).ToString(), "2");
  EXPECT_EQ(Quantity::FromBytes(std::numeric_limits<int64_t>::min()).Value(),
            std::numeric_limits<int64_t>::min());
  EXPECT_EQ(Quantity().ToString(), "0");
  EXPECT_TRUE(Quantity().IsZero());
}

TEST(QuantityTest, RemembersFormatFamily) {
  EXPECT_EQ(Quantity::Parse("1Ki")->GetFormat(), Quantity::Format::kBinarySI);
  EXPECT_EQ(Quantity::Parse("0.5Ki")->GetFormat(), Quantity::Format::kBinarySI);
  EXPECT_EQ(Quantity::Parse("0.0001Ki")->GetFormat(), Quantity::Format::kDecimalSI);  // below 1
  EXPECT_EQ(Quantity::Parse("1k")->GetFormat(), Quantity::Format::kDecimalSI);
  EXPECT_EQ(Quantity::Parse("5")->GetFormat(), Quantity::Format::kDecimalSI);
  EXPECT_EQ(Quantity::Parse("1e3")->GetFormat(), Quantity::Format::kDecimalExponent);
}

TEST(QuantityTest, ComparesByValue) {
  EXPECT_EQ(*Quantity::Parse("1Ki"), *Quantity::Parse("1024"));
  EXPECT_EQ(*Quantity::Parse("1k"), *Quantity::Parse("1e3"));
  EXPECT_GT(*Quantity::Parse("1Gi"), *Quantity::Parse("1G"));
  EXPECT_LT(*Quantity::Parse("500m"), *Quantity::Parse("1"));
  EXPECT_LT(*Quantity::Parse("-1"), *Quantity::Parse("0"));
  EXPECT_LE(*Quantity::Parse("10Gi"), *Quantity::Parse("80Gi"));
  EXPECT_NE(*Quantity::Parse("1n"), Quantity());
  EXPECT_EQ(Quantity::Parse("-3")->Sign(), -1);
  EXPECT_EQ(Quantity::Parse("3m")->Sign(), 1);
  EXPECT_EQ(Quantity().Sign(), 0);
}

}  // namespace
}  // namespace dra::k8s
