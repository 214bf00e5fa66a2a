#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/io/test_files.h"

namespace vosti {
namespace {

using testing::Bytes;
using testing::GgufBuilder;
using testing::parse_gguf_bytes;

// data/all_types.gguf was written by gguf.GGUFWriter (an independent writer).
TEST(Gguf, ReadsEveryValueTypeWrittenByTheGgufPackage) {
  auto g = GgufFile::open(testing::fixture("all_types.gguf"));
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(g->alignment(), 32u);
  EXPECT_EQ(g->data_offset() % 32, 0u);
  EXPECT_EQ(*g->get_string("general.architecture"), "vosti-test");
  EXPECT_EQ(*g->get_int("t.u8"), 200);
  EXPECT_EQ(*g->get_int("t.i8"), -100);
  EXPECT_EQ(*g->get_int("t.u16"), 60000);
  EXPECT_EQ(*g->get_int("t.i16"), -30000);
  EXPECT_EQ(*g->get_int("t.u32"), 4000000000);
  EXPECT_EQ(*g->get_int("t.i32"), -2000000000);
  EXPECT_EQ(*g->get_double("t.f32"), static_cast<double>(0.1f));
  EXPECT_EQ(*g->get_bool("t.bool"), true);
  EXPECT_EQ(*g->get_string("t.str"), "h\xc3\xa9llo \"gguf\"\n");
  EXPECT_EQ(g->find("t.u64")->type, GgufType::kUint64);
  EXPECT_EQ(std::get<uint64_t>(g->find("t.u64")->value), UINT64_MAX);
  EXPECT_EQ(g->get_int("t.u64").status().code(), StatusCode::kOutOfRange);  // does not fit int64
  EXPECT_EQ(*g->get_int("t.i64"), -(int64_t{1} << 62));
  EXPECT_EQ(*g->get_double("t.f64"), -1.0 / 3.0);
  EXPECT_EQ(*g->get_string_array("t.arr_str"), (std::vector<std::string>{"a", "", "\xc3\xbc"}));
  EXPECT_EQ(*g->get_int_array("t.arr_i32"), (std::vector<int64_t>{1, -2, 3}));
  EXPECT_EQ(*g->get_int_array("t.arr_u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(*g->get_double_array("t.arr_f32"), (std::vector<double>{0.5, -2.0}));
  const GgufValue* nested = g->find("t.arr_nested");
  ASSERT_NE(nested, nullptr);
  const auto& outer = std::get<GgufArray>(nested->value);
  ASSERT_EQ(outer.element_type, GgufType::kArray);
  ASSERT_EQ(outer.items.size(), 2u);
  EXPECT_EQ(std::get<GgufArray>(outer.items[0].value).items.size(), 2u);
  EXPECT_EQ(nested->to_display_string(), "[[1, 2], [3]]");
  EXPECT_EQ(g->find("t.arr_bool")->to_display_string(), "[true, false]");

  auto a = g->tensor("a");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));  // PyTorch order
  EXPECT_EQ(a->type, WeightType::kF32);
  EXPECT_EQ(a->num_elements(), 6);
  float first, last;
  std::memcpy(&first, a->data, 4);
  std::memcpy(&last, a->data + 20, 4);
  EXPECT_EQ(first, -2.5f);
  EXPECT_EQ(last, 2.5f);
  auto b = g->tensor("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->type, WeightType::kF16);
  EXPECT_EQ(b->num_bytes, 8u);
}

TEST(Gguf, GettersNameTheKeyOnErrors) {
  auto g = GgufFile::open(testing::fixture("all_types.gguf"));
  ASSERT_TRUE(g.ok());
  auto missing = g->get_int("no.such.key");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("no.such.key"), std::string::npos);
  auto mismatch = g->get_string("t.u32");
  EXPECT_EQ(mismatch.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(mismatch.status().message().find("t.u32"), std::string::npos);
  EXPECT_NE(mismatch.status().message().find("uint32"), std::string::npos);
  EXPECT_EQ(g->get_string_array("t.arr_i32").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(g->get_bool("t.str").status().code(), StatusCode::kInvalidArgument);
  auto t = g->tensor("nope");
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound);
  EXPECT_NE(t.status().message().find("nope"), std::string::npos);
}

TEST(Gguf, DisplaySummarisesLongArraysAndStrings) {
  GgufValue v;
  v.type = GgufType::kArray;
  GgufArray arr;
  arr.element_type = GgufType::kString;
  for (int i = 0; i < 100; ++i) {
    GgufValue s;
    s.type = GgufType::kString;
    s.value = std::to_string(i);
    arr.items.push_back(s);
  }
  v.value = arr;
  EXPECT_EQ(v.to_display_string(3), "[string x 100] [\"0\", \"1\", \"2\", ...]");
  GgufValue s;
  s.type = GgufType::kString;
  s.value = std::string(200, 'x');
  EXPECT_EQ(s.to_display_string(), "\"" + std::string(80, 'x') + "\"...");
}

TEST(Gguf, RoundTripsVersion2And3WithCustomAlignment) {
  for (uint32_t version : {2u, 3u}) {
    SCOPED_TRACE(version);
    GgufBuilder b;
    b.version = version;
    b.alignment = 64;
    b.kv_u32("general.alignment", 64).kv_string("general.architecture", "llama");
    b.f32_tensor("x", {3, 2}).f32_tensor("y", {5});
    // A Q8_0 tensor of 2 rows x 32: raw blocks with d = 1.0 and q = row index.
    std::string q8;
    for (int r = 0; r < 2; ++r) {
      q8 += std::string("\x00\x3c", 2);  // f16 1.0
      q8 += std::string(32, static_cast<char>(r));
    }
    b.tensor({"q", {32, 2}, 8, q8});
    auto g = parse_gguf_bytes(b.build());
    ASSERT_TRUE(g.ok()) << g.status().to_string();
    EXPECT_EQ(g->version(), version);
    EXPECT_EQ(g->alignment(), 64u);
    EXPECT_EQ(g->data_offset() % 64, 0u);
    ASSERT_EQ(g->tensors().size(), 3u);
    auto x = g->tensor("x");
    ASSERT_TRUE(x.ok());
    EXPECT_EQ(x->shape, (std::vector<int64_t>{2, 3}));
    float v;
    std::memcpy(&v, x->data + 4 * 5, 4);
    EXPECT_EQ(v, 5.0f);
    auto y = g->tensor("y");
    ASSERT_TRUE(y.ok());
    EXPECT_EQ(reinterpret_cast<uintptr_t>(y->data) % 64, reinterpret_cast<uintptr_t>(x->data) % 64);
    auto q = g->tensor("q");
    ASSERT_TRUE(q.ok());
    EXPECT_EQ(q->shape, (std::vector<int64_t>{2, 32}));
    EXPECT_EQ(q->num_bytes, 68u);
    EXPECT_EQ(q->data[34 + 2], 1);
  }
}

TEST(Gguf, WeightViewsKeepTheMappingAlive) {
  GgufBuilder b;
  b.f32_tensor("x", {4});
  WeightView w;
  {
    auto g = parse_gguf_bytes(b.build());
    ASSERT_TRUE(g.ok());
    w = *g->tensor("x");
  }
  float v;
  std::memcpy(&v, w.data + 12, 4);  // the GgufFile is gone; the view's owner keeps the bytes
  EXPECT_EQ(v, 3.0f);
}

TEST(Gguf, ParsesTheDefaultModel) {
  const std::string path = testing::default_model();
  if (path.empty()) GTEST_SKIP() << "VOSTI_DEFAULT_MODEL is unset or missing (scripts/fetch-model prints it)";
  auto g = GgufFile::open(path);
  ASSERT_TRUE(g.ok()) << g.status().to_string();
  EXPECT_EQ(g->version(), 3u);
  EXPECT_EQ(*g->get_string("general.architecture"), "llama");
  EXPECT_EQ(*g->get_int("llama.block_count"), 30);
  EXPECT_EQ(*g->get_int("llama.embedding_length"), 576);
  EXPECT_EQ(*g->get_int("llama.attention.head_count"), 9);
  EXPECT_EQ(*g->get_int("llama.attention.head_count_kv"), 3);
  EXPECT_EQ(*g->get_double("llama.rope.freq_base"), 100000.0);
  EXPECT_EQ(g->metadata().size(), 33u);
  EXPECT_EQ(g->get_string_array("tokenizer.ggml.tokens")->size(), 49152u);
  EXPECT_EQ(g->get_string_array("tokenizer.ggml.merges")->size(), 48900u);
  EXPECT_EQ(g->tensors().size(), 272u);
  std::map<std::string, int> per_type;
  for (const auto& t : g->tensors()) per_type[std::string(weight_type_traits(static_cast<uint32_t>(t.type))->name)]++;
  EXPECT_EQ(per_type, (std::map<std::string, int>{{"F32", 61}, {"Q4_1", 210}, {"Q8_0", 1}}));
  auto emb = g->tensor("token_embd.weight");
  ASSERT_TRUE(emb.ok());
  EXPECT_EQ(emb->shape, (std::vector<int64_t>{49152, 576}));
  EXPECT_EQ(emb->type, WeightType::kQ8_0);
  auto down = g->tensor("blk.29.ffn_down.weight");
  ASSERT_TRUE(down.ok());
  EXPECT_EQ(down->shape, (std::vector<int64_t>{576, 1536}));
  EXPECT_EQ(down->type, WeightType::kQ4_1);
  EXPECT_EQ(down->num_bytes, 576u * 1536 / 32 * 20);
}

}  // namespace
}  // namespace vosti
