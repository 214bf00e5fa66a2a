// Tool-call deltas of a streamed choice (server/tool_call_stream.h).
#include "server/tool_call_stream.h"

#include <cstdio>
#include <random>

namespace vosti {

std::string new_tool_call_id() {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[40];
  std::snprintf(buf, sizeof(buf), "call_%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return buf;
}

ToolCallStream::ToolCallStream(std::shared_ptr<const ToolCallParser> parser, std::function<std::string()> make_id)
    : parser_(std::move(parser)), make_id_(std::move(make_id)) {}

ToolDelta ToolCallStream::push(std::string_view text) {
  text_.append(text);
  return send(parser_->parse(text_, /*final=*/false));
}

ToolDelta ToolCallStream::finish() { return send(parser_->parse(text_, /*final=*/true)); }

ToolDelta ToolCallStream::send(const ToolCallParse& parse) {
  ToolDelta out;
  // Content and arguments only grow (the parsers keep them prefix-stable); a final parse that
  // disagrees with what was sent (a call that broke its format) sends only what is new.
  if (parse.content.size() > content_sent_ && parse.content.compare(0, content_sent_, text_, 0, content_sent_) == 0) {
    out.content = parse.content.substr(content_sent_);
    content_sent_ = parse.content.size();
  }
  for (size_t i = 0; i < parse.calls.size(); ++i) {
    const ParsedToolCall& call = parse.calls[i];
    ToolCallOut d;
    d.index = static_cast<int32_t>(i);
    if (i >= sent_.size()) {
      sent_.push_back(SentCall{call.name, 0});
      d.id = make_id_();
      d.name = call.name;
    } else if (sent_[i].name != call.name) {
      continue;
    }
    SentCall& s = sent_[i];
    if (call.arguments.size() > s.arguments_sent) {
      d.arguments = call.arguments.substr(s.arguments_sent);
      s.arguments_sent = call.arguments.size();
    }
    if (!d.id.empty() || !d.arguments.empty()) out.calls.push_back(std::move(d));
  }
  return out;
}

ToolAnswer parse_tool_answer(const ToolCallParser& parser, std::string_view text,
                             const std::function<std::string()>& make_id) {
  ToolCallParse parse = parser.parse(text, /*final=*/true);
  ToolAnswer out;
  out.content = std::move(parse.content);
  for (size_t i = 0; i < parse.calls.size(); ++i) {
    out.calls.push_back(ToolCallOut{static_cast<int32_t>(i), make_id(), std::move(parse.calls[i].name),
                                    std::move(parse.calls[i].arguments)});
  }
  return out;
}

}  // namespace vosti
