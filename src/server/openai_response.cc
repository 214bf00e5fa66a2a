#include "server/openai_response.h"

#include <cstdio>

#include "server/json_writer.h"

namespace vosti {
namespace {

void write_bytes(JsonWriter& w, const std::string& s) {
  w.key("bytes").begin_array();
  for (unsigned char c : s) w.value(static_cast<int64_t>(c));
  w.end_array();
}

// Completions: {"tokens","token_logprobs","top_logprobs","text_offset"}, prompt positions first.
void write_completion_logprobs(JsonWriter& w, const ResponseContext& ctx, const ChoiceOutput& c) {
  w.begin_object();
  std::vector<const PositionLogprobs*> all;
  for (const auto& p : c.prompt_logprobs) all.push_back(&p);
  for (const auto& p : c.logprobs) all.push_back(&p);
  std::vector<std::string> pieces;
  for (const auto* p : all) pieces.push_back(ctx.piece(p->token));
  w.key("tokens").begin_array();
  for (const auto& s : pieces) w.value(s);
  w.end_array();
  w.key("token_logprobs").begin_array();
  for (size_t i = 0; i < all.size(); ++i) {
    if (i == 0 && !c.prompt_logprobs.empty()) {
      w.null();  // the first prompt token has no context to score it
    } else {
      w.value(all[i]->logprob);
    }
  }
  w.end_array();
  w.key("top_logprobs").begin_array();
  for (size_t i = 0; i < all.size(); ++i) {
    if (i == 0 && !c.prompt_logprobs.empty()) {
      w.null();
      continue;
    }
    w.begin_object();
    for (const auto& t : all[i]->top) w.key(ctx.piece(t.token)).value(t.logprob);
    w.end_object();
  }
  w.end_array();
  w.key("text_offset").begin_array();
  int64_t offset = c.text_offset;
  for (const auto& s : pieces) {
    w.value(offset);
    offset += static_cast<int64_t>(s.size());
  }
  w.end_array();
  w.end_object();
}

// Chat: {"content":[{"token","logprob","bytes","top_logprobs":[...]}]}.
void write_chat_logprobs(JsonWriter& w, const ResponseContext& ctx, const ChoiceOutput& c) {
  w.begin_object().key("content").begin_array();
  for (const auto& p : c.logprobs) {
    const std::string s = ctx.piece(p.token);
    w.begin_object().key("token").value(s).key("logprob").value(p.logprob);
    write_bytes(w, s);
    w.key("top_logprobs").begin_array();
    for (const auto& t : p.top) {
      const std::string ts = ctx.piece(t.token);
      w.begin_object().key("token").value(ts).key("logprob").value(t.logprob);
      write_bytes(w, ts);
      w.end_object();
    }
    w.end_array().end_object();
  }
  w.end_array().end_object();
}

void write_ids(JsonWriter& w, const char* name, const std::vector<int32_t>& ids) {
  w.key(name).begin_array();
  for (int32_t id : ids) w.value(id);
  w.end_array();
}

// "routed_experts": [position][MoE layer][k], in a finished choice only.
void write_routed(JsonWriter& w, const ChoiceOutput& c) {
  const RoutedExperts& r = c.routed_experts;
  w.key("routed_experts").begin_array();
  const int64_t positions = r.num_positions();
  for (int64_t p = 0; p < positions; ++p) {
    w.begin_array();
    for (int32_t l = 0; l < r.num_layers; ++l) {
      w.begin_array();
      for (int32_t k = 0; k < r.top_k; ++k) w.value(r.ids[static_cast<size_t>((p * r.num_layers + l) * r.top_k + k)]);
      w.end_array();
    }
    w.end_array();
  }
  w.end_array();
}

// The fields every choice shares after its content: logprobs, finish, extensions.
void write_choice_tail(JsonWriter& w, const ResponseContext& ctx, const ChoiceOutput& c) {
  w.key("logprobs");
  if (!ctx.logprobs) {
    w.null();
  } else if (ctx.endpoint == Endpoint::kCompletions) {
    write_completion_logprobs(w, ctx, c);
  } else {
    write_chat_logprobs(w, ctx, c);
  }
  w.key("finish_reason");
  if (c.finish_reason) {
    // A finished choice always has a reason; kNone would be an engine bug, reported as "stop".
    const FinishReason r = *c.finish_reason;
    const bool tools = c.called_tools && (r == FinishReason::kNone || r == FinishReason::kStop);
    w.value(tools ? "tool_calls" : r == FinishReason::kNone ? "stop" : finish_reason_name(r));
  } else {
    w.null();
  }
  w.key("seed").value(c.seed);
  if (ctx.return_token_ids) {
    if (c.prompt_token_ids) write_ids(w, "prompt_token_ids", *c.prompt_token_ids);
    write_ids(w, "token_ids", c.token_ids);
  }
  if (ctx.logits_digests) {
    w.key("logits_digests").begin_array();
    for (size_t i = 0; i < c.prompt_digests.size(); ++i) {
      if (i == 0) {
        w.null();  // the first prompt token: no row scored it
      } else {
        w.value(digest_hex(c.prompt_digests[i]));
      }
    }
    for (const auto& d : c.digests) w.value(digest_hex(d));
    w.end_array();
  }
  if (ctx.routed_experts && c.finish_reason) write_routed(w, c);
  if (ctx.sampling_masks) {
    w.key("sampling_masks").begin_array();
    for (const SamplingSupport& s : c.sampling_masks) {
      if (s.every_token) {
        w.null();  // no filter dropped a token
      } else {
        w.begin_array();
        for (int32_t id : s.kept) w.value(id);
        w.end_array();
      }
    }
    w.end_array();
  }
}

// "tool_calls": [{"index"?, "id", "type", "function": {"name", "arguments"}}]; a delta leaves out
// the id, type and name after a call's first fragment.
void write_tool_calls(JsonWriter& w, const std::vector<ToolCallOut>& calls, bool delta) {
  w.key("tool_calls").begin_array();
  for (const ToolCallOut& c : calls) {
    w.begin_object();
    if (delta) w.key("index").value(c.index);
    if (!delta || !c.id.empty()) w.key("id").value(c.id).key("type").value("function");
    w.key("function").begin_object();
    if (!delta || !c.id.empty()) w.key("name").value(c.name);
    w.key("arguments").value(c.arguments).end_object();
    w.end_object();
  }
  w.end_array();
}

void write_header(JsonWriter& w, const ResponseContext& ctx, const char* object) {
  w.key("id").value(ctx.id).key("object").value(object).key("created").value(ctx.created);
  w.key("model").value(ctx.model).key("system_fingerprint").value("vosti");
  if (ctx.deployment) {
    w.key("vosti").begin_object().key("deployment_id").value(ctx.deployment->deployment_id);
    w.key("weights_id").value(ctx.deployment->weights_id);
    w.key("weights_version").value(ctx.deployment->weights_version).end_object();
  }
}

void write_usage(JsonWriter& w, const Usage& u) {
  w.key("usage").begin_object();
  w.key("prompt_tokens").value(u.prompt_tokens).key("completion_tokens").value(u.completion_tokens);
  w.key("total_tokens").value(u.prompt_tokens + u.completion_tokens);
  w.key("prompt_tokens_details").begin_object().key("cached_tokens").value(u.cached_tokens).end_object();
  w.end_object();
}

}  // namespace

std::string full_response_body(const ResponseContext& ctx, const std::vector<ChoiceOutput>& choices,
                               const Usage& usage) {
  const bool chat = ctx.endpoint == Endpoint::kChatCompletions;
  JsonWriter w;
  w.begin_object();
  write_header(w, ctx, chat ? "chat.completion" : "text_completion");
  w.key("choices").begin_array();
  for (const auto& c : choices) {
    w.begin_object().key("index").value(c.index);
    if (chat) {
      w.key("message").begin_object().key("role").value("assistant").key("content");
      if (c.tool_calls.empty() || !c.text.empty()) {
        w.value(c.text);
      } else {
        w.null();  // OpenAI's shape of a message that only calls tools
      }
      if (!c.tool_calls.empty()) write_tool_calls(w, c.tool_calls, /*delta=*/false);
      w.end_object();
    } else {
      w.key("text").value(c.text);
    }
    write_choice_tail(w, ctx, c);
    w.end_object();
  }
  w.end_array();
  write_usage(w, usage);
  w.end_object();
  return w.take();
}

std::string chunk_body(const ResponseContext& ctx, const ChoiceOutput& delta, bool first) {
  const bool chat = ctx.endpoint == Endpoint::kChatCompletions;
  JsonWriter w;
  w.begin_object();
  write_header(w, ctx, chat ? "chat.completion.chunk" : "text_completion");
  w.key("choices").begin_array().begin_object().key("index").value(delta.index);
  if (chat) {
    w.key("delta").begin_object();
    if (first) w.key("role").value("assistant");
    if (!delta.text.empty() || (!delta.finish_reason && delta.tool_calls.empty())) w.key("content").value(delta.text);
    if (!delta.tool_calls.empty()) write_tool_calls(w, delta.tool_calls, /*delta=*/true);
    w.end_object();
  } else {
    w.key("text").value(delta.text);
  }
  write_choice_tail(w, ctx, delta);
  w.end_object().end_array();
  w.end_object();
  return w.take();
}

std::string usage_chunk_body(const ResponseContext& ctx, const Usage& usage) {
  const bool chat = ctx.endpoint == Endpoint::kChatCompletions;
  JsonWriter w;
  w.begin_object();
  write_header(w, ctx, chat ? "chat.completion.chunk" : "text_completion");
  w.key("choices").begin_array().end_array();
  write_usage(w, usage);
  w.end_object();
  return w.take();
}

std::string sse_event(std::string_view json) {
  std::string out;
  out.reserve(json.size() + 8);
  out.append("data: ").append(json).append("\n\n");
  return out;
}

}  // namespace vosti
