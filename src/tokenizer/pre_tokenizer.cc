#include "tokenizer/pre_tokenizer.h"

#include <nlohmann/json.hpp>

#include "tokenizer/split_patterns.h"
#include "tokenizer/utf8.h"

namespace vosti {
namespace {

constexpr const char* kGpt2Split = kGpt2SplitPattern;
constexpr const char* kLlama3Split = kLlama3SplitPattern;
constexpr const char* kQwen2Split = kQwen2SplitPattern;
constexpr const char* kMetaspaceChar = "\xE2\x96\x81";  // U+2581

struct Segment {
  size_t start, end;
  bool is_match;
};

PreTokenizer::Step::Native native_for(const std::string& pattern) {
  if (pattern == kGpt2SplitPattern) return PreTokenizer::Step::Native::kGpt2;
  if (pattern == kNumberCharPattern) return PreTokenizer::Step::Native::kNumberChar;
  if (pattern == kLlama3SplitPattern) return PreTokenizer::Step::Native::kLlama3;
  if (pattern == kQwen2SplitPattern) return PreTokenizer::Step::Native::kQwen2;
  return PreTokenizer::Step::Native::kNone;
}

std::vector<RegexMatch> find_matches(const PreTokenizer::Step& step, std::string_view text) {
  switch (step.native) {
    case PreTokenizer::Step::Native::kGpt2:
      return gpt2_split_matches(text);
    case PreTokenizer::Step::Native::kNumberChar:
      return number_char_matches(text);
    case PreTokenizer::Step::Native::kLlama3:
      return llama3_split_matches(text, 3);
    case PreTokenizer::Step::Native::kQwen2:
      return llama3_split_matches(text, 1);
    case PreTokenizer::Step::Native::kNone:
      break;
  }
  return step.regex->find_all(text);
}

// HF's NormalizedString::split: segments of `text` by regex matches, then the behaviour.
std::vector<Segment> split_segments(std::string_view text, const PreTokenizer::Step& step, SplitBehavior behavior) {
  std::vector<Segment> raw;
  size_t last = 0;
  for (const auto& m : find_matches(step, text)) {
    if (m.start > last) raw.push_back({last, m.start, false});
    raw.push_back({m.start, m.end, true});
    last = m.end;
  }
  if (last < text.size()) raw.push_back({last, text.size(), false});
  std::vector<Segment> out;
  bool previous_match = false;
  switch (behavior) {
    case SplitBehavior::kIsolated:
      return raw;
    case SplitBehavior::kRemoved:
      for (const auto& s : raw)
        if (!s.is_match) out.push_back(s);
      return out;
    case SplitBehavior::kMergedWithPrevious:
      for (const auto& s : raw) {
        if (s.is_match && !previous_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back({s.start, s.end, false});
        previous_match = s.is_match;
      }
      return out;
    case SplitBehavior::kMergedWithNext:
      for (auto it = raw.rbegin(); it != raw.rend(); ++it) {
        if (it->is_match && !previous_match && !out.empty())
          out.back().start = it->start;
        else
          out.push_back({it->start, it->end, false});
        previous_match = it->is_match;
      }
      return {out.rbegin(), out.rend()};
    case SplitBehavior::kContiguous:
      for (const auto& s : raw) {
        if (s.is_match && previous_match && !out.empty())
          out.back().end = s.end;
        else
          out.push_back(s);
        previous_match = s.is_match;
      }
      return out;
  }
  return raw;
}

std::string replace_spaces(std::string_view s, const std::string& replacement) {
  std::string out;
  out.reserve(s.size() + 8);
  for (char c : s) {
    if (c == ' ')
      out.append(replacement);
    else
      out.push_back(c);
  }
  return out;
}

Result<SplitBehavior> parse_behavior(const std::string& name) {
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return invalid_argument("unknown pre-tokenizer split behavior '" + name + "'");
}

// Escapes a literal string for use as an Oniguruma pattern.
std::string regex_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (std::string_view("\\^$.|?*+()[]{}-/").find(c) != std::string_view::npos) out.push_back('\\');
    out.push_back(c);
  }
  return out;
}

}  // namespace

Status PreTokenizer::add_split(const std::string& pattern, SplitBehavior behavior) {
  VOSTI_ASSIGN_OR_RETURN(auto re, Regex::compile(pattern));
  Step step;
  step.kind = Step::Kind::kSplit;
  step.regex = std::move(re);
  step.native = native_for(pattern);
  step.behavior = behavior;
  steps_.push_back(std::move(step));
  return Status();
}

Status PreTokenizer::add_byte_level(bool add_prefix_space, bool use_regex) {
  Step step;
  step.kind = Step::Kind::kByteLevel;
  step.add_prefix_space = add_prefix_space;
  if (use_regex) {
    VOSTI_ASSIGN_OR_RETURN(step.regex, Regex::compile(kGpt2Split));
    step.native = Step::Native::kGpt2;
  }
  steps_.push_back(std::move(step));
  return Status();
}

