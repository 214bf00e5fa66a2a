#include "tools/verify/paper_protocol.h"

#include <algorithm>
#include <numeric>
#include <set>

#include "tools/verify/python_random.h"

namespace vosti {

const char* relation_name(Relation r) {
  switch (r) {
    case Relation::kBatch:
      return "batch composition";
    case Relation::kChunk:
      return "chunking";
    case Relation::kPrefillDecode:
      return "prefill/decode";
    case Relation::kPrefixReuse:
      return "prefix reuse";
  }
  return "?";
}

const char* relation_key(Relation r) {
  switch (r) {
    case Relation::kBatch:
      return "batch";
    case Relation::kChunk:
      return "chunk";
    case Relation::kPrefillDecode:
      return "pd";
    case Relation::kPrefixReuse:
      return "cache";
  }
  return "?";
}

const PaperProtocolSpec& paper_protocol_spec() {
  static const PaperProtocolSpec spec = [] {
    PaperProtocolSpec s;
    s.batch_lengths = {17,  31,   32,   33,   63,   64,   65,   127,  128,  129,  255,  256,  257,  511,  512,  513,
                       767, 1023, 1024, 1025, 1535, 2047, 2048, 2049, 3071, 4095, 4096, 4097, 6143, 8191, 8192, 8193};
    s.group_sizes = {2, 4, 8};
    s.fresh_spots = {0, 10, 21, 31};
    s.chunk_budgets = {64, 128, 256, 512, 1024};
    s.chunk_long_lengths = {2048, 8192, 32768};
    s.pd_lengths = {257, 8192, 32768};
    s.partial_donors = {15, 16, 17, 127, 128, 129, 8192};
    s.full_lengths = {129, 1025};
    return s;
  }();
  return spec;
}

std::vector<int32_t> paper_prompt(const TokenDomain& domain, int32_t length, uint64_t seed) {
  PythonRandom rng(seed);
  std::vector<int32_t> out;
  out.reserve(static_cast<size_t>(std::max(length, 0)));
  if (domain.bos_token_id >= 0 && length > 0) out.push_back(domain.bos_token_id);
  const auto& special = domain.special_token_ids;
  while (static_cast<int32_t>(out.size()) < length) {
    const auto t = static_cast<int32_t>(rng.below(static_cast<uint32_t>(domain.vocab_size)));
    if (!std::binary_search(special.begin(), special.end(), t)) out.push_back(t);
  }
  return out;
}

namespace {

// Builds prompts of the paper's lengths, cut to what the context allows, and records each cut.
class PromptMaker {
 public:
  PromptMaker(const TokenDomain& domain, uint64_t seed, int32_t context, std::vector<LengthCut>* cuts)
      : domain_(domain), seed_(seed), context_(context), cuts_(cuts) {}

  // The paper's `length`, cut so that `room` more tokens still fit the context.
  int32_t fit(const std::string& what, int32_t length, int32_t room) const {
    const int32_t used = std::min(length, context_ - room);
    if (used != length) cuts_->push_back({what, length, used});
    return used;
  }
  std::vector<int32_t> prompt(int32_t length, uint64_t offset) const {
    return paper_prompt(domain_, length, seed_ + offset);
  }

