#include <algorithm>

#include "structured/grammar.h"

namespace vosti {

Result<StartedGrammar> start_grammar(GrammarCache& cache, const StructuredOutputs& spec) {
  VOSTI_ASSIGN_OR_RETURN(std::shared_ptr<const Grammar> grammar, cache.compile(spec));
  StartedGrammar out;
  out.state = std::make_unique<GrammarState>(std::move(grammar));
  out.first_mask.resize(static_cast<size_t>(out.state->mask_words()));
  out.state->fill_next_mask(out.first_mask);
  if (std::all_of(out.first_mask.begin(), out.first_mask.end(), [](uint32_t w) { return w == 0; }))
    return invalid_argument(std::string("structured outputs: the ") + structured_kind_name(spec.kind) +
                            " allows no first token (it accepts no output this model's vocabulary can spell)");
  return out;
}

}  // namespace vosti
