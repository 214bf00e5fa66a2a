#include "io/safetensors.h"
#include "io/safetensors_writer.h"

#include <gtest/gtest.h>

#include <cstring>

#include "core/dtype.h"
#include "tests/io/test_files.h"

namespace vosti {
namespace {

using nlohmann::json;
using testing::Bytes;
using testing::ScratchDir;
using testing::write_file;

// A safetensors file: 8-byte header length, `header` text, then `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  return Bytes().put<uint64_t>(header.size()).raw(header).raw(data).data();
}

// Tensors {name: f32 values} laid out in name order.
std::string f32_file(const std::map<std::string, std::vector<float>>& tensors) {
  json header = json::object();
  std::string data;
  for (const auto& [name, values] : tensors) {
    header[name] = {
        {"dtype", "F32"}, {"shape", {values.size()}}, {"data_offsets", {data.size(), data.size() + 4 * values.size()}}};
    for (float v : values) data += Bytes().put(v).data();
  }
  return safetensors_bytes(header.dump(), data);
}

Result<SafetensorsFile> parse_bytes(const std::string& bytes) {
  return SafetensorsFile::parse(MappedFile::from_bytes("mem.safetensors", bytes.data(), bytes.size()));
}

float f32_at(const WeightView& w, size_t i) {
  float v;
  std::memcpy(&v, w.data + 4 * i, 4);
  return v;
}

// data/tiny_model was written by the `safetensors` Python package (torch).
TEST(Safetensors, ReadsAFileWrittenByHfSafetensors) {
  auto m = SafetensorsModel::open(testing::fixture("tiny_model"));
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->config()["hidden_size"], 4);
  EXPECT_EQ(m->tensors().size(), 5u);
  auto w32 = m->tensor("w32");
  ASSERT_TRUE(w32.ok());
  EXPECT_EQ(w32->type, WeightType::kF32);
  EXPECT_EQ(w32->shape, (std::vector<int64_t>{3, 4}));
  EXPECT_EQ(f32_at(*w32, 0), -5.5f);
  EXPECT_EQ(f32_at(*w32, 11), 5.5f);
  auto w16 = m->tensor("w16");
  ASSERT_TRUE(w16.ok());
  EXPECT_EQ(w16->type, WeightType::kF16);
  uint16_t h;
  std::memcpy(&h, w16->data + 6, 2);
  EXPECT_EQ(f16_to_f32(h), 65504.0f);
  auto wbf = m->tensor("wbf");
  ASSERT_TRUE(wbf.ok());
  EXPECT_EQ(wbf->type, WeightType::kBF16);
  std::memcpy(&h, wbf->data + 2, 2);
  EXPECT_EQ(bf16_to_f32(h), -3.0f);
  EXPECT_EQ(m->tensor("scalar")->shape, std::vector<int64_t>{});
  EXPECT_EQ(m->tensor("scalar")->num_elements(), 1);
  EXPECT_EQ(m->tensor("empty")->num_bytes, 0u);
  auto missing = m->tensor("nope");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope"), std::string::npos);

  auto f = SafetensorsFile::open(testing::fixture("tiny_model/model.safetensors"));
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->metadata(), (std::map<std::string, std::string>{{"format", "pt"}, {"note", "vosti"}}));
}

