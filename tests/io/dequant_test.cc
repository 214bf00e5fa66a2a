#include "io/dequant.h"

#include <gtest/gtest.h>

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>

#include "io/gguf.h"
#include "tests/io/test_files.h"

namespace vosti {
namespace {

using testing::default_model;
using testing::fixture;

std::vector<float> dequantize_view(const WeightView& w) {
  std::vector<float> out(static_cast<size_t>(w.num_elements()));
  const Status s = dequantize(w.type, w.data, w.num_bytes, out.data(), w.num_elements());
  EXPECT_TRUE(s.ok()) << w.name << ": " << s.to_string();
  return out;
}

// data/dequant.gguf pairs raw blocks "T.q" with gguf.quants.dequantize's output "T.f32".
TEST(Dequantize, BitExactAgainstGgufPackageForEverySupportedType) {
  auto g = GgufFile::open(fixture("dequant.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const char* types[] = {"F32", "F16", "BF16", "Q4_0", "Q4_1", "Q5_0", "Q5_1", "Q8_0", "Q4_K", "Q5_K", "Q6_K"};
  for (const char* type : types) {
    SCOPED_TRACE(type);
    auto q = g->tensor(std::string(type) + ".q");
    auto expected = g->tensor(std::string(type) + ".f32");
    ASSERT_TRUE(q.ok() && expected.ok());
    EXPECT_EQ(weight_type_traits(static_cast<uint32_t>(q->type))->name, type);
    ASSERT_EQ(q->shape, expected->shape);
    const std::vector<float> got = dequantize_view(*q);
    ASSERT_EQ(got.size() * 4, expected->num_bytes);
    size_t mismatches = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      uint32_t want;
      std::memcpy(&want, expected->data + 4 * i, 4);
      if (std::bit_cast<uint32_t>(got[i]) != want && mismatches++ < 5) {
        ADD_FAILURE() << "element " << i << ": got bits " << std::hex << std::bit_cast<uint32_t>(got[i]) << ", gguf "
                      << want;
      }
    }
    EXPECT_EQ(mismatches, 0u);
  }
}

TEST(Dequantize, RejectsBadSizesAndUnsupportedTypes) {
  std::vector<uint8_t> src(18 * 2);
  std::vector<float> dst(64);
  EXPECT_TRUE(dequantize(WeightType::kQ4_0, src.data(), 36, dst.data(), 64).ok());
  EXPECT_EQ(dequantize(WeightType::kQ4_0, src.data(), 36, dst.data(), 48).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(dequantize(WeightType::kQ4_0, src.data(), 35, dst.data(), 64).code(), StatusCode::kInvalidArgument);
  const Status s = dequantize(WeightType::kQ2_K, src.data(), 84, dst.data(), 256);
  EXPECT_EQ(s.code(), StatusCode::kUnimplemented);
  EXPECT_NE(s.message().find("Q2_K"), std::string::npos) << s.message();
  EXPECT_EQ(dequantize(static_cast<WeightType>(99), src.data(), 4, dst.data(), 1).code(), StatusCode::kInvalidArgument);
}

TEST(WeightTypeTraits, KnowsGgmlGeometry) {
  EXPECT_EQ(weight_type_traits(12)->name, "Q4_K");
  EXPECT_EQ(weight_type_traits(12)->block_elems, 256);
  EXPECT_EQ(weight_type_traits(12)->block_bytes, 144u);
  EXPECT_EQ(weight_type_traits(3)->block_bytes, 20u);
  EXPECT_FALSE(weight_type_traits(16)->dequant_supported);  // IQ2_XXS parses but does not dequantise
  EXPECT_EQ(weight_type_traits(4), nullptr);                // removed Q4_2
  EXPECT_EQ(weight_type_traits(1000), nullptr);
}

uint64_t checksum(const std::vector<float>& x) {
  uint64_t sum = 0;
  for (size_t i = 0; i < x.size(); ++i) sum += uint64_t{std::bit_cast<uint32_t>(x[i])} * (2 * uint64_t{i} + 1);
  return sum;
}

// Every tensor of the real default model dequantises; a few match the gguf package bit for bit
// (checksums and samples recorded by make_fixtures.py in data/default_model.json).
TEST(Dequantize, DefaultModelMatchesGgufPackage) {
  const std::string path = default_model();
  if (path.empty()) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is unset or missing (scripts/fetch-model prints it)";
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  const auto expected = nlohmann::json::parse(testing::read_file(fixture("default_model.json")));
  ASSERT_EQ(g->tensors().size(), expected["tensor_count"].get<size_t>());
  std::map<std::string, nlohmann::json> want;
  for (const auto& t : expected["tensors"]) want[t["name"].get<std::string>()] = t;

  size_t checked = 0;
  for (const auto& info : g->tensors()) {
    auto w = g->tensor(info.name);
    ASSERT_TRUE(w.ok());
    const std::vector<float> x = dequantize_view(*w);
    auto it = want.find(info.name);
    if (it == want.end()) continue;
    SCOPED_TRACE(info.name);
    ++checked;
    EXPECT_EQ(weight_type_traits(static_cast<uint32_t>(w->type))->name, it->second["type"].get<std::string>());
    EXPECT_EQ(w->shape, it->second["shape"].get<std::vector<int64_t>>());
    EXPECT_EQ(checksum(x), std::stoull(it->second["checksum"].get<std::string>()));
    for (const auto& s : it->second["samples"]) {
      const auto i = s[0].get<size_t>();
      ASSERT_LT(i, x.size());
      EXPECT_EQ(std::bit_cast<uint32_t>(x[i]), s[1].get<uint32_t>()) << "element " << i;
    }
  }
  EXPECT_EQ(checked, want.size());
}

}  // namespace
}  // namespace vosti
