// ToolCallStream: one choice's output text as it grows -> OpenAI chat deltas: content that can no
// longer start a tool call, and tool-call deltas (a call's index, id and name first, then its
// argument fragments), which join to exactly what the non-streamed response holds.
//
// Each push re-parses the whole text so far (ToolCallParser::parse with final = false) and sends
// what it holds beyond what was sent: parsers keep content and arguments prefix-stable. finish()
// parses the complete text: a format the text broke after all gives no calls, and what was held
// back goes out as content.
// Thread safety: one choice's; not shared.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "server/tool_call_parser.h"

namespace vosti {

// One tool call in a response: all of it (non-streaming), or a delta of it (streaming: id and
// name only in the call's first delta).
struct ToolCallOut {
  int32_t index = 0;
  std::string id;  // "call_..."; empty after a call's first delta
  std::string name;
  std::string arguments;
};

struct ToolDelta {
  std::string content;
  std::vector<ToolCallOut> calls;
};

class ToolCallStream {
 public:
  // `make_id` names each new call.
  ToolCallStream(std::shared_ptr<const ToolCallParser> parser, std::function<std::string()> make_id);

  // Appends `text` to the output and returns what may be sent now.
  ToolDelta push(std::string_view text);
  // The output is complete: what is left to send.
  ToolDelta finish();
  // Whether any call was sent.
  bool called() const { return !sent_.empty(); }

 private:
  ToolDelta send(const ToolCallParse& parse);

  struct SentCall {
    std::string name;
    size_t arguments_sent = 0;
  };
  std::shared_ptr<const ToolCallParser> parser_;
  std::function<std::string()> make_id_;
  std::string text_;
  size_t content_sent_ = 0;
  std::vector<SentCall> sent_;
};

// A new call id: "call_" and 24 random hex digits.
std::string new_tool_call_id();

// The whole output's calls (non-streaming), each named by `make_id`; `content` the rest.
struct ToolAnswer {
  std::string content;
  std::vector<ToolCallOut> calls;
};
ToolAnswer parse_tool_answer(const ToolCallParser& parser, std::string_view text,
                             const std::function<std::string()>& make_id);

}  // namespace vosti