TEST(Safetensors, ShardedModelFollowsTheIndex) {
  ScratchDir dir;
  write_file(dir.file("config.json"), R"({"model_type": "llama"})");
  write_file(dir.file("model-00001-of-00002.safetensors"), f32_file({{"a", {1, 2}}, {"b", {3}}}));
  write_file(dir.file("model-00002-of-00002.safetensors"), f32_file({{"c", {4, 5, 6}}}));
  json index = {{"metadata", {{"total_size", 24}}},
                {"weight_map",
                 {{"a", "model-00001-of-00002.safetensors"},
                  {"b", "model-00001-of-00002.safetensors"},
                  {"c", "model-00002-of-00002.safetensors"}}}};
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  auto m = SafetensorsModel::open(dir.path());
  ASSERT_TRUE(m.ok()) << m.status().to_string();
  EXPECT_EQ(m->config()["model_type"], "llama");
  ASSERT_EQ(m->tensors().size(), 3u);
  EXPECT_EQ(f32_at(*m->tensor("c"), 2), 6.0f);
  EXPECT_EQ(f32_at(*m->tensor("b"), 0), 3.0f);

  // The index names a tensor its shard lacks.
  index["weight_map"]["d"] = "model-00002-of-00002.safetensors";
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  auto lacks = SafetensorsModel::open(dir.path());
  EXPECT_EQ(lacks.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(lacks.status().message().find("'d'"), std::string::npos) << lacks.status().to_string();

  // A tensor stored in a different shard than the index says.
  index["weight_map"].erase("d");
  index["weight_map"]["c"] = "model-00001-of-00002.safetensors";
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  EXPECT_EQ(SafetensorsModel::open(dir.path()).status().code(), StatusCode::kDataLoss);

  // A name in two shards.
  index["weight_map"]["c"] = "model-00002-of-00002.safetensors";
  write_file(dir.file("model-00002-of-00002.safetensors"), f32_file({{"a", {9}}, {"c", {4, 5, 6}}}));
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  auto dup = SafetensorsModel::open(dir.path());
  EXPECT_EQ(dup.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(dup.status().message().find("another shard"), std::string::npos) << dup.status().to_string();

  // Shard names may not leave the directory; a missing shard names its path.
  index["weight_map"] = {{"a", "../escape.safetensors"}};
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  EXPECT_EQ(SafetensorsModel::open(dir.path()).status().code(), StatusCode::kDataLoss);
  index["weight_map"] = {{"a", "gone.safetensors"}};
  write_file(dir.file("model.safetensors.index.json"), index.dump());
  auto gone = SafetensorsModel::open(dir.path());
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_NE(gone.status().message().find("gone.safetensors"), std::string::npos);
}

TEST(Safetensors, MissingFilesAreNamed) {
  ScratchDir dir;
  auto no_config = SafetensorsModel::open(dir.path());
  EXPECT_EQ(no_config.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_config.status().message().find("config.json"), std::string::npos);
  write_file(dir.file("config.json"), "{}");
  auto no_weights = SafetensorsModel::open(dir.path());
  EXPECT_EQ(no_weights.status().code(), StatusCode::kNotFound);
  EXPECT_NE(no_weights.status().message().find("model.safetensors"), std::string::npos);
  write_file(dir.file("config.json"), "{\"a\": ");
  auto bad_config = SafetensorsModel::open(dir.path());
  EXPECT_EQ(bad_config.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad_config.status().message().find("config.json"), std::string::npos);
}

// Expects an error of `code` naming the file and containing `needle`.
void expect_error(const std::string& bytes, StatusCode code, const std::string& needle) {
  auto f = parse_bytes(bytes);
  ASSERT_FALSE(f.ok()) << "parsed a bad file; expected: " << needle;
  EXPECT_EQ(f.status().code(), code) << f.status().to_string();
  EXPECT_NE(f.status().message().find("mem.safetensors"), std::string::npos) << f.status().to_string();
  EXPECT_NE(f.status().message().find(needle), std::string::npos) << f.status().to_string();
}

std::string one_tensor(const std::string& entry, const std::string& data) {
  return safetensors_bytes("{\"t\": " + entry + "}", data);
}

TEST(SafetensorsBadFile, EveryTruncationIsAnError) {
  const std::string good = testing::read_file(testing::fixture("tiny_model/model.safetensors"));
  ASSERT_TRUE(parse_bytes(good).ok());
  for (size_t n = 0; n < good.size(); ++n) {
    auto f = parse_bytes(good.substr(0, n));
    ASSERT_FALSE(f.ok()) << "truncated to " << n << " bytes still parses";
    EXPECT_EQ(f.status().code(), StatusCode::kDataLoss) << f.status().to_string();
  }
}

TEST(SafetensorsBadFile, LyingHeaderLength) {
  expect_error("1234", StatusCode::kDataLoss, "too short");
  expect_error(Bytes().put<uint64_t>(uint64_t{1} << 62).raw("{}").data(), StatusCode::kDataLoss, "100 MB");
  expect_error(Bytes().put<uint64_t>(1000).raw("{}").data(), StatusCode::kDataLoss, "past the end");
  expect_error(safetensors_bytes("[1, 2]", ""), StatusCode::kDataLoss, "does not start with '{'");
  expect_error(safetensors_bytes("{\"t\": ", ""), StatusCode::kDataLoss, "invalid JSON");
  expect_error(safetensors_bytes("{\"t\": \"\xff\"}", ""), StatusCode::kDataLoss, "invalid JSON");
  std::string deep = "{\"t\": " + std::string(100, '[') + std::string(100, ']') + "}";
  expect_error(safetensors_bytes(deep, ""), StatusCode::kDataLoss, "nested deeper");
}

TEST(SafetensorsBadFile, LyingOffsets) {
  const std::string entry = R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 8]})";
  ASSERT_TRUE(parse_bytes(one_tensor(entry, std::string(8, '\0'))).ok());
  expect_error(one_tensor(entry, std::string(4, '\0')), StatusCode::kDataLoss, "truncated");
  expect_error(one_tensor(entry, std::string(12, '\0')), StatusCode::kDataLoss, "trailing bytes");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, 12]})", std::string(12, '\0')),
               StatusCode::kDataLoss, "tensor 't': data_offsets [0, 12] do not hold the 8 bytes");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [8, 0]})", std::string(8, '\0')),
               StatusCode::kDataLoss, "data_offsets [8, 0]");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [4, 12]})", std::string(12, '\0')),
               StatusCode::kDataLoss, "(gap)");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2], "data_offsets": [0, -8]})", ""), StatusCode::kDataLoss,
               "non-negative");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [2]})", ""), StatusCode::kDataLoss, "data_offsets");
  const std::string overlap =
      R"({"a": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}, "b": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  expect_error(safetensors_bytes(overlap, std::string(8, '\0')), StatusCode::kDataLoss, "(overlap)");
}

