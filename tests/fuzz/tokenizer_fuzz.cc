// fuzz-libs: vosti_tokenizer vosti_io
// Fuzzes the tokenizers built from the committed HF fixtures (byte-level BPE with the
// Llama 3 and Qwen2 splits, GPT-2 with prefix space, SentencePiece with byte fallback):
// encode never crashes and yields in-range ids; decode yields valid UTF-8; streaming
// decode concatenates to decode; arbitrary ids decode or fail with OUT_OF_RANGE; the
// native split matchers find exactly the matches Oniguruma finds.
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "tokenizer/regex.h"
#include "tokenizer/split_patterns.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace {

using vosti::Tokenizer;

const std::vector<std::shared_ptr<const Tokenizer>>& tokenizers() {
  static const auto all = [] {
    const auto data = std::filesystem::path(__FILE__).parent_path().parent_path() / "tokenizer" / "data";
    std::vector<std::shared_ptr<const Tokenizer>> out;
    for (const char* name : {"bpe_llama3", "bpe_qwen2", "bpe_gpt2", "spm_metaspace", "spm_legacy"}) {
      auto tok = Tokenizer::from_hf_dir((data / name).string());
      if (!tok.ok()) std::abort();  // the fixtures are part of the source tree
      out.push_back(*tok);
    }
    return out;
  }();
  return all;
}

void check(bool ok) {
  if (!ok) std::abort();
}

void check_stream(const Tokenizer& tok, const std::vector<int32_t>& ids, const std::string& full, bool skip_special) {
  vosti::StreamingDecoder stream(tok, skip_special);
  std::string joined;
  for (int32_t id : ids) {
    const std::string piece = stream.push(id);
    check(vosti::is_valid_utf8(piece));
    joined += piece;
  }
  joined += stream.flush();
  check(vosti::is_valid_utf8(joined));
  // Equal unless invalid bytes were replaced (see StreamingDecoder's contract).
  if (full.find(vosti::kReplacementChar) == std::string::npos) check(joined == full);
}

void check_native_splits(std::string_view raw) {
  static const auto gpt2 = vosti::Regex::compile(vosti::kGpt2SplitPattern).value();
  static const auto llama3 = vosti::Regex::compile(vosti::kLlama3SplitPattern).value();
  static const auto qwen2 = vosti::Regex::compile(vosti::kQwen2SplitPattern).value();
  const std::string text = vosti::repair_utf8(raw);
  auto same = [](const std::vector<vosti::RegexMatch>& a, const std::vector<vosti::RegexMatch>& b) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i) {
      if (a[i].start != b[i].start || a[i].end != b[i].end) return false;
    }
    return true;
  };
  check(same(vosti::gpt2_split_matches(text), gpt2->find_all(text)));
  check(same(vosti::llama3_split_matches(text, 3), llama3->find_all(text)));
  check(same(vosti::llama3_split_matches(text, 1), qwen2->find_all(text)));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const auto& all = tokenizers();
  const Tokenizer& tok = *all[data[0] % all.size()];
  const bool ids_mode = (data[0] / all.size()) % 2 == 1;
  const std::string_view rest(reinterpret_cast<const char*>(data + 1), size - 1);
  if (!ids_mode) {
    check_native_splits(rest);
    auto ids = tok.encode(rest, (data[0] & 0x80) != 0);
    check(ids.ok());
    for (int32_t id : *ids) check(id >= 0 && id < tok.vocab_size());
    auto text = tok.decode(*ids);
    check(text.ok() && vosti::is_valid_utf8(*text));
    check_stream(tok, *ids, *text, false);
    return 0;
  }
  std::vector<int32_t> ids;
  for (size_t i = 0; i + 2 <= rest.size(); i += 2) {
    uint16_t v;
    std::memcpy(&v, rest.data() + i, 2);
    ids.push_back(static_cast<int32_t>(v % (tok.vocab_size() + 16)));
  }
  auto text = tok.decode(ids, (data[0] & 0x80) != 0);
  bool in_range = true;
  for (int32_t id : ids) in_range = in_range && id < tok.vocab_size();
  check(text.ok() == in_range);
  if (!text.ok()) {
    check(text.status().code() == vosti::StatusCode::kOutOfRange);
    return 0;
  }
  check(vosti::is_valid_utf8(*text));
  check_stream(tok, ids, *text, (data[0] & 0x80) != 0);
  return 0;
}