Status PreTokenizer::add(const nlohmann::json& j) {
  if (j.is_null()) return Status();
  const std::string type = j.value("type", "");
  if (type == "Sequence") {
    for (const auto& sub : j.at("pretokenizers")) VOSTI_RETURN_IF_ERROR(add(sub));
    return Status();
  }
  if (type == "Split") {
    if (j.value("invert", false)) return unimplemented("pre-tokenizer Split with invert=true is not supported");
    const auto& p = j.at("pattern");
    const std::string pattern =
        p.contains("Regex") ? p.at("Regex").get<std::string>() : regex_escape(p.at("String").get<std::string>());
    VOSTI_ASSIGN_OR_RETURN(auto behavior, parse_behavior(j.at("behavior").get<std::string>()));
    return add_split(pattern, behavior);
  }
  if (type == "ByteLevel") return add_byte_level(j.value("add_prefix_space", false), j.value("use_regex", true));
  if (type == "Digits") {
    return add_split("\\p{N}",
                     j.value("individual_digits", false) ? SplitBehavior::kIsolated : SplitBehavior::kContiguous);
  }
  if (type == "Metaspace") {
    Step step;
    step.kind = Step::Kind::kMetaspace;
    step.replacement = j.value("replacement", std::string(kMetaspaceChar));
    const std::string scheme = j.contains("prepend_scheme") ? j.at("prepend_scheme").get<std::string>()
                                                            : (j.value("add_prefix_space", true) ? "always" : "never");
    if (scheme == "always")
      step.prepend = Step::Prepend::kAlways;
    else if (scheme == "first")
      step.prepend = Step::Prepend::kFirst;
    else if (scheme == "never")
      step.prepend = Step::Prepend::kNever;
    else
      return invalid_argument("unknown Metaspace prepend_scheme '" + scheme + "'");
    step.split = j.value("split", true);
    if (step.split) {
      VOSTI_ASSIGN_OR_RETURN(step.regex, Regex::compile(regex_escape(step.replacement)));
      step.behavior = SplitBehavior::kMergedWithNext;
    }
    steps_.push_back(std::move(step));
    return Status();
  }
  return unimplemented("tokenizer.json pre_tokenizer type '" + type +
                       "' is not supported (supported: Sequence, Split, ByteLevel, Digits, Metaspace)");
}

Result<PreTokenizer> PreTokenizer::from_json(const nlohmann::json& j) {
  PreTokenizer p;
  try {
    VOSTI_RETURN_IF_ERROR(p.add(j));
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument(std::string("malformed tokenizer.json pre_tokenizer: ") + e.what());
  }
  return p;
}

Result<PreTokenizer> PreTokenizer::for_gguf_pre(const std::string& pre_name) {
  PreTokenizer p;
  if (pre_name == "default" || pre_name == "gpt2" || pre_name.empty()) {
    VOSTI_RETURN_IF_ERROR(p.add_byte_level(false, true));
  } else if (pre_name == "smollm") {
    VOSTI_RETURN_IF_ERROR(p.add_split("\\p{N}", SplitBehavior::kIsolated));
    VOSTI_RETURN_IF_ERROR(p.add_byte_level(false, true));
  } else if (pre_name == "llama3" || pre_name == "llama-v3" || pre_name == "llama-bpe" || pre_name == "smaug-bpe" ||
             pre_name == "falcon3" || pre_name == "dbrx") {
    VOSTI_RETURN_IF_ERROR(p.add_split(kLlama3Split, SplitBehavior::kIsolated));
    VOSTI_RETURN_IF_ERROR(p.add_byte_level(false, false));
  } else if (pre_name == "qwen2" || pre_name == "deepseek-r1-qwen") {
    VOSTI_RETURN_IF_ERROR(p.add_split(kQwen2Split, SplitBehavior::kIsolated));
    VOSTI_RETURN_IF_ERROR(p.add_byte_level(false, false));
  } else {
    return unimplemented("GGUF tokenizer.ggml.pre '" + pre_name +
                         "' is not supported (supported: gpt2, smollm, llama-bpe/llama3, qwen2)");
  }
  return p;
}

PreTokenizer PreTokenizer::metaspace(bool add_prefix_space) {
  PreTokenizer p;
  Step step;
  step.kind = Step::Kind::kMetaspace;
  step.replacement = kMetaspaceChar;
  step.prepend = add_prefix_space ? Step::Prepend::kFirst : Step::Prepend::kNever;
  step.split = false;
  p.steps_.push_back(std::move(step));
  return p;
}

bool PreTokenizer::byte_level() const {
  for (const auto& s : steps_)
    if (s.kind == Step::Kind::kByteLevel) return true;
  return false;
}

std::vector<PreToken> PreTokenizer::pre_tokenize(std::string_view text, bool at_start) const {
  std::vector<PreToken> pieces;
  if (text.empty()) return pieces;
  pieces.push_back({std::string(text), at_start});
  for (const auto& step : steps_) {
    std::vector<PreToken> next;
    next.reserve(pieces.size() * 2);
    for (auto& piece : pieces) {
      std::string s = std::move(piece.text);
      if (step.kind == Step::Kind::kByteLevel && step.add_prefix_space && !s.empty() && s[0] != ' ')
        s = std::string(" ") + s;
      if (step.kind == Step::Kind::kMetaspace) {
        s = replace_spaces(s, step.replacement);
        const bool starts = s.compare(0, step.replacement.size(), step.replacement) == 0;
        const bool prepend =
            step.prepend == Step::Prepend::kAlways || (step.prepend == Step::Prepend::kFirst && piece.at_start);
        if (prepend && !starts && !s.empty()) s = step.replacement + s;
      }
      std::vector<Segment> segments;
      if (step.regex) {
        segments = split_segments(s, step, step.behavior);
      } else {
        segments.push_back({0, s.size(), false});
      }
      for (const auto& seg : segments) {
        if (seg.end <= seg.start) continue;
        std::string_view part = std::string_view(s).substr(seg.start, seg.end - seg.start);
        PreToken out{step.kind == Step::Kind::kByteLevel ? gpt2_chars_from_bytes(part) : std::string(part),
                     piece.at_start && seg.start == 0};
        next.push_back(std::move(out));
      }
    }
    pieces = std::move(next);
  }
  return pieces;
}

}  // namespace vosti
