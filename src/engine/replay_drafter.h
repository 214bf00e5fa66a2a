// ReplayDrafter: a drafter that knows each request's output already (a reference run's) and
// proposes it, or, `wrong`, every token of it plus one: drafts that are always right or always
// wrong, whatever the model. For the tests of the promise under speculation and for the benchmark
// of the mechanism's ceiling (random-weight models copy nothing, so n-gram drafts measure nothing
// there). Never a deployment's drafter: the engine makes those from the config (make_drafter).
// Thread safety: immutable after construction.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "engine/speculative.h"

namespace vosti {

class ReplayDrafter final : public Drafter {
 public:
  // (prompt, its output) pairs; `vocab`: wrong drafts stay inside it.
  ReplayDrafter(std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> known, bool wrong, int32_t vocab)
      : known_(std::move(known)), wrong_(wrong), vocab_(vocab) {}

  // The rest of the known output of the first prompt that `tokens` continues along its output.
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t max_tokens) const override {
    for (const auto& [prompt, output] : known_) {
      if (tokens.size() < prompt.size() || !std::equal(prompt.begin(), prompt.end(), tokens.begin())) continue;
      const size_t at = tokens.size() - prompt.size();
      if (!std::equal(output.begin(), output.begin() + static_cast<std::ptrdiff_t>(std::min(at, output.size())),
                      tokens.begin() + static_cast<std::ptrdiff_t>(prompt.size())))
        continue;
      std::vector<int32_t> draft;
      for (size_t i = at; i < output.size() && static_cast<int32_t>(draft.size()) < max_tokens; ++i)
        draft.push_back(wrong_ ? (output[i] + 1) % vocab_ : output[i]);
      return draft;
    }
    return {};
  }

 private:
  std::vector<std::pair<std::vector<int32_t>, std::vector<int32_t>>> known_;
  bool wrong_;
  int32_t vocab_;
};

}  // namespace vosti