 private:
  const TokenDomain& domain_;
  uint64_t seed_;
  int32_t context_;
  std::vector<LengthCut>* cuts_;
};

// The artifact's compositions: sizes 2, 4, 8 x orders forward, reversed, shuffled x slices.
std::vector<std::vector<int32_t>> compositions(const PaperProtocolSpec& spec) {
  const int32_t n = static_cast<int32_t>(spec.batch_lengths.size());
  std::vector<int32_t> forward(static_cast<size_t>(n));
  std::iota(forward.begin(), forward.end(), 0);
  std::vector<int32_t> reversed(forward.rbegin(), forward.rend());
  std::vector<int32_t> shuffled = forward;
  PythonRandom(spec.seed + spec.shuffle_offset).shuffle(std::span<int32_t>(shuffled));
  std::vector<std::vector<int32_t>> groups;
  for (int32_t size : spec.group_sizes)
    for (const auto* order : {&forward, &reversed, &shuffled})
      for (int32_t offset = 0; offset < n; offset += size)
        groups.emplace_back(order->begin() + offset, order->begin() + std::min(offset + size, n));
  return groups;
}

std::vector<int32_t> edges(const std::vector<int32_t>& boundaries) {
  std::vector<int32_t> out;
  for (int32_t b : boundaries) out.insert(out.end(), {b - 1, b, b + 1});
  return out;
}

void plan_prefix_cases(const PaperProtocolSpec& spec, const PromptMaker& make, int32_t window, int32_t out_tokens,
                       PaperPlan& plan) {
  std::set<int32_t> donors(spec.partial_donors.begin(), spec.partial_donors.end());
  for (int32_t e : edges({window > 0 ? window : spec.default_window})) donors.insert(e);
  uint64_t index = 0;
  for (int32_t count : donors) {
    const int32_t n = make.fit("prefix donor", count, spec.reuse_suffix + out_tokens);
    std::vector<int32_t> query = make.prompt(n + spec.reuse_suffix, 3000 + index++);
    PrefixCase c{"partial-" + std::to_string(count), {query.begin(), query.begin() + n}, query, n, n >= 128};
    plan.prefix_cases.push_back(std::move(c));
  }
  index = 0;
  for (int32_t count : spec.full_lengths) {
    const int32_t n = make.fit("prefix full query", count, out_tokens);
    std::vector<int32_t> query = make.prompt(n, 4000 + index++);
    plan.prefix_cases.push_back({"full-" + std::to_string(count), query, query, n, true});
  }
  const int32_t shared_len = make.fit("divergent shared prefix", spec.divergent_shared, spec.reuse_suffix + out_tokens);
  const std::vector<int32_t> shared = make.prompt(shared_len, 5000);
  auto suffix = [&](uint64_t offset) {  // the artifact's: 127 drawn tokens, then BOS (prompt(1))
    std::vector<int32_t> s = make.prompt(spec.reuse_suffix, offset);
    s.erase(s.begin());
    const std::vector<int32_t> one = make.prompt(1, offset);
    s.insert(s.end(), one.begin(), one.end());
    std::vector<int32_t> p = shared;
    p.insert(p.end(), s.begin(), s.end());
    return p;
  };
  plan.prefix_cases.push_back({"divergent-suffix", suffix(5001), suffix(5002), shared_len, true});
  const int32_t donor_len =
      make.fit("generated donor", spec.generated_donor, (spec.output_tokens - 1) + spec.reuse_suffix + out_tokens);
  plan.generated_donor = make.prompt(donor_len, 6000);
  plan.generated_suffix = make.prompt(spec.reuse_suffix, 6001);
}

}  // namespace

Result<PaperPlan> make_paper_plan(const PaperProtocolSpec& spec, const TokenDomain& domain, int32_t window,
                                  int32_t context) {
  if (context < 512)
    return invalid_argument("the paper protocol needs a context of at least 512 tokens, got " +
                            std::to_string(context) + ": give a larger --max-model-len");
  if (static_cast<int64_t>(domain.special_token_ids.size()) >= domain.vocab_size)
    return invalid_argument("the vocabulary has no ordinary token to draw prompts from");
  PaperPlan plan;
  plan.seed = spec.seed;
  plan.context = context;
  plan.window = window;
  plan.output_tokens = spec.output_tokens;
  plan.arm_token_budget = spec.arm_token_budget;
  plan.call_output_tokens = spec.call_output_tokens;
  const int32_t out = spec.call_output_tokens;
  const PromptMaker make(domain, spec.seed, context, &plan.cuts);
  for (size_t i = 0; i < spec.batch_lengths.size(); ++i)
    plan.batch_prompts.push_back(make.prompt(make.fit("batch prompt", spec.batch_lengths[i], out), i));
  plan.batch_groups = compositions(spec);
  plan.fresh_spots = spec.fresh_spots;

  std::set<int32_t> chunk_lengths(spec.chunk_long_lengths.begin(), spec.chunk_long_lengths.end());
  std::vector<int32_t> boundaries = spec.chunk_budgets;
  if (window > 0) boundaries.push_back(window);
  for (int32_t e : edges(boundaries)) chunk_lengths.insert(e);
  uint64_t index = 0;
  for (int32_t length : chunk_lengths) {
    plan.chunk_prompts.push_back(make.prompt(make.fit("chunk prompt", length, out), 1000 + index++));
    plan.full_budget = std::max(plan.full_budget, static_cast<int32_t>(plan.chunk_prompts.back().size()));
  }
  plan.chunk_budgets = spec.chunk_budgets;
  for (size_t i = 0; i < spec.pd_lengths.size(); ++i)
    plan.pd_prompts.push_back(  // its longest teacher prompt, prompt + y[:127], generates `out` tokens
        make.prompt(make.fit("prefill/decode prompt", spec.pd_lengths[i], spec.output_tokens - 1 + out), 2000 + i));
  plan_prefix_cases(spec, make, window, out, plan);
  return plan;
}

int64_t PaperPlan::expected(Relation r) const {
  switch (r) {
    case Relation::kBatch: {
      int64_t n = 2 * static_cast<int64_t>(fresh_spots.size());
      for (const auto& g : batch_groups) n += static_cast<int64_t>(g.size());
      return n;
    }
    case Relation::kChunk:
      return static_cast<int64_t>(chunk_prompts.size() * chunk_budgets.size());
    case Relation::kPrefillDecode:
      return static_cast<int64_t>(pd_prompts.size()) * output_tokens;
    case Relation::kPrefixReuse:
      return static_cast<int64_t>(prefix_cases.size()) + 1;
  }
  return 0;
}

int32_t PaperPlan::longest_sequence() const {
  size_t n = 0;
  const auto take = [&](size_t len) { n = std::max(n, len); };
  for (const auto& p : batch_prompts) take(p.size() + static_cast<size_t>(call_output_tokens));
  for (const auto& p : chunk_prompts) take(p.size() + static_cast<size_t>(call_output_tokens));
  for (const auto& p : pd_prompts) take(p.size() + static_cast<size_t>(output_tokens - 1 + call_output_tokens));
  for (const auto& c : prefix_cases) take(std::max(c.donor.size(), c.query.size()) + call_output_tokens);
  take(generated_donor.size() + static_cast<size_t>(output_tokens - 1) + generated_suffix.size() +
       static_cast<size_t>(call_output_tokens));
  return static_cast<int32_t>(n);
}

int64_t PaperPlan::num_prompt_tokens() const {
  auto len = [](const std::vector<int32_t>& p) { return static_cast<int64_t>(p.size()); };
  int64_t n = 0;
  for (const auto& p : batch_prompts) n += len(p);
  for (const auto& g : batch_groups)
    for (int32_t i : g) n += len(batch_prompts[static_cast<size_t>(i)]);
  for (int32_t i : fresh_spots) n += len(batch_prompts[static_cast<size_t>(i)]);
  for (const auto& p : chunk_prompts) n += len(p) * static_cast<int64_t>(1 + chunk_budgets.size());
  for (const auto& p : pd_prompts) n += len(p) + output_tokens * len(p) + output_tokens * (output_tokens - 1) / 2;
  for (const auto& c : prefix_cases) n += len(c.donor) + 2 * len(c.query);
  const int64_t followup = len(generated_donor) + output_tokens - 1 + len(generated_suffix);
  return n + len(generated_donor) + 2 * followup;
}

}  // namespace vosti
