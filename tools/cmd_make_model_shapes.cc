// The shapes of `vosti make-model` (tools/make_model_shapes.h): the real models' config.json
// numbers, special tokens and templates.
#include "tools/make_model_shapes.h"

namespace vosti::tools {

using nlohmann::ordered_json;

namespace {

// Gemma 3's text model (Gemma3ForCausalLM; the 4B..27B checkpoints are the language model of a
// Gemma3ForConditionalGeneration with the same text config): the config.json fields beyond the
// common ones.
ordered_json gemma3_extra(int64_t sliding_window, int64_t query_pre_attn_scalar) {
  return {{"hidden_activation", "gelu_pytorch_tanh"}, {"query_pre_attn_scalar", query_pre_attn_scalar},
          {"sliding_window", sliding_window},         {"sliding_window_pattern", 6},
          {"rope_local_base_freq", 10000.0},          {"final_logit_softcapping", nullptr},
          {"attn_logit_softcapping", nullptr},        {"pad_token_id", 0}};
}

// Gemma's byte-level stand-in keeps the real ids of the tokens a chat needs.
const std::vector<Special> kGemmaSpecials = {{0, "<pad>"},          {1, "<eos>"},  {2, "<bos>"},
                                             {3, "<unk>"},          {4, "<mask>"}, {105, "<start_of_turn>"},
                                             {106, "<end_of_turn>"}};

// Gemma 3's global layers (4B and up): linear RoPE scaling x8.
ordered_json gemma3_linear_rope() { return {{"factor", 8.0}, {"rope_type", "linear"}}; }

// Qwen3-MoE's config.json fields beyond the common ones (every layer sparse, renormalised top-k).
ordered_json qwen3_moe_extra(int64_t experts, int64_t top_k, int64_t expert_intermediate) {
  return {{"num_experts", experts}, {"num_experts_per_tok", top_k}, {"moe_intermediate_size", expert_intermediate},
          {"norm_topk_prob", true}, {"decoder_sparse_step", 1},     {"mlp_only_layers", ordered_json::array()}};
}

// Mixtral's (num_local_experts experts of the model's intermediate_size; no sliding window).
ordered_json mixtral_extra(int64_t experts, int64_t top_k) {
  return {{"num_local_experts", experts}, {"num_experts_per_tok", top_k}, {"sliding_window", nullptr}};
}

const std::vector<Special> kMistralSpecials = {{0, "<unk>"}, {1, "<s>"}, {2, "</s>"}};

}  // namespace

std::vector<Shape> make_model_shapes() {
  const ordered_json llama3_rope = {{"factor", 8.0},
                                    {"low_freq_factor", 1.0},
                                    {"high_freq_factor", 4.0},
                                    {"original_max_position_embeddings", 8192},
                                    {"rope_type", "llama3"}};
  ordered_json llama32_rope = llama3_rope;
  llama32_rope["factor"] = 32.0;
  const std::vector<Special> llama3_specials = {{128000, "<|begin_of_text|>"},   {128001, "<|end_of_text|>"},
                                                {128006, "<|start_header_id|>"}, {128007, "<|end_header_id|>"},
                                                {128008, "<|eom_id|>"},          {128009, "<|eot_id|>"}};
  const std::vector<Special> qwen_specials = {
      {151643, "<|endoftext|>"}, {151644, "<|im_start|>"}, {151645, "<|im_end|>"}};
  return {
      {"smollm2-135m",
       "llama",
       576,
       1536,
       30,
       9,
       3,
       64,
       49152,
       8192,
       1e-5,
       100000.0,
       true,
       false,
       1,
       {2},
       {{0, "<|endoftext|>"}, {1, "<|im_start|>"}, {2, "<|im_end|>"}},
       nullptr},
      {"tiny-llama",
       "llama",
       64,
       160,
       3,
       4,
       2,
       16,
       512,
       4096,
       1e-5,
       10000.0,
       false,
       false,
       1,
       {2},
       {{0, "<|endoftext|>"}, {1, "<|im_start|>"}, {2, "<|im_end|>"}},
       nullptr},
      {"llama-3.2-1b",
       "llama",
       2048,
       8192,
       16,
       32,
       8,
       64,
       128256,
       131072,
       1e-5,
       500000.0,
       true,
       false,
       128000,
       {128001, 128008, 128009},
       llama3_specials,
       llama32_rope},
      {"llama-3.1-8b",
       "llama",
       4096,
       14336,
       32,
       32,
       8,
       128,
       128256,
       131072,
       1e-5,
       500000.0,
       false,
       false,
       128000,
       {128001, 128008, 128009},
       llama3_specials,
       llama3_rope},
      {"qwen2.5-0.5b",
       "qwen2",
       896,
       4864,
       24,
       14,
       2,
       64,
       151936,
       32768,
       1e-6,
       1000000.0,
       true,
       true,
       151643,
       {151645, 151643},
       qwen_specials,
       nullptr},
      {"qwen3-0.6b",
       "qwen3",
       1024,
       3072,
       28,
       16,
       8,
       128,
       151936,
       40960,
       1e-6,
       1000000.0,
       true,
       false,
       151643,
       {151645},
       qwen_specials,
       nullptr},
      {"qwen3-8b",
       "qwen3",
       4096,
       12288,
       36,
       32,
       8,
       128,
       151936,
       40960,
       1e-6,
       1000000.0,
       false,
       false,
       151643,
       {151645},
       qwen_specials,
       nullptr},
      // google/gemma-3-1b-it, and the text configs of gemma-3-4b-it, gemma-3-12b-it, gemma-3-27b-it.
      {"gemma3-1b",
       "gemma3_text",
       1152,
       6912,
       26,
       4,
       1,
       256,
       262144,
       32768,
       1e-6,
       1000000.0,
       true,
       false,
       2,
       {1, 106},
       kGemmaSpecials,
       nullptr,
       gemma3_extra(512, 256)},
      {"gemma3-4b",
       "gemma3_text",
       2560,
       10240,
       34,
       8,
       4,
       256,
       262208,
       131072,
       1e-6,
       1000000.0,
       true,
       false,
       2,
       {1, 106},
       kGemmaSpecials,
       gemma3_linear_rope(),
       gemma3_extra(1024, 256)},
      {"gemma3-12b",
       "gemma3_text",
       3840,
       15360,
       48,
       16,
       8,
       256,
       262208,
       131072,
       1e-6,
       1000000.0,
       true,
       false,
       2,
       {1, 106},
       kGemmaSpecials,
       gemma3_linear_rope(),
       gemma3_extra(1024, 256)},
      {"gemma3-27b",
       "gemma3_text",
       5376,
       21504,
       62,
       32,
       16,
       128,
       262208,
       131072,
       1e-6,
       1000000.0,
       true,
       false,
       2,
       {1, 106},
       kGemmaSpecials,
       gemma3_linear_rope(),
       gemma3_extra(1024, 168)},
      // No real model's: the MoE layouts at tiny-llama's size (8 experts of 32, top-2; Mixtral's 4 of
      // 96, top-2), to try the MoE paths in seconds.
      {"tiny-qwen3-moe",
       "qwen3_moe",
       64,
       160,
       3,
       4,
       2,
       16,
       512,
       4096,
       1e-6,
       1000000.0,
       false,
       false,
       1,
       {2},
       {{0, "<|endoftext|>"}, {1, "<|im_start|>"}, {2, "<|im_end|>"}},
       nullptr,
       qwen3_moe_extra(8, 2, 32),
       8,
       32},
      {"tiny-mixtral",
       "mixtral",
       64,
       96,
       3,
       4,
       2,
       16,
       512,
       4096,
       1e-5,
       1000000.0,
       false,
       false,
       1,
       {2},
       {{0, "<|endoftext|>"}, {1, "<|im_start|>"}, {2, "<|im_end|>"}},
       nullptr,
       mixtral_extra(4, 2),
       4,
       96},
      // Qwen/Qwen3-30B-A3B and Qwen/Qwen3-235B-A22B: 128 experts, top-8.
      {"qwen3-30b-a3b",
       "qwen3_moe",
       2048,
       6144,
       48,
       32,
       4,
       128,
       151936,
       40960,
       1e-6,
       1000000.0,
       false,
       false,
       151643,
       {151645},
       qwen_specials,
       nullptr,
       qwen3_moe_extra(128, 8, 768),
       128,
       768},
      {"qwen3-235b-a22b",
       "qwen3_moe",
       4096,
       12288,
       94,
       64,
       4,
       128,
       151936,
       40960,
       1e-6,
       1000000.0,
       false,
       false,
       151643,
       {151645},
       qwen_specials,
       nullptr,
       qwen3_moe_extra(128, 8, 1536),
       128,
       1536},
      // mistralai/Mixtral-8x7B-v0.1 and Mixtral-8x22B-v0.1: 8 experts, top-2.
      {"mixtral-8x7b",
       "mixtral",
       4096,
       14336,
       32,
       32,
       8,
       128,
       32000,
       32768,
       1e-5,
       1000000.0,
       false,
       false,
       1,
       {2},
       kMistralSpecials,
       nullptr,
       mixtral_extra(8, 2),
       8,
       14336},
      {"mixtral-8x22b",
       "mixtral",
       6144,
       16384,
       56,
       48,
       8,
       128,
       32000,
       65536,
       1e-5,
       1000000.0,
       false,
       false,
       1,
       {2},
       kMistralSpecials,
       nullptr,
       mixtral_extra(8, 2),
       8,
       16384},
  };
}

// Gemma 3's chat template (the instruction-tuned checkpoints' tokenizer_config.json).
const char* const kGemma3ChatTemplate = R"TPL({{ bos_token }}
{%- if messages[0]['role'] == 'system' -%}
    {%- if messages[0]['content'] is string -%}
        {%- set first_user_prefix = messages[0]['content'] + '

' -%}
    {%- else -%}
        {%- set first_user_prefix = messages[0]['content'][0]['text'] + '

' -%}
    {%- endif -%}
    {%- set loop_messages = messages[1:] -%}
{%- else -%}
    {%- set first_user_prefix = "" -%}
    {%- set loop_messages = messages -%}
{%- endif -%}
{%- for message in loop_messages -%}
    {%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}
        {{ raise_exception("Conversation roles must alternate user/assistant/user/assistant/...") }}
    {%- endif -%}
    {%- if (message['role'] == 'assistant') -%}
        {%- set role = "model" -%}
    {%- else -%}
        {%- set role = message['role'] -%}
    {%- endif -%}
    {{ '<start_of_turn>' + role + '
' + (first_user_prefix if loop.first else "") }}
    {%- if message['content'] is string -%}
        {{ message['content'] | trim }}
    {%- elif message['content'] is iterable -%}
        {%- for item in message['content'] -%}
            {%- if item['type'] == 'image' -%}
                {{ '<start_of_image>' }}
            {%- elif item['type'] == 'text' -%}
                {{ item['text'] | trim }}
            {%- endif -%}
        {%- endfor -%}
    {%- else -%}
        {{ raise_exception("Invalid content type") }}
    {%- endif -%}
    {{ '<end_of_turn>
' }}
{%- endfor -%}
{%- if add_generation_prompt -%}
    {{'<start_of_turn>model
'}}
{%- endif -%}
)TPL";

}  // namespace vosti::tools
