// GrammarCache, Grammar and GrammarState over xgrammar (built only when its sources were fetched).
#include <xgrammar/xgrammar.h>

#include <algorithm>
#include <list>
#include <mutex>
#include <unordered_map>

#include "core/check.h"
#include "structured/grammar.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace vosti {

struct Grammar::Impl {
  xgrammar::CompiledGrammar compiled;
  int64_t vocab_size = 0;
};

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;
int64_t Grammar::vocab_size() const { return impl_->vocab_size; }

struct GrammarState::Impl {
  xgrammar::GrammarMatcher matcher;
};

namespace {

// xgrammar's error text without its "[hh:mm:ss] file.cc:line: " prefix and trailing newline.
std::string clean_message(std::string m) {
  if (!m.empty() && m[0] == '[') {
    const size_t close = m.find("] ");
    const size_t colon = close == std::string::npos ? close : m.find(": ", close + 2);
    if (colon != std::string::npos) m = m.substr(colon + 2);
  }
  while (!m.empty() && (m.back() == '\n' || m.back() == ' ')) m.pop_back();
  return m;
}

int32_t words_for(int64_t vocab_size) { return static_cast<int32_t>((vocab_size + 31) / 32); }

// A one-dimensional int32 DLTensor over `mask` (xgrammar's bitmask layout is ours).
DLTensor mask_tensor(std::span<uint32_t> mask, int64_t* shape) {
  DLTensor t{};
  t.data = mask.data();
  t.device = DLDevice{kDLCPU, 0};
  t.ndim = 1;
  t.dtype = xgrammar::GetBitmaskDLType();
  shape[0] = static_cast<int64_t>(mask.size());
  t.shape = shape;
  t.strides = nullptr;
  t.byte_offset = 0;
  return t;
}

// A plain added token's content (raw text) in the alphabet of the vocabulary's pieces.
std::string as_piece(const std::string& content, PieceEncoding e) {
  switch (e) {
    case PieceEncoding::kByteLevel:
      return gpt2_chars_from_bytes(content);
    case PieceEncoding::kByteFallback: {
      std::string out;
      for (const char c : content) out += c == ' ' ? std::string("\u2581") : std::string(1, c);
      return out;
    }
    case PieceEncoding::kRaw:
      break;
  }
  return content;
}

// Whether `id`, one of special_token_ids(), is a plain added token: one that decoding writes as its
// content (not special, no stop, BOS, EOS, UNK or PAD id), such as Qwen's <tool_call>.
bool is_plain_added(const Tokenizer& t, int32_t id) {
  return !t.is_special(id) && !t.is_stop(id) && id != t.bos_id() && id != t.eos_id() && id != t.unk_id() &&
         id != t.pad_id();
}

xgrammar::VocabType vocab_type(PieceEncoding e) {
  switch (e) {
    case PieceEncoding::kByteLevel:
      return xgrammar::VocabType::BYTE_LEVEL;
    case PieceEncoding::kByteFallback:
      return xgrammar::VocabType::BYTE_FALLBACK;
    case PieceEncoding::kRaw:
      break;
  }
  return xgrammar::VocabType::RAW;
}

}  // namespace

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar)
    : grammar_(std::move(grammar)),
      impl_(std::make_unique<Impl>(Impl{xgrammar::GrammarMatcher(grammar_->impl().compiled, std::nullopt,
                                                                 /*terminate_without_stop_token=*/false,
                                                                 /*max_rollback_tokens=*/-1)})),
      mask_words_(words_for(grammar_->vocab_size())) {}

GrammarState::~GrammarState() = default;

void GrammarState::fill_next_mask(std::span<uint32_t> mask) {
  VOSTI_CHECK(static_cast<int32_t>(mask.size()) == mask_words_, "grammar mask of the wrong size");
  if (impl_->matcher.IsTerminated()) {
    std::fill(mask.begin(), mask.end(), 0u);
    return;
  }
  int64_t shape[1];
  DLTensor t = mask_tensor(mask, shape);
  impl_->matcher.FillNextTokenBitmask(&t);
}

bool GrammarState::accept(int32_t token) {
  if (token < 0 || token >= grammar_->vocab_size()) return false;
  return impl_->matcher.AcceptToken(token);
}

void GrammarState::rollback(int32_t num_tokens) {
  if (num_tokens > 0) impl_->matcher.Rollback(num_tokens);
}

bool GrammarState::terminated() const { return impl_->matcher.IsTerminated(); }
bool GrammarState::completed() const { return impl_->matcher.IsCompleted(); }

struct GrammarCache::Impl {
  Impl(xgrammar::TokenizerInfo info, int64_t vocab, size_t cap)
      : vocab_size(vocab), capacity(cap), compiler(info, /*max_threads=*/1, /*cache_enabled=*/false) {}

