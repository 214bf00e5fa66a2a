// GrammarCache without xgrammar (its sources were not fetched at configure time): every entry
// point says how to get it. Grammar and GrammarState are never made.
#include "core/check.h"
#include "structured/grammar.h"

namespace vosti {

struct Grammar::Impl {};
struct GrammarState::Impl {};
struct GrammarCache::Impl {};

Grammar::Grammar(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Grammar::~Grammar() = default;
int64_t Grammar::vocab_size() const { return 0; }

GrammarState::GrammarState(std::shared_ptr<const Grammar> grammar) : grammar_(std::move(grammar)) {
  VOSTI_CHECK(false, "GrammarState without xgrammar");
}
GrammarState::~GrammarState() = default;
void GrammarState::fill_next_mask(std::span<uint32_t>) {}
bool GrammarState::accept(int32_t) { return false; }
void GrammarState::rollback(int32_t) {}
bool GrammarState::terminated() const { return true; }
bool GrammarState::completed() const { return true; }

GrammarCache::GrammarCache(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
GrammarCache::~GrammarCache() = default;

Result<std::shared_ptr<GrammarCache>> GrammarCache::create(const Tokenizer&, int64_t, std::vector<int32_t>, size_t) {
  return unimplemented(
      "structured outputs need xgrammar, which this build lacks: run scripts/fetch-xgrammar, then configure and "
      "build again");
}
Result<std::shared_ptr<const Grammar>> GrammarCache::compile(const StructuredOutputs&) {
  return unimplemented("structured outputs need xgrammar (scripts/fetch-xgrammar)");
}
int64_t GrammarCache::num_compiled() const { return 0; }
size_t GrammarCache::size() const { return 0; }

}  // namespace vosti
