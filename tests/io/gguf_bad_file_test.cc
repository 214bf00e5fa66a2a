// Crafted bad GGUF files: each gives the right error naming the file and the
// problem, never a crash (the fuzz target explores further).
#include <gtest/gtest.h>

#include "io/gguf.h"
#include "tests/io/test_files.h"

namespace vosti {
namespace {

using testing::Bytes;
using testing::GgufBuilder;
using testing::parse_gguf_bytes;

// Expects an error of `code` whose message names the file and contains `needle`.
void expect_error(const std::string& bytes, StatusCode code, const std::string& needle) {
  auto g = parse_gguf_bytes(bytes, "bad.gguf");
  ASSERT_FALSE(g.ok()) << "parsed a bad file; expected: " << needle;
  EXPECT_EQ(g.status().code(), code) << g.status().to_string();
  EXPECT_NE(g.status().message().find("bad.gguf"), std::string::npos) << g.status().to_string();
  EXPECT_NE(g.status().message().find(needle), std::string::npos) << g.status().to_string();
}

GgufBuilder small_model() {
  GgufBuilder b;
  b.kv_string("general.architecture", "llama").kv_u32("llama.block_count", 1);
  b.f32_tensor("a", {8, 2}).f32_tensor("b", {3});
  return b;
}

// Cutting a file anywhere before the end of its last tensor's data is an error;
// cutting only the padding after it leaves a valid file.
TEST(GgufBadFile, EveryTruncationIsAnError) {
  for (const std::string& good : {small_model().build(), testing::read_file(testing::fixture("all_types.gguf"))}) {
    auto full = parse_gguf_bytes(good);
    ASSERT_TRUE(full.ok());
    size_t data_end = full->data_offset();
    for (const auto& t : full->tensors())
      data_end = std::max<size_t>(data_end, full->data_offset() + t.offset + t.num_bytes);
    ASSERT_LE(data_end, good.size());
    for (size_t n = 0; n < data_end; ++n) {
      auto g = parse_gguf_bytes(good.substr(0, n), "cut.gguf");
      if (g.ok()) {
        ADD_FAILURE() << "truncated to " << n << " of " << good.size() << " bytes still parses";
        continue;
      }
      EXPECT_NE(g.status().message().find("cut.gguf"), std::string::npos) << g.status().to_string();
      EXPECT_TRUE(g.status().code() == StatusCode::kDataLoss || g.status().code() == StatusCode::kInvalidArgument)
          << g.status().to_string();
    }
  }
}

TEST(GgufBadFile, WrongMagic) {
  std::string bytes = small_model().build();
  bytes[0] = 'X';
  expect_error(bytes, StatusCode::kInvalidArgument, "not a GGUF file");
  expect_error("GGU", StatusCode::kDataLoss, "too short");
}

TEST(GgufBadFile, UnsupportedVersions) {
  GgufBuilder b = small_model();
  b.version = 1;
  expect_error(b.build(), StatusCode::kUnimplemented, "version 1");
  b.version = 4;
  expect_error(b.build(), StatusCode::kUnimplemented, "version 4");
  b.version = 0x03000000;  // a big-endian v3 file read little-endian
  expect_error(b.build(), StatusCode::kUnimplemented, "big-endian");
}

TEST(GgufBadFile, AbsurdCounts) {
  GgufBuilder b = small_model();
  b.tensor_count_override = int64_t{1} << 60;
  expect_error(b.build(), StatusCode::kDataLoss, "tensor count");
  b = small_model();
  b.tensor_count_override = -1 - (int64_t{1} << 40);  // negative on the wire
  expect_error(b.build(), StatusCode::kDataLoss, "tensor count");
  b = small_model();
  b.kv_count_override = int64_t{1} << 62;
  expect_error(b.build(), StatusCode::kDataLoss, "metadata count");
}

TEST(GgufBadFile, LyingLengths) {
  GgufBuilder b;
  b.kv("k", GgufType::kString, Bytes().put<uint64_t>(uint64_t{1} << 62).data());
  expect_error(b.build(), StatusCode::kDataLoss, "past the end");
  b = GgufBuilder();
  b.kv("k", GgufType::kArray, Bytes().put<uint32_t>(4).put<uint64_t>(uint64_t{1} << 61).data());
  expect_error(b.build(), StatusCode::kDataLoss, "cannot fit");
  // Written by hand: the builder's padding would complete the value.
  const std::string cut = Bytes()
                              .raw("GGUF")
                              .put<uint32_t>(3)
                              .put<int64_t>(0)
                              .put<int64_t>(1)
                              .str("k")
                              .put<uint32_t>(10)
                              .put<uint32_t>(7)
                              .data();
  expect_error(cut, StatusCode::kDataLoss, "file ends inside uint64 value");
}

TEST(GgufBadFile, TooManyArrayValues) {
  // An honest array of 2^24 + 1 bytes: the file holds it, the cap on values refuses it before allocating.
  const uint64_t n = (uint64_t{1} << 24) + 1;
  GgufBuilder b;
  b.kv("a", GgufType::kArray, Bytes().put<uint32_t>(0).put<uint64_t>(n).raw(std::string(n, '\1')).data());
  expect_error(b.build(), StatusCode::kDataLoss, "metadata key 'a': metadata arrays hold more than 16777216 values");
}

TEST(GgufBadFile, BadValueTypes) {
  GgufBuilder b;
  b.kv("k", static_cast<GgufType>(13), Bytes().put<uint32_t>(0).data());
  expect_error(b.build(), StatusCode::kDataLoss, "metadata key 'k': unknown value type 13");
  b = GgufBuilder();
  b.kv("k", GgufType::kArray, Bytes().put<uint32_t>(77).put<uint64_t>(1).data());
  expect_error(b.build(), StatusCode::kDataLoss, "unknown array element type 77");
  b = GgufBuilder();
  b.kv("k", GgufType::kBool, Bytes().put<uint8_t>(2).data());
  expect_error(b.build(), StatusCode::kDataLoss, "bool value 2");
}

TEST(GgufBadFile, DeeplyNestedArrays) {
  std::string v;
  for (int i = 0; i < 100; ++i) v += Bytes().put<uint32_t>(9).put<uint64_t>(1).data();
  GgufBuilder b;
  b.kv("k", GgufType::kArray, v);
  expect_error(b.build(), StatusCode::kDataLoss, "nested deeper");
}

TEST(GgufBadFile, DuplicateKeysAndTensorNames) {
  GgufBuilder b = small_model();
  b.kv_u32("llama.block_count", 2);
  expect_error(b.build(), StatusCode::kDataLoss, "duplicate metadata key 'llama.block_count'");
  b = small_model();
  b.f32_tensor("a", {4});
  expect_error(b.build(), StatusCode::kDataLoss, "duplicate tensor name 'a'");
}

TEST(GgufBadFile, AbsurdDimensions) {
  GgufBuilder b;
  b.tensor({"t", {4, 0}, 0, ""});
  expect_error(b.build(), StatusCode::kDataLoss, "tensor 't' has dimension 0");
  b = GgufBuilder();
  b.tensor({"t", {-4}, 0, ""});
  expect_error(b.build(), StatusCode::kDataLoss, "dimension -4");
  b = GgufBuilder();
  b.tensor({"t", {int64_t{1} << 40, int64_t{1} << 40}, 0, ""});
  expect_error(b.build(), StatusCode::kDataLoss, "overflows int64");
  b = GgufBuilder();
  b.tensor({"t", {1, 1, 1, 1, 1}, 0, std::string(4, '\0')});
  expect_error(b.build(), StatusCode::kDataLoss, "5 dimensions");
  b = GgufBuilder();
  b.tensor({"t", {int64_t{1} << 62}, 0, ""});  // 2^64 bytes of f32
  expect_error(b.build(), StatusCode::kDataLoss, "too large");
}

TEST(GgufBadFile, UnknownOrMisshapenQuantTypes) {
  GgufBuilder b;
  b.tensor({"t", {32}, 99, std::string(32, '\0')});
  expect_error(b.build(), StatusCode::kDataLoss, "unknown ggml type 99");
  b = GgufBuilder();
  b.tensor({"t", {4}, 4, std::string(32, '\0')});  // Q4_2: removed from ggml long ago
  expect_error(b.build(), StatusCode::kDataLoss, "unknown ggml type 4");
  b = GgufBuilder();
  b.tensor({"t", {48, 2}, 12, std::string(288, '\0')});  // Q4_K rows must be multiples of 256
  expect_error(b.build(), StatusCode::kDataLoss, "not a multiple of the Q4_K block size 256");
}

TEST(GgufBadFile, TensorDataOutsideTheFile) {
  GgufBuilder b = small_model();
  std::string bytes = b.build();
  expect_error(bytes.substr(0, bytes.size() - 4), StatusCode::kDataLoss, "tensor 'b'");
  GgufBuilder header_only;
  header_only.tensor({"t", {4}, 0, "", int64_t{1} << 40});
  expect_error(header_only.build(), StatusCode::kDataLoss, "past the end of the file");
  GgufBuilder wrap;
  wrap.tensor({"t", {4}, 0, "", static_cast<int64_t>(UINT64_MAX & ~uint64_t{31} & INT64_MAX)});
  expect_error(wrap.build(), StatusCode::kDataLoss, "past the end of the file");
}

TEST(GgufBadFile, MisalignedAndOverlappingTensors) {
  GgufBuilder b;
  b.f32_tensor("a", {8}).tensor({"b", {4}, 0, std::string(16, '\0'), 40});
  expect_error(b.build(), StatusCode::kDataLoss, "not a multiple of the alignment 32");
  b = GgufBuilder();
  b.f32_tensor("a", {16}).tensor({"b", {4}, 0, std::string(16, '\0'), 32});
  expect_error(b.build(), StatusCode::kDataLoss, "overlap");
}

TEST(GgufBadFile, BadAlignment) {
  GgufBuilder b = small_model();
  b.kv_u32("general.alignment", 48);
  expect_error(b.build(), StatusCode::kDataLoss, "general.alignment");
  b = small_model();
  b.kv_u32("general.alignment", 0);
  expect_error(b.build(), StatusCode::kDataLoss, "general.alignment");
  b = small_model();
  b.kv_string("general.alignment", "32");
  expect_error(b.build(), StatusCode::kDataLoss, "general.alignment");
}

TEST(GgufBadFile, MissingFileNamesThePath) {
  auto g = GgufFile::open("/nonexistent/dir/model.gguf");
  EXPECT_EQ(g.status().code(), StatusCode::kNotFound);
  EXPECT_NE(g.status().message().find("/nonexistent/dir/model.gguf"), std::string::npos);
}

}  // namespace
}  // namespace vosti
