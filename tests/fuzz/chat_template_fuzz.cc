// fuzz-libs: vosti_tokenizer
// Fuzzes the chat-template interpreter two ways: (1) the input is a template source,
// parsed and rendered against a small conversation (errors are fine, crashes and hangs
// are not); (2) the first byte picks a real template (SmolLM2, Qwen2.5, Qwen3, Llama
// 3.2/3.3) and the rest is message content, which must always render.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "tokenizer/chat_template.h"
#include "tokenizer/utf8.h"

namespace {

const std::vector<vosti::ChatTemplate>& real_templates() {
  static const auto all = [] {
    const auto dir = std::filesystem::path(__FILE__).parent_path().parent_path() / "tokenizer" / "data" / "templates";
    std::vector<vosti::ChatTemplate> out;
    for (const char* name : {"smollm2", "qwen2_5", "qwen3", "llama3_2", "llama3_3"}) {
      std::ifstream in(dir / (std::string(name) + ".jinja"));
      std::stringstream ss;
      ss << in.rdbuf();
      auto t = vosti::ChatTemplate::parse(ss.str());
      if (!t.ok()) std::abort();
      out.push_back(*t);
    }
    return out;
  }();
  return all;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string input(reinterpret_cast<const char*>(data + 1), size - 1);
  vosti::ChatOptions options;
  options.add_generation_prompt = (data[0] & 1) != 0;
  options.bos_token = "<s>";
  if (data[0] & 2) options.enable_thinking = (data[0] & 4) != 0;
  if (data[0] < 128) {
    auto tmpl = vosti::ChatTemplate::parse(input);
    if (!tmpl.ok()) return 0;
    const std::vector<vosti::ChatMessage> messages = {
        {"system", "sys"}, {"user", "hello"}, {"assistant", "<think>r</think>answer"}, {"user", "again"}};
    (void)tmpl->render(messages, options);
    return 0;
  }
  const auto& all = real_templates();
  const std::string content = vosti::repair_utf8(input);
  const std::vector<vosti::ChatMessage> messages = {
      {"system", content}, {"user", content}, {"assistant", content}, {"user", content}};
  auto out = all[data[0] % all.size()].render(messages, options);
  if (!out.ok()) std::abort();
  return 0;
}