  const int64_t vocab_size;
  const size_t capacity;
  std::mutex mu;  // guards everything below, and the compiler
  xgrammar::GrammarCompiler compiler;
  using Entry = std::pair<std::string, std::shared_ptr<const Grammar>>;
  std::list<Entry> lru;  // most recently used first
  std::unordered_map<std::string, std::list<Entry>::iterator> index;
  int64_t num_compiled = 0;

  xgrammar::CompiledGrammar compile_uncached(const StructuredOutputs& spec) {
    switch (spec.kind) {
      case StructuredKind::kJsonSchema:
        // Compact JSON (no free whitespace): a small model cannot loop on blank lines, and the
        // output is what json.dumps(separators=(",", ": ")) writes.
        return compiler.CompileJSONSchema(spec.text, /*any_whitespace=*/false);
      case StructuredKind::kJsonObject:
        return compiler.CompileBuiltinJSONGrammar();
      case StructuredKind::kRegex:
        return compiler.CompileRegex(spec.text);
      case StructuredKind::kChoice:
        return compiler.CompileGrammar(spec.choice_grammar());
      case StructuredKind::kGrammar:
        return compiler.CompileGrammar(spec.text);
      case StructuredKind::kStructuralTag:
        return compiler.CompileStructuralTag(spec.text);
    }
    VOSTI_CHECK(false, "unknown structured output kind");
    return compiler.CompileBuiltinJSONGrammar();
  }
};

GrammarCache::GrammarCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarCache::~GrammarCache() = default;

Result<std::shared_ptr<GrammarCache>> GrammarCache::create(const Tokenizer& tokenizer, int64_t vocab_size,
                                                           std::vector<int32_t> stop_ids, size_t capacity) {
  if (vocab_size < tokenizer.vocab_size())
    return invalid_argument("structured outputs: the model's vocabulary (" + std::to_string(vocab_size) +
                            " ids) is smaller than its tokenizer's (" + std::to_string(tokenizer.vocab_size()) + ")");
  std::vector<int32_t> not_text = tokenizer.special_token_ids();
  std::vector<std::string> pieces(static_cast<size_t>(tokenizer.vocab_size()));
  for (int32_t id = 0; id < static_cast<int32_t>(pieces.size()); ++id) {
    const std::string piece = tokenizer.id_to_piece(id).value_or("");
    if (!std::binary_search(not_text.begin(), not_text.end(), id)) {
      pieces[static_cast<size_t>(id)] = piece;
    } else if (is_plain_added(tokenizer, id)) {
      // Decoded as its text, so it is that text to the grammar (a forced <tool_call> may be the token).
      pieces[static_cast<size_t>(id)] = as_piece(piece, tokenizer.piece_encoding());
    }
    // Else "", which marks a special token for xgrammar: never allowed inside the grammar.
  }
  std::sort(stop_ids.begin(), stop_ids.end());
  stop_ids.erase(std::unique(stop_ids.begin(), stop_ids.end()), stop_ids.end());
  std::erase_if(stop_ids, [&](int32_t id) { return id < 0 || id >= vocab_size; });
  try {
    xgrammar::TokenizerInfo info(pieces, vocab_type(tokenizer.piece_encoding()), static_cast<int>(vocab_size), stop_ids,
                                 /*add_prefix_space=*/false);
    return std::shared_ptr<GrammarCache>(
        new GrammarCache(std::make_unique<Impl>(std::move(info), vocab_size, std::max<size_t>(capacity, 1))));
  } catch (const std::exception& e) {
    return invalid_argument("structured outputs: xgrammar refused the vocabulary: " + clean_message(e.what()));
  }
}

Result<std::shared_ptr<const Grammar>> GrammarCache::compile(const StructuredOutputs& spec) {
  VOSTI_RETURN_IF_ERROR(spec.validate());
  const std::string key = spec.cache_key();
  std::lock_guard<std::mutex> lock(impl_->mu);
  if (auto it = impl_->index.find(key); it != impl_->index.end()) {
    impl_->lru.splice(impl_->lru.begin(), impl_->lru, it->second);
    return it->second->second;
  }
  std::shared_ptr<const Grammar> grammar;
  try {
    auto g = std::make_unique<Grammar::Impl>(Grammar::Impl{impl_->compile_uncached(spec), impl_->vocab_size});
    grammar = std::make_shared<const Grammar>(std::move(g));
  } catch (const std::exception& e) {
    return invalid_argument(std::string("structured outputs: invalid ") + structured_kind_name(spec.kind) + ": " +
                            clean_message(e.what()));
  }
  ++impl_->num_compiled;
  impl_->lru.emplace_front(key, grammar);
  impl_->index[key] = impl_->lru.begin();
  while (impl_->lru.size() > impl_->capacity) {
    impl_->index.erase(impl_->lru.back().first);
    impl_->lru.pop_back();
  }
  return grammar;
}

int64_t GrammarCache::num_compiled() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->num_compiled;
}

size_t GrammarCache::size() const {
  std::lock_guard<std::mutex> lock(impl_->mu);
  return impl_->lru.size();
}

}  // namespace vosti