TEST(SafetensorsBadFile, LyingShapesAndDtypes) {
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]})", std::string(8, '\0')),
               StatusCode::kDataLoss, "non-negative");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": [4294967296, 4294967296], "data_offsets": [0, 8]})", ""),
               StatusCode::kDataLoss, "overflows");
  expect_error(one_tensor(R"({"dtype": "F32", "shape": "2", "data_offsets": [0, 8]})", ""), StatusCode::kDataLoss,
               "shape");
  auto i64 = parse_bytes(one_tensor(R"({"dtype": "I64", "shape": [1], "data_offsets": [0, 8]})", std::string(8, '\0')));
  EXPECT_EQ(i64.status().code(), StatusCode::kUnimplemented);
  EXPECT_NE(i64.status().message().find("tensor 't' has dtype I64"), std::string::npos) << i64.status().to_string();
  expect_error(one_tensor(R"({"dtype": "F13", "shape": [1], "data_offsets": [0, 2]})", "xx"), StatusCode::kDataLoss,
               "unknown dtype 'F13'");
  expect_error(one_tensor("7", ""), StatusCode::kDataLoss, "not an object");
}

TEST(SafetensorsBadFile, DuplicateNamesAndBadMetadata) {
  const std::string dup =
      R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4]}, "a": {"dtype": "F32", "shape": [1], "data_offsets": [4, 8]}})";
  expect_error(safetensors_bytes(dup, std::string(8, '\0')), StatusCode::kDataLoss, "duplicate key 'a'");
  expect_error(safetensors_bytes(R"({"__metadata__": {"k": 1}})", ""), StatusCode::kDataLoss, "__metadata__");
  expect_error(safetensors_bytes(R"({"__metadata__": []})", ""), StatusCode::kDataLoss, "__metadata__");
}

TEST(MappedFile, ErrorsNameThePath) {
  auto missing = MappedFile::open("/nonexistent/x.bin");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("/nonexistent/x.bin"), std::string::npos);
  ScratchDir dir;
  auto is_dir = MappedFile::open(dir.path());
  EXPECT_FALSE(is_dir.ok());
  EXPECT_NE(is_dir.status().message().find("not a regular file"), std::string::npos);
  write_file(dir.file("empty"), "");
  auto empty = MappedFile::open(dir.file("empty"));
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ((*empty)->size(), 0u);
  EXPECT_NE((*empty)->data(), nullptr);
  write_file(dir.file("abc"), "abc");
  auto abc = MappedFile::open(dir.file("abc"));
  ASSERT_TRUE(abc.ok());
  EXPECT_EQ(std::string(reinterpret_cast<const char*>((*abc)->data()), (*abc)->size()), "abc");
}

}  // namespace
}  // namespace vosti

namespace vosti {
namespace {

// write_safetensors (io/safetensors_writer.h): what it writes reads back as written, tensor for
// tensor, filled in chunks from several threads (one tensor spans several 8 MiB chunks).
TEST(SafetensorsWriter, WritesWhatTheReaderReadsBack) {
  testing::ScratchDir dir;
  const std::string path = dir.path() + "/w.safetensors";
  const size_t big = (size_t{9} << 20) / 2 + 5;  // bf16 elements: more than one chunk, odd tail
  std::vector<SafetensorsEntry> entries;
  entries.push_back({"a.weight", "F32", {3, 5}, [](uint8_t* dst, size_t offset, size_t bytes) {
                       for (size_t i = 0; i < bytes / 4; ++i) {
                         const float v = static_cast<float>(offset / 4 + i) * 0.5f;
                         std::memcpy(dst + 4 * i, &v, 4);
                       }
                     }});
  entries.push_back({"b.weight", "BF16", {static_cast<int64_t>(big)}, [](uint8_t* dst, size_t offset, size_t bytes) {
                       for (size_t i = 0; i < bytes / 2; ++i) {
                         const uint16_t v = static_cast<uint16_t>((offset / 2 + i) * 2654435761u >> 16);
                         std::memcpy(dst + 2 * i, &v, 2);
                       }
                     }});
  ASSERT_TRUE(write_safetensors(path, entries, 3).ok());
  auto f = SafetensorsFile::open(path);
  ASSERT_TRUE(f.ok()) << f.status().to_string();
  ASSERT_EQ(f->tensors().size(), 2u);
  for (const WeightView& t : f->tensors()) {
    if (t.name == "a.weight") {
      ASSERT_EQ(t.shape, (std::vector<int64_t>{3, 5}));
      for (size_t i = 0; i < 15; ++i) {
        float v;
        std::memcpy(&v, t.data + 4 * i, 4);
        EXPECT_EQ(v, static_cast<float>(i) * 0.5f);
      }
    } else {
      ASSERT_EQ(t.name, "b.weight");
      ASSERT_EQ(t.num_bytes, 2 * big);
      for (size_t i = 0; i < big; i += 4099) {
        uint16_t v;
        std::memcpy(&v, t.data + 2 * i, 2);
        EXPECT_EQ(v, static_cast<uint16_t>(i * 2654435761u >> 16)) << i;
      }
    }
  }
  EXPECT_EQ(write_safetensors(path, {{"c", "Q9", {1}, nullptr}}).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace vosti
