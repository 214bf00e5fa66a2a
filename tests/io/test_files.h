// Test helpers for tests/io: a GGUF byte builder (so tests craft exact good and
// bad files), a scratch directory, and paths to the committed fixtures.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "io/gguf.h"
#include "tests/test_paths.h"

namespace vosti::testing {

inline std::string fixture(const std::string& name) { return vosti::testing::source_dir() + "/tests/io/data/" + name; }

// The default model, or "" when VOSTI_DEFAULT_MODEL is unset or missing.
inline std::string default_model() {
  const char* p = std::getenv("VOSTI_DEFAULT_MODEL");
  if (p == nullptr || !std::filesystem::exists(p)) return "";
  return p;
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A fresh directory under the test temp dir, removed at destruction.
class ScratchDir {
 public:
  ScratchDir() {
    std::string tmpl = ::testing::TempDir() + "vosti_io_XXXXXX";
    VOSTI_CHECK(::mkdtemp(tmpl.data()) != nullptr, "mkdtemp failed");
    path_ = tmpl;
  }
  ~ScratchDir() { std::filesystem::remove_all(path_); }
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// Little-endian byte appender.
class Bytes {
 public:
  template <typename T>
  Bytes& put(T v) {
    char b[sizeof(T)];
    std::memcpy(b, &v, sizeof(T));
    s_.append(b, sizeof(T));
    return *this;
  }
  Bytes& str(const std::string& s) {
    put<uint64_t>(s.size());
    s_ += s;
    return *this;
  }
  Bytes& raw(const std::string& s) {
    s_ += s;
    return *this;
  }
  const std::string& data() const { return s_; }
  size_t size() const { return s_.size(); }

 private:
  std::string s_;
};

// Builds a GGUF file. Tensors get aligned, consecutive offsets unless one is given.
class GgufBuilder {
 public:
  struct Tensor {
    std::string name;
    std::vector<int64_t> dims;  // ggml order
    uint32_t type;
    std::string data;
    int64_t offset = -1;  // -1: next aligned offset
  };

  uint32_t version = 3;
  uint64_t alignment = 32;
  std::optional<int64_t> tensor_count_override;  // written instead of the real counts
  std::optional<int64_t> kv_count_override;

  GgufBuilder& kv(const std::string& key, GgufType type, const std::string& encoded_value) {
    kvs_.push_back({key, static_cast<uint32_t>(type), encoded_value});
    return *this;
  }
  GgufBuilder& kv_u32(const std::string& key, uint32_t v) { return kv(key, GgufType::kUint32, Bytes().put(v).data()); }
  GgufBuilder& kv_string(const std::string& key, const std::string& v) {
    return kv(key, GgufType::kString, Bytes().str(v).data());
  }
  GgufBuilder& tensor(Tensor t) {
    tensors_.push_back(std::move(t));
    return *this;
  }
  // An F32 tensor with values 0, 1, 2, ...
  GgufBuilder& f32_tensor(const std::string& name, std::vector<int64_t> dims) {
    int64_t n = 1;
    for (auto d : dims) n *= d;
    Bytes b;
    for (int64_t i = 0; i < n; ++i) b.put(static_cast<float>(i));
    return tensor({name, std::move(dims), 0, b.data()});
  }

  std::string build() const {
    Bytes b;
    b.raw("GGUF").put(version);
    b.put<int64_t>(tensor_count_override.value_or(static_cast<int64_t>(tensors_.size())));
    b.put<int64_t>(kv_count_override.value_or(static_cast<int64_t>(kvs_.size())));
    for (const auto& kv : kvs_) b.str(kv.key).put(kv.type).raw(kv.value);
    std::vector<uint64_t> offsets;
    uint64_t next = 0;
    for (const auto& t : tensors_) {
      const uint64_t off = t.offset >= 0 ? static_cast<uint64_t>(t.offset) : next;
      offsets.push_back(off);
      next = std::max(next, (off + t.data.size() + alignment - 1) / alignment * alignment);
      b.str(t.name).put(static_cast<uint32_t>(t.dims.size()));
      for (auto d : t.dims) b.put(d);
      b.put(t.type).put(off);
    }
    std::string out = b.data();
    out.resize((out.size() + alignment - 1) / alignment * alignment, '\0');
    const size_t data_start = out.size();
    for (size_t i = 0; i < tensors_.size(); ++i) {
      if (tensors_[i].data.empty()) continue;  // header-only tensors (crafted offsets)
      const size_t end = data_start + offsets[i] + tensors_[i].data.size();
      if (out.size() < end) out.resize(end, '\0');
      std::memcpy(out.data() + data_start + offsets[i], tensors_[i].data.data(), tensors_[i].data.size());
    }
    return out;
  }

 private:
  struct Kv {
    std::string key;
    uint32_t type;
    std::string value;
  };
  std::vector<Kv> kvs_;
  std::vector<Tensor> tensors_;
};

inline Result<GgufFile> parse_gguf_bytes(const std::string& bytes, const std::string& name = "mem.gguf") {
  return GgufFile::parse(MappedFile::from_bytes(name, bytes.data(), bytes.size()));
}

}  // namespace vosti::testing
