// The four relations of the paper protocol, one function each, in the artifact's order and
// arms (report_suite.py); what they compare is paper_protocol.h's header.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>
#include <map>

#include "tools/verify/paper_runner.h"

namespace vosti {
namespace {

using Prompt = std::vector<int32_t>;

struct Run {
  const PaperPlan& plan;
  ProtocolBackend& backend;
  const std::function<void(const std::string&)>& progress;
  void say(const std::string& line) const {
    if (progress) progress(line);
  }
  // One prompt alone, `max_tokens` generated, the first `record` rows back.
  Result<CallResult> one(const Prompt& p, int32_t max_tokens, int32_t record) const {
    return backend.run_call(std::span<const Prompt>(&p, 1), max_tokens, record);
  }
  Result<CallResult> one(const Prompt& p) const { return one(p, plan.call_output_tokens, 1); }
  Status arm(const std::string& name, int32_t budget, bool caching, bool fresh = false) const {
    say("  arm " + name);
    return backend.begin_arm({name, budget, caching, fresh});
  }
};

// Row `pa` of `a` against row `pb` of `b`, byte for byte (or digest / top-20 text for text).
RowComparison compare(std::string label, const PromptResult& a, size_t pa, const PromptResult& b, size_t pb) {
  RowComparison c;
  c.label = std::move(label);
  if (!a.rows.empty() || !b.rows.empty()) {
    if (pa >= a.rows.size() || pb >= b.rows.size() || a.rows[pa].size() != b.rows[pb].size()) {
      c.detail = "a row is missing or of another size";
      return c;
    }
    const std::vector<float>& x = a.rows[pa];
    const std::vector<float>& y = b.rows[pb];
    c.equal = std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
    if (!c.equal) {
      size_t i = 0;
      while (std::memcmp(&x[i], &y[i], sizeof(float)) == 0) ++i;
      size_t diffs = 0;
      for (size_t k = 0; k < x.size(); ++k) diffs += std::memcmp(&x[k], &y[k], sizeof(float)) != 0;
      const auto argmax = [](const std::vector<float>& v) { return std::max_element(v.begin(), v.end()) - v.begin(); };
      char buf[200];
      std::snprintf(buf, sizeof buf, "%zu of %zu logits differ, first at token %zu (%.9g vs %.9g); argmax %td vs %td",
                    diffs, x.size(), i, static_cast<double>(x[i]), static_cast<double>(y[i]), argmax(x), argmax(y));
      c.detail = buf;
    }
    return c;
  }
  if (pa >= a.row_texts.size() || pb >= b.row_texts.size()) {
    c.detail = "the server returned no row evidence";
    return c;
  }
  c.equal = a.row_texts[pa] == b.row_texts[pb];
  if (!c.equal) c.detail = a.row_texts[pa].substr(0, 80) + " vs " + b.row_texts[pb].substr(0, 80);
  return c;
}

// A call that should have found nothing in the prefix cache.
void witness_cold(RelationResult& r, const std::string& label, const CallResult& c) {
  if (c.num_cached_tokens < 0) return;  // not reported: nothing to witness
  r.witnesses.push_back({label + ": cold", c.num_cached_tokens == 0,
                         std::to_string(c.num_cached_tokens) + " prompt tokens from the prefix cache"});
}

// A prompt of `length` tokens alone under `budget` tokens a step: its prefill took ceil(length /
// budget) steps (the last samples the first token), then one a generated token (where observable).
void witness_chunks(RelationResult& r, const std::string& label, const CallResult& c, size_t length, int32_t budget,
                    int32_t max_tokens) {
  if (!c.num_steps) return;
  const int64_t chunks = (static_cast<int64_t>(length) + budget - 1) / budget;
  r.witnesses.push_back({label + ": chunked", *c.num_steps == chunks + max_tokens - 1,
                         std::to_string(*c.num_steps) + " steps for " + std::to_string(chunks) + " chunks"});
}

Status run_batch(const Run& x, RelationResult& r) {
  const PaperPlan& plan = x.plan;
  VOSTI_RETURN_IF_ERROR(x.arm("isolated-singles", plan.arm_token_budget, false));
  std::vector<PromptResult> singles;
  for (size_t i = 0; i < plan.batch_prompts.size(); ++i) {
    VOSTI_ASSIGN_OR_RETURN(CallResult c, x.one(plan.batch_prompts[i]));
    witness_cold(r, "single-" + std::to_string(i), c);
    singles.push_back(std::move(c.prompts[0]));
  }
  VOSTI_RETURN_IF_ERROR(x.arm("compositions", plan.arm_token_budget, false));
  std::map<int32_t, PromptResult> in_eight;  // fresh spot -> its row in its first batch of 8
  for (size_t g = 0; g < plan.batch_groups.size(); ++g) {
    const std::vector<int32_t>& group = plan.batch_groups[g];
    std::vector<Prompt> prompts;
    for (int32_t i : group) prompts.push_back(plan.batch_prompts[static_cast<size_t>(i)]);
    VOSTI_ASSIGN_OR_RETURN(CallResult c, x.backend.run_call(prompts, plan.call_output_tokens, 1));
    const std::string name = "composition-" + std::to_string(g);
    witness_cold(r, name, c);
    if (c.co_scheduled) r.witnesses.push_back({name + ": shared a step", *c.co_scheduled, ""});
    for (size_t k = 0; k < group.size(); ++k) {
      const int32_t i = group[k];
      r.comparisons.push_back(
          compare(name + "/prompt-" + std::to_string(i), singles[static_cast<size_t>(i)], 0, c.prompts[k], 0));
      const bool spot = std::find(plan.fresh_spots.begin(), plan.fresh_spots.end(), i) != plan.fresh_spots.end();
      if (spot && group.size() == 8 && !in_eight.contains(i)) in_eight[i] = c.prompts[k];
    }
  }
  for (int32_t i : plan.fresh_spots) {
    const std::string name = "fresh-single-" + std::to_string(i);
    VOSTI_RETURN_IF_ERROR(x.arm(name, plan.arm_token_budget, false, /*fresh=*/true));
    VOSTI_ASSIGN_OR_RETURN(CallResult c, x.one(plan.batch_prompts[static_cast<size_t>(i)]));
    witness_cold(r, name, c);
    r.comparisons.push_back(
        compare("fresh-vs-isolated-" + std::to_string(i), c.prompts[0], 0, singles[static_cast<size_t>(i)], 0));
    r.comparisons.push_back(compare("fresh-vs-batch-" + std::to_string(i), c.prompts[0], 0, in_eight[i], 0));
  }
  return Status();
}

Status run_chunk(const Run& x, RelationResult& r) {
  const PaperPlan& plan = x.plan;
  std::vector<std::string> why;
  for (int32_t b : plan.chunk_budgets) why.push_back(x.backend.chunking_unavailable(b));
  if (std::all_of(why.begin(), why.end(), [](const std::string& w) { return !w.empty(); })) {
    r.not_tested = why.front();
    return Status();
  }
  std::map<size_t, int> seen;  // prompt length -> prompts of it (labels stay unique under cuts)
  std::vector<std::string> names;
  for (const Prompt& p : plan.chunk_prompts) {
    const int n = seen[p.size()]++;
    names.push_back(std::to_string(p.size()) + (n > 0 ? "#" + std::to_string(n) : ""));
  }
  VOSTI_RETURN_IF_ERROR(x.arm("chunk-" + std::to_string(plan.full_budget) + " (whole)", plan.full_budget, false));
  std::vector<PromptResult> whole;
  for (size_t i = 0; i < plan.chunk_prompts.size(); ++i) {
    VOSTI_ASSIGN_OR_RETURN(CallResult c, x.one(plan.chunk_prompts[i]));
    witness_cold(r, "whole-" + names[i], c);
    witness_chunks(r, "whole-" + names[i], c, plan.chunk_prompts[i].size(), plan.full_budget, plan.call_output_tokens);
    whole.push_back(std::move(c.prompts[0]));
  }
  for (size_t k = 0; k < plan.chunk_budgets.size(); ++k) {
    const int32_t b = plan.chunk_budgets[k];
    if (!why[k].empty()) {
      for (size_t i = 0; i < plan.chunk_prompts.size(); ++i)
        r.comparisons.push_back({names[i] + "/" + std::to_string(b), false, false, why[k]});
      continue;
    }
    VOSTI_RETURN_IF_ERROR(x.arm("chunk-" + std::to_string(b), b, false));
    for (size_t i = 0; i < plan.chunk_prompts.size(); ++i) {
      VOSTI_ASSIGN_OR_RETURN(CallResult c, x.one(plan.chunk_prompts[i]));
      const std::string label = names[i] + "/" + std::to_string(b);
      witness_cold(r, label, c);
      witness_chunks(r, label, c, plan.chunk_prompts[i].size(), b, plan.call_output_tokens);
      r.comparisons.push_back(compare(label, whole[i], 0, c.prompts[0], 0));
    }
  }
  return Status();
}

Status run_prefill_decode(const Run& x, RelationResult& r) {
  const PaperPlan& plan = x.plan;
  const int32_t n = plan.output_tokens;
  VOSTI_RETURN_IF_ERROR(x.arm("generate", plan.arm_token_budget, false));
  std::vector<PromptResult> generated;
  for (size_t i = 0; i < plan.pd_prompts.size(); ++i) {
    VOSTI_ASSIGN_OR_RETURN(CallResult c, x.one(plan.pd_prompts[i], n, n));
    witness_cold(r, "generate-" + std::to_string(i), c);
    if (c.prompts[0].tokens.empty()) {
      r.not_tested = "the server returned no output token ids, so no prompt + y[:i] can be built";
      return Status();
    }
    if (static_cast<int32_t>(c.prompts[0].tokens.size()) != n)
      return internal_error("prefill/decode prompt " + std::to_string(i) + " generated " +
                            std::to_string(c.prompts[0].tokens.size()) + " tokens, not " + std::to_string(n));
    generated.push_back(std::move(c.prompts[0]));
  }
  VOSTI_RETURN_IF_ERROR(x.arm("teacher", plan.arm_token_budget, false));
  for (size_t i = 0; i < plan.pd_prompts.size(); ++i) {
    Prompt teacher = plan.pd_prompts[i];
    for (int32_t j = 0; j < n; ++j) {  // the last row of a prefill of prompt + y[:j] predicts y[j]
      VOSTI_ASSIGN_OR_RETURN(CallResult c, x.one(teacher));
      const std::string label = std::to_string(i) + "/" + std::to_string(j);
      witness_cold(r, "teacher-" + label, c);
      r.comparisons.push_back(compare(label, generated[i], static_cast<size_t>(j), c.prompts[0], 0));
      teacher.push_back(generated[i].tokens[static_cast<size_t>(j)]);
    }
  }
  return Status();
}

// The warm query (after its donor, in the same engine) against the cold one (after a reset).
Status run_prefix_case(const Run& x, RelationResult& r, const std::string& label, const Prompt& query, int64_t min_hits,
                       int64_t max_hits, const std::function<Result<Prompt>()>& donor) {
  VOSTI_RETURN_IF_ERROR(x.backend.reset_prefix_cache());
  VOSTI_ASSIGN_OR_RETURN(Prompt q, donor());
  if (q.empty()) q = query;
  VOSTI_ASSIGN_OR_RETURN(CallResult warm, x.one(q));
  const int64_t hits = warm.num_cached_tokens;
  r.witnesses.push_back({label + ": warm hit", hits >= min_hits && hits <= max_hits,
                         hits < 0 ? "the server reports no cached tokens" : std::to_string(hits) + " cached tokens"});
  VOSTI_RETURN_IF_ERROR(x.backend.reset_prefix_cache());  // every block evicted: the query recomputes it all
  VOSTI_ASSIGN_OR_RETURN(CallResult cold, x.one(q));
  witness_cold(r, label + " after reset", cold);
  r.comparisons.push_back(compare(label, cold.prompts[0], 0, warm.prompts[0], 0));
  return Status();
}

Status run_prefix_reuse(const Run& x, RelationResult& r) {
  const PaperPlan& plan = x.plan;
  r.not_tested = x.backend.prefix_reuse_unavailable();
  if (!r.not_tested.empty()) return Status();
  VOSTI_RETURN_IF_ERROR(x.arm("prefix", plan.arm_token_budget, true));
  for (const PrefixCase& pc : plan.prefix_cases) {
    auto donor = [&]() -> Result<Prompt> {
      VOSTI_ASSIGN_OR_RETURN(CallResult d, x.one(pc.donor));
      witness_cold(r, pc.label + " donor", d);
      return Prompt{};
    };
    VOSTI_RETURN_IF_ERROR(
        run_prefix_case(x, r, pc.label, pc.query, pc.require_positive ? 1 : 0, pc.prefix_limit, donor));
  }
  const int64_t donor_len = static_cast<int64_t>(plan.generated_donor.size());
  auto generated = [&]() -> Result<Prompt> {  // the donor generates; its first 127 tokens are reused
    VOSTI_ASSIGN_OR_RETURN(CallResult d, x.one(plan.generated_donor, plan.output_tokens, 0));
    witness_cold(r, "generated-prefix donor", d);
    const std::vector<int32_t>& y = d.prompts[0].tokens;
    if (static_cast<int32_t>(y.size()) != plan.output_tokens)
      return internal_error("the generated donor returned " + std::to_string(y.size()) + " token ids, not " +
                            std::to_string(plan.output_tokens));
    Prompt q = plan.generated_donor;
    q.insert(q.end(), y.begin(), y.end() - 1);
    q.insert(q.end(), plan.generated_suffix.begin(), plan.generated_suffix.end());
    return q;
  };
  return run_prefix_case(x, r, "generated-prefix", {}, donor_len + 1, donor_len + plan.output_tokens - 1, generated);
}

}  // namespace

Result<std::vector<Relation>> parse_relations(const std::vector<std::string>& keys) {
  std::vector<Relation> out;
  for (Relation r : kRelations)
    if (keys.empty() || std::find(keys.begin(), keys.end(), relation_key(r)) != keys.end()) out.push_back(r);
  for (const std::string& k : keys)
    if (std::none_of(std::begin(kRelations), std::end(kRelations), [&](Relation r) { return k == relation_key(r); }))
      return invalid_argument("--relations: unknown relation '" + k + "' (batch, chunk, pd, cache)");
  return out;
}

ProtocolReport run_paper_protocol(const PaperPlan& plan, ProtocolBackend& backend,
                                  const std::function<void(const std::string&)>& progress,
                                  std::span<const Relation> relations) {
  using Clock = std::chrono::steady_clock;
  ProtocolReport report;
  report.evidence = backend.evidence();
  report.plan = plan;
  const Run run{plan, backend, progress};
  const auto t0 = Clock::now();
  for (Relation rel : relations) {
    RelationResult r;
    r.relation = rel;
    r.expected = plan.expected(rel);
    run.say(std::string(relation_name(rel)) + ": " + std::to_string(r.expected) + " comparisons");
    const auto t = Clock::now();
    Status s;
    switch (rel) {
      case Relation::kBatch:
        s = run_batch(run, r);
        break;
      case Relation::kChunk:
        s = run_chunk(run, r);
        break;
      case Relation::kPrefillDecode:
        s = run_prefill_decode(run, r);
        break;
      case Relation::kPrefixReuse:
        s = run_prefix_reuse(run, r);
        break;
    }
    if (!s.ok()) r.error = s.to_string();
    r.seconds = std::chrono::duration<double>(Clock::now() - t).count();
    run.say("  " + r.status() + ": " + std::to_string(r.num_identical()) + " of " + std::to_string(r.expected) +
            " identical (" + std::to_string(static_cast<int64_t>(r.seconds)) + " s)" +
            (r.first_difference().empty() ? "" : "; first difference " + r.first_difference()));
    report.relations.push_back(std::move(r));
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  report.target = backend.description();  // after the run: an engine describes its device once made
  report.notes = backend.notes();
  return report;
}

}  // namespace vosti
