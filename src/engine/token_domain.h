// TokenDomain: the token ids of a served model a client may use as ordinary text, and the ones
// it may not (BOS, EOS, added and special tokens). `vosti serve` publishes it in /v1/models, and
// the paper protocol (tools/verify) draws its random prompts from it, in-process or over HTTP,
// so that both make the same prompts for the same model.
// Thread safety: a value type and a pure function.
#pragma once

#include <cstdint>
#include <vector>

namespace vosti {

struct ModelConfig;
class Tokenizer;

struct TokenDomain {
  int64_t vocab_size = 0;                  // ids are in [0, vocab_size)
  int32_t bos_token_id = -1;               // -1: the model has none
  std::vector<int32_t> eos_token_ids;      // ascending
  std::vector<int32_t> special_token_ids;  // ascending: BOS, EOS, the tokenizer's added and special ids
};

// The model's vocabulary size and BOS/EOS (its config), with the tokenizer's special ids when it
// has one (`tokenizer` may be null: then BOS and EOS are the special ids).
TokenDomain token_domain(const ModelConfig& model, const Tokenizer* tokenizer);

}  // namespace vosti
