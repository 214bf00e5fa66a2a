#include "engine/token_domain.h"

#include <algorithm>

#include "model/model_config.h"
#include "tokenizer/tokenizer.h"

namespace vosti {

TokenDomain token_domain(const ModelConfig& model, const Tokenizer* tokenizer) {
  TokenDomain d;
  d.vocab_size = model.vocab_size;
  if (model.bos_token_id >= 0) {
    d.bos_token_id = static_cast<int32_t>(model.bos_token_id);
  } else if (tokenizer != nullptr && tokenizer->bos_id()) {
    d.bos_token_id = *tokenizer->bos_id();
  }
  for (int64_t id : model.eos_token_ids) d.eos_token_ids.push_back(static_cast<int32_t>(id));
  std::sort(d.eos_token_ids.begin(), d.eos_token_ids.end());
  d.eos_token_ids.erase(std::unique(d.eos_token_ids.begin(), d.eos_token_ids.end()), d.eos_token_ids.end());
  std::vector<int32_t> special = d.eos_token_ids;
  if (d.bos_token_id >= 0) special.push_back(d.bos_token_id);
  if (tokenizer != nullptr) {
    const std::vector<int32_t> ids = tokenizer->special_token_ids();
    special.insert(special.end(), ids.begin(), ids.end());
  }
  std::sort(special.begin(), special.end());
  special.erase(std::unique(special.begin(), special.end()), special.end());
  d.special_token_ids = std::move(special);
  return d;
}

}  // namespace vosti
